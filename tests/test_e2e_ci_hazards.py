"""No silent hazard in CI: a run that would quietly run less, read another file
than every other run, or crash, says so or stops cleanly (issue 51)."""

from __future__ import annotations

import pytest
from support.dagtester import DagTester

TWO = """
    def test_1():
        mark("test_1")


    def test_2():
        mark("test_2")
"""


def clean_usage_error(result: pytest.RunResult, *messages: str) -> None:
    """Exit status 4, ``messages`` on stderr, no traceback nor INTERNALERROR."""
    out = result.stdout.str() + result.stderr.str()
    assert result.ret == pytest.ExitCode.USAGE_ERROR, out
    result.stderr.fnmatch_lines(list(messages))
    assert "INTERNALERROR" not in out and "Traceback" not in out, out


# -- an edges file that cannot be read: the same usage error under -n as serially --------


@pytest.mark.parametrize(("content", "why"), [
    ("{not json", "is not JSON*"),
    ('{"version": 2, "edges": []}', "is not a version 1 edges file*"),
    ('{"test_m.py::test_1": 0.5, "test_m.py::test_2": 0.25}', "is not a version 1 edges file*"),
    ('{"version": 1, "edges": [{"test": "test_m.py::test_2"}]}',
     "edge * needs a 'test' and an 'after' node id*"),
], ids=["not-json", "version-2", "durations-shaped", "edge-without-after"])
def test_an_unreadable_edges_file_is_a_usage_error(dagtester: DagTester, content: str,
                                                   why: str) -> None:
    dagtester.modules(test_m=TWO)
    (dagtester.path / "edges.json").write_text(content)
    result = dagtester.run("--dag-edges=edges.json")
    clean_usage_error(result, f"*--dag-edges *edges.json: {why}fix or delete the file*")
    assert dagtester.ran() == {}
    assert (dagtester.path / "edges.json").read_text() == content


@pytest.mark.parametrize("key", ["dag_edges", "dag_durations"])
def test_a_path_key_given_as_a_list_is_a_usage_error(dagtester: DagTester, key: str) -> None:
    dagtester.modules(test_m=TWO)
    dagtester.ini(f"{key} =\n    a.json\n    b.json\n")
    result = dagtester.run()
    clean_usage_error(result, f"*ini {key} = *is not one path; name one file*")
    assert dagtester.ran() == {}


# -- no silent path ------------------------------------------------------------------


EDGE_FILE = ('{"version": 1, "edges": [{"test": "tests/test_m.py::test_1", '
             '"after": "tests/test_m.py::test_2"}]}')


