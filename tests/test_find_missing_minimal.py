"""``--dag-find-missing`` gives no advice the suite does not need: one grouping per
group, nothing where the default already keeps the tests on one worker, nothing
the suite's own markers already say."""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import textwrap

import pytest
from support.dagtester import DagTester

pytestmark = [pytest.mark.dag_modes("own"), pytest.mark.dagtester(timeout=300)]
FIND = ("--dag-find-missing", "-n", "2")

#: A module fixture sets up a file at a fixed path that three tests of the module
#: each overwrite and read back: two conflicts (two pairs of one path), one group.
#: The pause between write and read: the overlap probes release both tests at one
#: start line, so a fraction of a second lets the other write in between (every
#: other run, serial, pays it for nothing).
FIXTURE_FILE = """
    import pathlib, time
    import pytest
    HERE = pathlib.Path(__file__).parent

    @pytest.fixture(scope="module")
    def db():
        (HERE / "db.txt").write_text("x")
        yield HERE / "db.txt"

    def test_one(db):
        db.write_text("one")
        time.sleep(0.15)
        assert db.read_text() == "one"

    def test_two(db):
        db.write_text("two")
        time.sleep(0.15)
        assert db.read_text() == "two"

    def test_three(db):
        db.write_text("three")
        time.sleep(0.15)
        assert db.read_text() == "three"
"""


def test_one_group_is_advised_once_and_none_where_the_suites_markers_settle_it(
        dagtester: DagTester) -> None:
    """g/test_db.py: one grouping whatever the conflicts that made it;
    m/test_marked.py, the same tests in xdist_group("db"): no advice.  Each in a
    folder of its own, its db.txt beside it: one pass finds both."""
    marked = textwrap.dedent(FIXTURE_FILE)
    for name in ("one", "two", "three"):
        marked = marked.replace(f"def test_{name}(",
                                f"@pytest.mark.xdist_group('db')\ndef test_{name}(")
    for module, source in (("g/test_db", textwrap.dedent(FIXTURE_FILE)),
                           ("m/test_marked", marked)):
        path = dagtester.path / f"{module}.py"
        path.parent.mkdir()
        path.write_text(source, encoding="utf-8")
    result = dagtester.run(*FIND, "--dag-edges=edges.json")
    assert result.ret == 0, result.stdout.str()
    out, lines = result.stdout.str(), result.stdout.lines
    clashes = [k for k, line in enumerate(lines) if "fail when run at the same time" in line]
    assert [lines[k].count("g/test_db.py") for k in clashes].count(2) == 2, out
    assert out.count('@pytest.mark.xdist_group("g/test_db.py") on each') == 1, out
    result.stdout.fnmatch_lines(['    the group "g/test_db.py" above keeps them on one worker'])
    on_marked = [k for k in clashes if "m/test_marked.py" in lines[k]]
    assert on_marked, out
    assert all(lines[k + 1] == '    nothing to add: both carry xdist_group("db") already'
               for k in on_marked), out
    assert "test_marked.py\") on each" not in out, out
    written = json.loads((dagtester.path / "edges.json").read_text())
    assert written["groups"] == [{"name": "g/test_db.py", "tests": [
        "g/test_db.py::test_one", "g/test_db.py::test_two", "g/test_db.py::test_three"]}]
    assert written.get("resources", []) == []


#: Two dependents read what their prerequisite left in the process (their
#: declared edges stay), and both write one file and read it back: they clash
#: when run at once, but the default already runs them on one worker.
JOINED = """
    import pathlib, time
    from pytest_dagorder import depends_on
    HERE = pathlib.Path(__file__).parent
    STATE = {}

    def test_set():
        STATE["x"] = 1

    @depends_on("test_set")
    def test_b():
        assert STATE["x"] == 1
        (HERE / "out.txt").write_text("b")
        time.sleep(0.15)
        assert (HERE / "out.txt").read_text() == "b"

    @depends_on("test_set")
    def test_c():
        assert STATE["x"] == 1
        (HERE / "out.txt").write_text("c")
        time.sleep(0.15)
        assert (HERE / "out.txt").read_text() == "c"
"""


def test_no_resource_for_a_conflict_the_default_keeps_on_one_worker(
        dagtester: DagTester) -> None:
    dagtester.pytester.makepyfile(test_j=textwrap.dedent(JOINED))
    result = dagtester.run(*FIND, "--dag-edges=edges.json")
    assert result.ret == 0, result.stdout.str()
    result.stdout.fnmatch_lines([
        "dagorder: test_j.py::test_b and test_j.py::test_c fail when run at the same time*",
        "    nothing to add: the default keeps both on one worker (their declared edges "
        "join them)"])
    assert "dag_resource" not in result.stdout.str()
    written = json.loads((dagtester.path / "edges.json").read_text())
    assert written.get("resources", []) == []
    result = dagtester.run("-n", "2", "--dag-edges=edges.json")
    result.assert_outcomes(passed=3)


#: test_d passes in a fresh process (the edge pass calls its edge separable) but,
#: under xdist, only in the process test_p ran in: the -n 2 check of the findings
#: sees it fail while test_p's worker holds test_q, and keeps the edge again.
#: test_q holds it (under xdist: no other run has a second worker) until test_d
#: started (bounded: kept on test_p's worker, test_d starts after test_q).
FRESH_BUT_NOT_UNDER_N = """
    import os, pathlib, time
    from pytest_dagorder import depends_on
    HERE = pathlib.Path(__file__).parent
    STATE = {}

    def test_p():
        STATE["p"] = 1
        (HERE / "pid.txt").write_text(str(os.getpid()))
        (HERE / "d-started").unlink(missing_ok=True)

    @depends_on("test_p")
    def test_q():
        assert STATE["p"] == 1
        end = time.monotonic() + 1.5
        while os.environ.get("PYTEST_XDIST_WORKER") and time.monotonic() < end:
            if (HERE / "d-started").exists():
                break
            time.sleep(0.02)

    @depends_on("test_p")
    def test_d():
        if os.environ.get("PYTEST_XDIST_WORKER"):
            (HERE / "d-started").touch()
            assert (HERE / "pid.txt").read_text() == str(os.getpid())
"""


def test_an_edge_the_n2_check_needs_is_kept_again(dagtester: DagTester) -> None:
    dagtester.pytester.makepyfile(test_f=textwrap.dedent(FRESH_BUT_NOT_UNDER_N))
    result = dagtester.run(*FIND, "--dag-edges=edges.json")
    assert result.ret == 0, result.stdout.str()
    result.stdout.fnmatch_lines([
        "dagorder: declared edges: 1 of 2 edges separable*",
        "dagorder: -n 2 gave other outcomes for 1 test; keeping 1 declared edge evidence had "
        "lifted next to them, and checking again",
        "dagorder: with the findings, -n 2 gave the serial outcomes",
        "dagorder: 0 missing prerequisites, 0 conflicts, 0 of 2 declared edges separable*"])
    verdicts = json.loads((dagtester.path / "edges.json").read_text())["verdicts"]
    assert [(v["test"], v["separable"]) for v in verdicts] == [
        ("test_f.py::test_q", False), ("test_f.py::test_d", False)]
    assert "-n 2 with this edge lifted gave other outcomes" in verdicts[1]["probe"]


#: test_d fails in a fresh process, but needs only test_p1 in its process (a
#: module global); test_p2's file is in place whatever process wrote it.
TWO_PREREQUISITES = """
    import pathlib
    from pytest_dagorder import depends_on
    HERE = pathlib.Path(__file__).parent
    STATE = {}

    def test_p1():
        STATE["x"] = 1

    def test_p2():
        (HERE / "f.txt").write_text("1")

    @depends_on("test_p1", "test_p2")
    def test_d():
        assert STATE["x"] == 1
        assert (HERE / "f.txt").read_text() == "1"
"""