def test_every_path_option_is_relative_to_the_rootdir(dagtester: DagTester,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """Run from a subfolder, the edges file and the durations file are read, and
    the graph written, where a run from the rootdir reads and writes them."""
    dagtester.modules(tests__test_m=TWO)
    (dagtester.path / "edges.json").write_text(EDGE_FILE)
    (dagtester.path / "durations.json").write_text('{"tests/test_m.py::test_1": 0.5}')
    monkeypatch.chdir(dagtester.path / "tests")
    result = dagtester.run("--dag-edges=edges.json", "--dag-durations=durations.json",
                           "--dag-graph=graph.json", "-v")
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(["*1 edge and 0 resources from edges.json*"])
    result.stdout.no_fnmatch_line("*no durations file*")
    assert (dagtester.path / "graph.json").exists()
    ran = dagtester.ran()
    assert ran["test_1"].start >= ran["test_2"].end


def test_a_path_value_pytest_took_for_a_test_path_is_a_usage_error(
        dagtester: DagTester, tmp_path_factory: pytest.TempPathFactory) -> None:
    dagtester.modules(test_m=TWO)
    outside = tmp_path_factory.mktemp("outside") / "edges.json"
    outside.write_text('{"version": 1, "edges": []}')
    result = dagtester.run("--dag-edges", str(outside))
    clean_usage_error(result, f"*--dag-edges {outside}: pytest takes a value in this form for "
                              "a test path too, and looked for the rootdir there: rootdir * "
                              f"instead of {dagtester.path}*; write --dag-edges={outside}*")
    assert dagtester.ran() == {}
    # The = form is never misread.
    dagtester.run(f"--dag-edges={outside}").assert_outcomes(passed=2)


def test_a_path_value_among_the_test_paths_is_a_usage_error(dagtester: DagTester) -> None:
    dagtester.modules(test_m=TWO)
    result = dagtester.run("--dag-graph", "g.json", "g.json", "test_m.py")
    clean_usage_error(result, "*--dag-graph g.json: *collects it as a test path; "
                              "write --dag-graph=g.json*")


def test_missing_files_are_one_header_line_each(dagtester: DagTester) -> None:
    dagtester.modules(test_m=TWO)
    result = dagtester.run("--dag-edges=edges.json", "--dag-durations=durations.json")
    result.assert_outcomes(passed=2)
    out = result.stdout.str()
    assert out.count("no edges file at") == 1, out
    assert out.count(f"no durations file at {dagtester.path / 'durations.json'} yet "
                     "(--dag-store-durations writes one)") == 1, out


def test_storing_durations_never_creates_a_directory(dagtester: DagTester) -> None:
    dagtester.modules(test_m=TWO)
    result = dagtester.run("--dag-durations=typo/deeper/d.json", "--dag-store-durations")
    clean_usage_error(result, "*--dag-store-durations cannot write durations file "
                              f"*d.json*: directory '{dagtester.path / 'typo'}' does not exist*")
    assert not (dagtester.path / "typo").exists()
    assert dagtester.ran() == {}


def test_storing_durations_ends_with_the_file_and_its_records(dagtester: DagTester) -> None:
    dagtester.modules(test_m=TWO)
    (dagtester.path / "d.json").write_text('{"gone.py::test_old": 1.0}')
    result = dagtester.run("--dag-durations=d.json", "--dag-store-durations", "-k", "test_1")
    result.assert_outcomes(passed=1)
    assert result.stdout.lines[-1] == (f"dagorder: durations of 1 test written to "
                                       f"{dagtester.path / 'd.json'} (2 records in the file)")


# -- the header says only what informs -------------------------------------------------

CHAIN = """
    def test_a():
        mark("test_a")


    @depends_on("test_a")
    def test_b():
        mark("test_b")


    def test_c():
        mark("test_c")
"""


@pytest.mark.dag_modes("xdist")
@pytest.mark.dagtester(cache=True)
def test_a_small_suites_header_is_two_lines_at_most(dagtester: DagTester) -> None:
    """Recorded durations of tests that take nothing: no cost of 0.00 s; one group
    is kept "on one worker", not "on one worker each"."""
    dagtester.modules(test_m=CHAIN)
    dagtester.run().assert_outcomes(passed=3)
    result = dagtester.run()
    result.assert_outcomes(passed=3)
    header = [line for line in result.stdout.lines if line.startswith("dagorder:")]
    assert len(header) <= 2, header
    result.stdout.fnmatch_lines(["dagorder: 1 affinity group keeps 2 of 3 tests on one worker, "
                                 "in serial order*"])
    assert "0.00 s" not in result.stdout.str()
    assert "on one worker each" not in result.stdout.str()


BIG_AND_SMALL = {
    "test_big": """
        def test_1():
            mark("big1")


        @depends_on("test_1")
        def test_2():
            mark("big2")


        @depends_on("test_2")
        def test_3():
            mark("big3")


        @depends_on("test_3")
        def test_4():
            mark("big4")
    """,
    "test_small": """
        def test_x():
            mark("x")


        def test_y():
            mark("y")
    """,
}


def test_no_fair_share_line_for_a_component_outside_the_part(dagtester: DagTester) -> None:
    dagtester.modules(**BIG_AND_SMALL)
    shown = {}
    for k in (1, 2):
        result = dagtester.run(f"--dag-shard={k}/2")
        assert result.ret == 0, result.stdout.str()
        shown[frozenset(dagtester.ran())] = result.stdout.str()
    big = frozenset({"big1", "big2", "big3", "big4"})
    assert set(shown) == {big, frozenset({"x", "y"})}
    assert "the largest component (4 tests tied to test_big.py::test_1)" in shown[big]
    assert "largest component" not in shown[frozenset({"x", "y"})]
    if dagtester.xdist:
        # Which component is over a fair share of the selection is worked out
        # while planning, alike serially and in a worker, and reaches the
        # header as the parts above did: the serial variant checks -k.
        return
    # -k leaves the big chain out of its part: nothing there to be over a fair share.
    for k in (1, 2):
        result = dagtester.run(f"--dag-shard={k}/2", "-k", "test_x or test_y")
        assert "largest component" not in result.stdout.str(), result.stdout.str()


# -- the summary groups stopped tests by their cause, not by parsing a reason ---------


def test_a_stop_after_a_parameter_id_with_a_colon_is_summarised_whole(
        dagtester: DagTester) -> None:
    dagtester.modules(test_stop="""
        @pytest.mark.parametrize("x", ["a: b"])
        def test_a(x):
            mark("test_a")
            assert 0


        @depends_on("test_a")
        def test_b():
            mark("test_b")


        @depends_on("test_b")
        def test_c():
            mark("test_c")


        @run_after("test_a")
        def test_d():
            mark("test_d")
    """)
    result = dagtester.run("--dag-on-failure=stop")
    result.assert_outcomes(failed=1, skipped=3)
    result.stdout.fnmatch_lines(["run stopped after test_a[a: b] failed: 1 test not started"])
    result.stdout.no_fnmatch_line("b] failed: *")


# -- ini dag_strict: what the originals skip through is a collection error -------------

STRICT_CASES = {
    "dependency-unknown": """
        @pytest.mark.dependency()
        def test_a():
            mark("test_a")


        @pytest.mark.dependency(depends=["test_nope"])
        def test_b():
            mark("test_b")
    """,
    "dependency-cycle": """
        @pytest.mark.dependency(depends=["test_b"])
        def test_a():
            mark("test_a")


        @pytest.mark.dependency(depends=["test_a"])
        def test_b():
            mark("test_b")
    """,
    "dependency-unreadable": """
        @pytest.mark.dependency()
        def test_a():
            mark("test_a")


        @pytest.mark.dependency(depends=["test_a"], bogus=1)
        def test_b():
            mark("test_b")
    """,
    "depends-unknown": """
        def test_a():
            mark("test_a")


        @pytest.mark.depends(on=["test_nope"])
        def test_b():
            mark("test_b")
    """,
    "order-unknown": """
        def test_a():
            mark("test_a")


        @pytest.mark.order(after="test_nope")
        def test_b():
            mark("test_b")
    """,
}


#: The cases run under xdist too.  Each case's problem is found while planning
#: (a foreign reader's skip or warning, made a problem by dag_strict), which a
#: serial run and an xdist worker do alike; what xdist adds (the worker's
#: problem ends the session through the controller) does not depend on the
#: case: one case of each kind, a skip and a warning.
STRICT_XDIST = ("dependency-unknown", "dependency-unreadable")


@pytest.mark.dag_modes("own")
@pytest.mark.parametrize(("mode", "case"), [
    *(("serial", case) for case in STRICT_CASES), *(("xdist", case) for case in STRICT_XDIST)],
    ids=[*(f"serial-{case}" for case in STRICT_CASES), *(f"xdist-{case}" for case in STRICT_XDIST)])
def test_strict_makes_what_the_originals_skip_through_a_collection_error(
        dagtester: DagTester, mode: str, case: str) -> None:
    dagtester.modules(test_m=STRICT_CASES[case])
    lenient = dagtester.run("-W", "ignore::pytest.PytestWarning", mode=mode)
    assert lenient.ret == pytest.ExitCode.OK, lenient.stdout.str()
    result = dagtester.run("-o", "dag_strict=true", mode=mode)
    assert result.ret == pytest.ExitCode.INTERRUPTED, result.stdout.str()
    result.stdout.fnmatch_lines(["*(dag_strict: an error here*",
                                 "*Interrupted: 1 error during collection*"])
    assert dagtester.ran() == {}


@pytest.mark.dag_modes("serial")
def test_help_says_every_path_option_is_relative_to_the_rootdir(dagtester: DagTester) -> None:
    text = " ".join(" ".join(dagtester.run("--help").outlines).split())
    for option in ("--dag-durations=PATH", "--dag-edges=PATH", "--dag-graph=PATH",
                   "--dag-timeline=PATH"):
        own = text.split(option, 1)[1].split(" --", 1)[0]
        assert "relative to the rootdir" in own, (option, own)
    assert "dag_strict" in text and "--dag-strict" not in text


# -- a worker crash: state a passed prerequisite left died with the worker ------------


@pytest.mark.dag_modes("xdist")
def test_a_dependent_whose_prerequisites_state_died_in_a_crash_is_skipped_naming_it(
        dagtester: DagTester) -> None:
    """test_store passed on the worker that test_boom then crashed: test_read
    would read STORE in a fresh worker and fail blaming placement; it is skipped
    naming the crash instead, and test_free runs."""
    dagtester.modules(test_m="""
        STORE = {}


        def test_store():
            mark("test_store")
            STORE["x"] = 1


        @depends_on("test_store")
        def test_boom():
            mark("test_boom")
            os._exit(1)


        @depends_on("test_store")
        def test_read():
            mark("test_read")
            assert STORE["x"] == 1


        def test_free():
            mark("test_free")
    """)
    result = dagtester.run("-rs", "--dag-affinity=module")
    ran = dagtester.ran()
    assert "test_read" not in ran, result.stdout.str()
    assert "test_free" in ran and "test_store" in ran
    result.stdout.fnmatch_lines([
        "SKIPPED ?1? test_m.py:*: prerequisite test_store passed on a worker that crashed since "
        "(worker gw* crashed running test_m.py::test_boom): the process state it left "
        "died with it*"])
    result.stdout.fnmatch_lines(["worker gw* crashed running test_m.py::test_boom: "
                                 "1 test not started"])
    result.stdout.no_fnmatch_line("*KeyError*")