def test_a_failing_dependent_keeps_only_the_edge_it_needs(dagtester: DagTester) -> None:
    dagtester.pytester.makepyfile(test_t=textwrap.dedent(TWO_PREREQUISITES))
    result = dagtester.run(*FIND, "--dag-edges=edges.json")
    assert result.ret == 0, result.stdout.str()
    result.stdout.fnmatch_lines(["dagorder: declared edges: 1 of 2 edges separable*"])
    verdicts = json.loads((dagtester.path / "edges.json").read_text())["verdicts"]
    assert [(v["after"], v["separable"]) for v in verdicts] == [
        ("test_t.py::test_p1", False), ("test_t.py::test_p2", True)]
    assert verdicts[0]["probe"].startswith("test_t.py::test_d failed in a fresh process")
    result = dagtester.run("-n", "2", "--dag-edges=edges.json", "--dag-explain")
    result.assert_outcomes(passed=3)
    result.stdout.fnmatch_lines(["dagorder: 1 of 2 edges free by evidence from edges.json"])


#: A module fixture opens a file at a fixed path and closes it at teardown; its
#: tests only read it.  Overlapped, the pair passes (both set it up, both read,
#: then both close); split over two workers, one worker's teardown closes the
#: file the other's next test reads.
FIXTURE_AT_A_FIXED_PATH = """
    import pathlib
    import pytest
    HERE = pathlib.Path(__file__).parent

    @pytest.fixture(scope="module")
    def db():
        (HERE / "db.txt").write_text("x")
        yield HERE / "db.txt"
        (HERE / "db.txt").write_text("closed")

    def test_one(db):
        assert db.read_text() == "x"

    def test_two(db):
        assert db.read_text() == "x"

    def test_three(db):
        assert db.read_text() == "x"
"""


#: As ensembl-genomio's test_dbconnection_lite.py: the module fixture makes a
#: file at a fixed name and removes it when the module ends, after its last
#: test, which does not use the fixture: the removal is in that test's record.
TORN_DOWN_AFTER_A_NON_USER = """
    import pathlib
    import pytest
    HERE = pathlib.Path(__file__).parent

    @pytest.fixture(scope="module")
    def db():
        (HERE / "db.txt").write_text("x")
        yield HERE / "db.txt"
        (HERE / "db.txt").unlink()

    def test_one(db):
        assert db.read_text() == "x"

    def test_two(db):
        assert db.read_text() == "x"

    def test_three(db):
        assert db.read_text() == "x"

    def test_other():
        pass
"""


def test_a_fixture_writing_a_fixed_path_keeps_its_users_together(dagtester: DagTester) -> None:
    # Each module in a folder of its own (its fixture's db.txt beside it): one
    # pass finds both groups.
    for module, source in (("fx/test_fx", FIXTURE_AT_A_FIXED_PATH),
                           ("nu/test_nu", TORN_DOWN_AFTER_A_NON_USER)):
        path = dagtester.path / f"{module}.py"
        path.parent.mkdir()
        path.write_text(textwrap.dedent(source), encoding="utf-8")
    result = dagtester.run(*FIND, "--dag-edges=edges.json")
    assert result.ret == 0, result.stdout.str()
    for module in ("fx/test_fx", "nu/test_nu"):
        result.stdout.fnmatch_lines([
            f"dagorder: a fixture that {module}.py::test_one and {module}.py::test_three share "
            f"writes {module[:2]}/db.txt when set up and torn down: keep its 3 tests on one "
            f'worker, @pytest.mark.xdist_group("{module}.py") on each'])
    groups = json.loads((dagtester.path / "edges.json").read_text())["groups"]
    assert groups == [{"name": f"{module}.py", "tests": [
        f"{module}.py::test_one", f"{module}.py::test_two", f"{module}.py::test_three"]}
        for module in ("fx/test_fx", "nu/test_nu")]


@pytest.mark.skipif(not os.access("/dev/shm", os.W_OK), reason="no /dev/shm to write in")
def test_probe_copies_in_shared_memory_are_watched(dagtester: DagTester,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    # The temporary directory in /dev/shm (TMPDIR=/dev/shm, a memory-backed
    # folder where the disk is slow): the copies are there, and what the tests
    # write in them is seen as anywhere else (the fixture's db.txt: one group),
    # not passed by as a device's.
    where = tempfile.mkdtemp(prefix="dagorder-shm-test-", dir="/dev/shm")
    try:
        monkeypatch.setenv("TMPDIR", where)
        dagtester.modules(test_fx=FIXTURE_AT_A_FIXED_PATH)
        # Each probe runs in a copy: the serial pass fails unless it is there.
        dagtester.modules(test_where=f"""
            def test_in_shared_memory():
                assert __file__.startswith({where + '/'!r})
        """)
        result = dagtester.run(*FIND, "--dag-edges=edges.json",
                               own_process="TMPDIR is read once, as tempfile starts")
        assert result.ret == 0, result.stdout.str()
        result.stdout.fnmatch_lines([
            "dagorder: serial pass: 4 passed in *",
            "dagorder: a fixture that test_fx.py::test_one and test_fx.py::test_three share "
            "writes db.txt when set up and torn down: keep its 3 tests on one worker*"])
        assert os.listdir(where) == []  # the copies are removed
    finally:
        shutil.rmtree(where, ignore_errors=True)


#: As photoidx's conftest: a module fixture makes a folder with ``tempfile.mkdtemp``
#: (a random name under the temporary directory), fills it at set-up and removes
#: it at teardown; its tests read it.  Each process makes a folder of its own:
#: nothing is shared.  A fixed name in the temporary directory is shared by
#: every process (xdist's workers too): its writers still clash.
FIXTURE_IN_A_TEMPFILE_FOLDER = """
    import pathlib
    import shutil
    import tempfile
    import pytest

    @pytest.fixture(scope="module")
    def folder():
        where = pathlib.Path(tempfile.mkdtemp(prefix="suite-test-"))
        (where / "index.yaml").write_text("x")
        yield where
        shutil.rmtree(where)

    def test_one(folder):
        assert (folder / "index.yaml").read_text() == "x"

    def test_two(folder):
        assert (folder / "index.yaml").read_text() == "x"

    def test_three(folder):
        assert (folder / "index.yaml").read_text() == "x"

    # Both write a fixed name and read nothing back: overlapped on purpose, they
    # cannot fail (a read-back would, whenever the two writes interleave).
    def test_fixed_name_a():
        fixed = pathlib.Path(tempfile.gettempdir()) / "suite-fixed.txt"
        fixed.write_text("a")

    def test_fixed_name_b():
        fixed = pathlib.Path(tempfile.gettempdir()) / "suite-fixed.txt"
        fixed.write_text("b")
"""


def test_a_folder_tempfile_made_is_no_shared_path(dagtester: DagTester) -> None:
    dagtester.pytester.makepyfile(test_tf=textwrap.dedent(FIXTURE_IN_A_TEMPFILE_FOLDER))
    result = dagtester.run(*FIND, "--dag-edges=edges.json")
    assert result.ret == 0, result.stdout.str()
    out = result.stdout.str()
    assert "suite-test-" not in out and "fixture" not in out, out
    result.stdout.fnmatch_lines([
        # The fixed name is still a path both write: a candidate pair, overlapped.
        "dagorder: overlapping 1 pair of tests that write one path",
        "dagorder: no missing prerequisite and no conflict found"])
    assert not (dagtester.path / "edges.json").exists()


#: A module fixture appends to a log at a fixed path when set up and when torn
#: down; no test reads the log.  Its users need no worker of their own: two
#: instances of the fixture taking turns give the serial outcomes.
FIXTURE_LOG = """
    import pathlib
    import pytest
    HERE = pathlib.Path(__file__).parent

    @pytest.fixture(scope="module")
    def log():
        with (HERE / "fixture.log").open("a") as f:
            f.write("up\\n")
        yield
        with (HERE / "fixture.log").open("a") as f:
            f.write("down\\n")

    def test_one(log):
        pass

    def test_two(log):
        pass

    def test_three(log):
        pass
"""


def test_a_fixture_path_group_the_tests_do_not_need_is_dropped(dagtester: DagTester) -> None:
    dagtester.pytester.makepyfile(test_log=textwrap.dedent(FIXTURE_LOG))
    result = dagtester.run(*FIND, "--dag-edges=edges.json")
    assert result.ret == 0, result.stdout.str()
    result.stdout.fnmatch_lines([
        "dagorder: the fixture test_log.py::test_one and test_log.py::test_three share "
        "writes fixture.log, but its 3 tests gave the serial outcomes with two instances "
        "of it taking turns: no group needed",
        "dagorder: with the findings, -n 2 gave the serial outcomes",
        "dagorder: no missing prerequisite and no conflict found"])
    assert "xdist_group" not in result.stdout.str()
    edges = dagtester.path / "edges.json"
    assert not edges.exists() or json.loads(edges.read_text()).get("groups", []) == []


#: test_x gives another outcome under xdist once (the first -n 2 check: it
#: leaves a flag outside the rootdir, which no probe copy resets); test_e only
#: needs the order.  Its edge is kept again for sharing test_x's module, then
#: lifted once more by a run that gives the serial outcomes.
ONCE_UNDER_N = """
    import os, pathlib
    from pytest_dagorder import depends_on
    FLAG = pathlib.Path(FLAG_PATH)

    def test_p():
        pass

    @depends_on("test_p")
    def test_e():
        pass

    def test_x():
        if os.environ.get("PYTEST_XDIST_WORKER") and not FLAG.exists():
            FLAG.write_text("once")
            raise AssertionError("the first run under xdist")
"""


def test_an_edge_kept_again_only_for_its_module_is_lifted_once_more(
        dagtester: DagTester) -> None:
    flag = dagtester.path.parent / f"{dagtester.path.name}-flag"
    dagtester.pytester.makepyfile(test_f=textwrap.dedent(ONCE_UNDER_N).replace(
        "FLAG_PATH", repr(str(flag))))
    result = dagtester.run(*FIND, "--dag-edges=edges.json")
    assert result.ret == 0, result.stdout.str()
    result.stdout.fnmatch_lines([
        "dagorder: declared edges: 1 of 1 edge separable*",
        "dagorder: -n 2 gave other outcomes for 1 test; keeping 1 declared edge evidence "
        "had lifted next to them, and checking again",
        "dagorder: lifting the 1 edge kept only for their module again gave the serial "
        "outcomes: they stay lifted",
        "dagorder: with the findings, -n 2 gave the serial outcomes"])
    verdicts = json.loads((dagtester.path / "edges.json").read_text())["verdicts"]
    assert [(v["test"], v["separable"]) for v in verdicts] == [("test_f.py::test_e", True)]


def test_a_rootdir_conftests_module_fixture_is_the_projects_like_a_modules(
        dagtester: DagTester) -> None:
    """Its fixtures apply below "" as a plugin's do; a file they set up still makes
    the module one group, as when the module defines the fixture (before: taken
    for a plugin's, the tests were told to share a resource)."""
    fixture, tests = textwrap.dedent(FIXTURE_FILE).split("\n\ndef test_one", 1)
    dagtester.pytester.makeconftest(fixture)
    dagtester.pytester.makepyfile(test_db="import pathlib, time\n\ndef test_one" + tests)
    result = dagtester.run(*FIND, "--dag-edges=edges.json")
    assert result.ret == 0, result.stdout.str()
    out = result.stdout.str()
    assert out.count('@pytest.mark.xdist_group("test_db.py") on each') == 1, out
    groups = json.loads((dagtester.path / "edges.json").read_text())["groups"]
    assert groups == [{"name": "test_db.py", "tests": [
        "test_db.py::test_one", "test_db.py::test_two", "test_db.py::test_three"]}]
