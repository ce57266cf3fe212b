"""``--dag-find-missing``'s screening answers the declared edges' check where its
runs alone are the evidence a serial prefix would give: no serial prefix after
it (issue 50, point 7: the learning pass's passes over the suite)."""

from __future__ import annotations

import json
import textwrap

import pytest
from support.dagtester import DagTester

pytestmark = [pytest.mark.dag_modes("own"), pytest.mark.dagtester(timeout=300)]
FIND = ("--dag-find-missing", "-n", "2")


def learn(dagtester: DagTester, monkeypatch: pytest.MonkeyPatch, name: str,
          modules: dict[str, str]) -> tuple[pytest.RunResult, list[dict[str, object]],
                                            dict[str, list[str]]]:
    """The learning pass over ``modules``, whose tests log "PID NAME" to the file
    ``DAGORDER_E2E_LOG`` names (``NAME.log`` beside the rootdir, outside the
    probes' copies): its result, the verdicts it wrote, and the tests each
    process ran, in order."""
    log = dagtester.path.parent / f"{dagtester.path.name}-{name}.log"
    monkeypatch.setenv("DAGORDER_E2E_LOG", str(log))
    for module, body in modules.items():
        dagtester.pytester.makepyfile(**{module: textwrap.dedent(body)})
    result = dagtester.run(*FIND, "--dag-edges", "edges.json")
    assert result.ret == 0, result.stdout.str()
    verdicts = json.loads((dagtester.path / "edges.json").read_text())["verdicts"]
    runs: dict[str, list[str]] = {}
    for line in log.read_text().splitlines():
        pid, test = line.split()
        runs.setdefault(pid, []).append(test)
    return result, verdicts, runs


def ran(runs: dict[str, list[str]], test: str) -> int:
    """How many times ``test`` ran in all processes."""
    return sum(names.count(test) for names in runs.values())


#: The start of each module below: its tests log "PID NAME" to the file
#: ``DAGORDER_E2E_LOG`` names, through a descriptor opened when the module is
#: imported (outside any test: no path a test touches).
LOGGED = """
    import os
    from pytest_dagorder import depends_on
    LOG = os.open(os.environ["DAGORDER_E2E_LOG"], os.O_WRONLY | os.O_APPEND | os.O_CREAT)

    def log(name):
        os.write(LOG, f"{os.getpid()} {name}\\n".encode())
"""

#: bpypolyskel's pattern: the first test fills a module global; test_get needs
#: it filled (it needs its prerequisite's process), test_each loops over it (it
#: passes alone).  No test writes a path or reaches a service.  Each test logs
#: its name and process id to a file opened when the module is imported (outside
#: any test: no path a test touches).
QUIET = """
    import os
    from pytest_dagorder import depends_on
    LOG = os.open(os.environ["DAGORDER_E2E_LOG"], os.O_WRONLY | os.O_APPEND | os.O_CREAT)
    STATE = []

    def log(name):
        os.write(LOG, f"{os.getpid()} {name}\\n".encode())

    def test_set():
        log("set")
        STATE.append(1)

    @depends_on("test_set")
    def test_get():
        log("get")
        assert STATE

    @depends_on("test_set")
    def test_each():
        log("each")
        for x in STATE:
            assert x == 1
"""


def test_a_dependent_that_fails_alone_where_nothing_is_written_takes_no_serial_prefix(
        dagtester: DagTester, monkeypatch: pytest.MonkeyPatch) -> None:
    """Both dependents run alone in the screening although their prerequisite
    changed a test module's value; test_get's failure there (it passed in the
    batch's process right after) is its verdict.  Before: both went to the edge
    check's serial prefixes, which ran test_set again (on the old code the
    "(2 alone ...)" line is missing and test_set runs two more times)."""
    result, verdicts, runs = learn(dagtester, monkeypatch, "quiet", {"test_q": QUIET})
    result.stdout.fnmatch_lines([
        "*checking 2 tests with declared prerequisites in a fresh process (2 alone after their "
        "screening batch)",
        "dagorder: declared edges: 1 of 2 edges separable*"])
    assert [(v["test"], v["separable"]) for v in verdicts] == [
        ("test_q.py::test_get", False), ("test_q.py::test_each", True)]
    assert verdicts[0]["probe"] == ("test_q.py::test_get failed in a fresh process after "
                                    "its prerequisites ran in another (serially: passed)")
    # test_get ran alone (a process without test_set) and failed there; test_set
    # ran in the serial pass, the screening's batches (one per dependent at
    # most) and the -n 2 check: never in a serial prefix of the edge check.
    assert ["get"] in runs.values() or any(r[0] == "get" for r in runs.values()), runs
    assert ran(runs, "set") <= 4, runs


#: test_b's prerequisite test_r has none of its own; no test changes the
#: process's state.  Logged as above.
ROOTED = LOGGED + """
    def test_base():
        log("base")

    @depends_on("test_base")
    def test_a():
        log("a")

    def test_r():
        log("r")

    @depends_on("test_r")
    def test_b():
        log("b")
"""


def test_a_batch_with_a_test_of_no_prerequisite_runs_its_tests_alone_only(
        dagtester: DagTester, monkeypatch: pytest.MonkeyPatch) -> None:
    """test_r and test_b share a screening batch; test_r has no declared
    prerequisite, so it used to be screened in the batch's own process, and
    test_b ran there too after its run alone.  Now test_r's screening is its run
    alone as well, and each test of the batch runs once (on the old code
    test_b ran four times: the serial pass, alone, the batch, the -n 2 check)."""
    _, verdicts, runs = learn(dagtester, monkeypatch, "rooted", {"test_r": ROOTED})
    assert [(v["test"], v["separable"]) for v in verdicts] == [
        ("test_r.py::test_a", True), ("test_r.py::test_b", True)]
    # The serial pass, its run alone in the screening, the -n 2 check.
    assert ran(runs, "b") == 3, runs


#: test_last, in the serial pass, waits (bounded) until a test ran in another
#: process than the pass's: the log grew past what the pass's own tests wrote.
#: It reads the log's size by its descriptor (no path a test touches: the suite
#: stays quiet).  Logged as above.
BESIDE = """
    import os
    import time
    from pytest_dagorder import depends_on
    LOG = os.open(os.environ["DAGORDER_E2E_LOG"], os.O_WRONLY | os.O_APPEND | os.O_CREAT)

    def log(name):
        os.write(LOG, f"{os.getpid()} {name}\\n".encode())

    def test_a():
        log("a")

    @depends_on("test_a")
    def test_b():
        log("b")

    def test_last():
        mine = sum(len(f"{os.getpid()} {name}\\n") for name in "ab")
        end = time.monotonic() + 30
        while os.fstat(LOG).st_size <= mine:
            assert time.monotonic() < end, "no test ran beside the serial pass"
            time.sleep(0.05)
"""


def test_the_screening_starts_on_the_free_slot_while_the_serial_pass_runs(
        dagtester: DagTester, monkeypatch: pytest.MonkeyPatch) -> None:
    """test_b is screened, and its edge checked, alone in a fresh process on the
    second probe slot while the serial pass still runs (test_last waits for
    that: on the old code the screening began after the pass, so test_last
    failed serially and the finder refused the suite)."""
    _, verdicts, runs = learn(dagtester, monkeypatch, "beside", {"test_s": BESIDE})
    assert [(v["test"], v["separable"]) for v in verdicts] == [("test_s.py::test_b", True)]
    # Its run beside the pass is its screening: test_b runs alone once, in the
    # serial pass and in the -n 2 check, no more.
    assert ran(runs, "b") == 3, runs


def test_the_screening_beside_the_pass_stops_where_runs_alone_cost_far_more() -> None:
    # Runs alone that cost what the pass's runs cost go on; once they cost over
    # BESIDE_COST times as much (each fresh process sets an application up
    # again), the screening after the pass takes the rest.
    from pytest_dagorder.core.missing import Touches
    from pytest_dagorder.finder.find_missing import BESIDE_COST, MissingFinder, Result

    ids = ["t0", "t1", "t2"]
    seen = {nid: Result("passed", Touches(), seconds=1.0) for nid in ids}
    cheap = ([1], {"t1": Result("passed", Touches(), seconds=1.2)})
    assert not MissingFinder._beside_dear(ids, seen, [cheap])
    dear = ([2], {"t2": Result("passed", Touches(), seconds=1.0 + 2 * BESIDE_COST)})
    assert MissingFinder._beside_dear(ids, seen, [cheap, dear])


def test_the_screening_beside_the_pass_waits_for_a_chunks_worth_of_tests() -> None:
    # t1..t5 each need t0.  While the pass has run less than BESIDE_CHUNK
    # serial seconds of tests past the chunk's start, no probe starts (each
    # fresh process sets the suite up again: a probe of a few tests is all
    # set-up); once it has, once the pass ran them all, or once it stopped
    # moving (the caller stops waiting), the chunk goes.
    from pytest_dagorder.core.missing import Touches
    from pytest_dagorder.finder.find_missing import BESIDE_CHUNK, MissingFinder, Result

    finder = MissingFinder.__new__(MissingFinder)
    ids = [f"t{k}" for k in range(6)]
    finder.declared = [[], [0], [0], [0], [0], [0]]
    finder.wide = [set() for _ in ids]
    short = Result("passed", Touches(), seconds=BESIDE_CHUNK / 10)
    seen = {nid: short for nid in ids[:4]}
    assert finder._beside_chunk(ids, seen, 1, set(), wait=True) == ([], 1)
    assert finder._beside_chunk(ids, seen, 1, set()) == ([1, 2, 3], 4)
    seen = dict.fromkeys(ids, short)
    assert finder._beside_chunk(ids, seen, 1, set(), wait=True) == ([1, 2, 3, 4, 5], 6)
    long = Result("passed", Touches(), seconds=BESIDE_CHUNK)
    seen = {"t0": short, "t1": short, "t2": long}
    assert finder._beside_chunk(ids, seen, 1, set(), wait=True) == ([1], 2)
    # Tests that cannot run alone (their prerequisite changed a test module's
    # values: bpypolyskel) hold no chunk up: the pass moved on past them.
    changed = Result("passed", Touches(), seconds=BESIDE_CHUNK / 10, tests_state=True)
    seen = {"t0": changed, **{nid: short for nid in ids[1:4]}}
    assert finder._beside_chunk(ids, seen, 1, set(), wait=True) == ([], 4)


#: QUIET's module global, and test_last (a module of its own) waiting, as in
#: BESIDE (by a descriptor opened on import: the suite stays quiet), until a test
#: ran outside the serial pass's process: only a batch of the
#: usual kind can screen test_get and test_each (their prerequisite changed a
#: module's value: no alone-only probe).
GLOBAL_BESIDE = {
    "test_q": QUIET,
    "test_z": """
        import os
        import time
        LOG = os.open(os.environ["DAGORDER_E2E_LOG"], os.O_RDONLY | os.O_CREAT)

        def test_last():
            end = time.monotonic() + 20
            while not any(line.split()[0] != str(os.getpid())
                          for line in os.pread(LOG, 1 << 16, 0).decode().splitlines()):
                assert time.monotonic() < end, "no test ran beside the serial pass"
                time.sleep(0.05)
    """,
}


def test_a_component_whose_tests_read_a_module_global_is_screened_beside_the_pass(
        dagtester: DagTester, monkeypatch: pytest.MonkeyPatch) -> None:
    """test_q.py's three tests are screened as one batch of the usual kind on the
    second slot while the pass runs (test_last waits for that); the verdicts are
    those of the screening after the pass.  On the old code nothing ran beside
    the pass: test_last failed it after 20 s, and the pass ran again (test_set
    4 times)."""
    _, verdicts, runs = learn(dagtester, monkeypatch, "global", GLOBAL_BESIDE)
    assert [(v["test"], v["separable"]) for v in verdicts] == [
        ("test_q.py::test_get", False), ("test_q.py::test_each", True)]
    # The serial pass, the batch beside it, the -n 2 check: its screening after
    # the pass does not run it again.
    assert ran(runs, "set") == 3, runs


def test_a_batch_beside_the_pass_counts_only_as_the_screening_would_run_it() -> None:
    # t1 and t2 need t0 (the first test, no target); t3 has no prerequisite.
    from pytest_dagorder.core.missing import Touches
    from pytest_dagorder.finder.find_missing import BesideBatch, MissingFinder, Result

    finder = MissingFinder.__new__(MissingFinder)
    finder.ids = ids = ["t0", "t1", "t2", "t3"]
    finder.order = {nid: k for k, nid in enumerate(ids)}
    finder.declared = [[], [0], [0], []]
    finder.runtime = []
    finder.lock = __import__("threading").Lock()
    finder.screened, finder.together, finder.screen_runs = {}, {}, []
    ok, bad = Result("passed", Touches()), Result("failed", Touches())
    batch = BesideBatch([1, 2], ["t0", "t2", "t1"], [2, 1],
                        got={"t0": ok, "t2": ok, "t1": ok}, found={"t2": ok, "t1": bad})
    assert finder._batch_counts(ids, batch, [1, 2, 3], [1, 2])
    # Not a target (it did not pass serially), not checked alone as it is now,
    # another order than the one run now (a run-time depends() of t1 on t3).
    assert not finder._batch_counts(ids, batch, [1, 3], [1, 2])
    assert not finder._batch_counts(ids, batch, [1, 2, 3], [2])
    finder.runtime = [[], [3], [], []]
    assert not finder._batch_counts(ids, batch, [1, 2, 3], [1, 2])
    finder.runtime = []
    # t1 failed alone but passed in the batch's process: kept, its record alone
    # is the screening's; a test that failed in both is screened again.
    assert finder._batches_kept(ids, [1, 2, 3], [1, 2], [batch]) == {1, 2}
    assert finder.screened == {"t2": ok, "t1": bad} and finder.together == {
        "t2": "passed", "t1": "passed"}
    batch.got["t1"] = bad
    assert finder._batches_kept(ids, [1, 2, 3], [1, 2], [batch]) == set()


#: A chain of eight tests, each declaring the one before; none writes a path,
#: reaches a service or changes the process's state.  Logged as above.
CHAIN = LOGGED + """
    def test_1():
        log("1")
""" + "".join(f"""
    @depends_on("test_{k - 1}")
    def test_{k}():
        log("{k}")
""" for k in range(2, 9))


def test_a_chain_checked_alone_shares_fresh_processes_dependent_first(
        dagtester: DagTester, monkeypatch: pytest.MonkeyPatch) -> None:
    """Where nothing is written, each dependent's run alone is its edges' check
    and its screening; several run in one fresh process when none's
    prerequisite ran before it there.  Taken in the screening's reverse serial
    order, a dependent comes before its prerequisite and both share the
    process; with each test's prerequisites put before it (the old code) every
    link of the chain started a process of its own (slurk: 18 fresh processes,
    each setting its application up, for 430 runs alone; 10 now)."""
    result, verdicts, runs = learn(dagtester, monkeypatch, "chain", {"test_c": CHAIN})
    assert [v["separable"] for v in verdicts] == [True] * 7, result.stdout.str()
    # No run of the pass, the check or the screening's batches runs a test
    # before its prerequisite: only runs alone sharing a process do.
    assert any(int(a) > int(b) for names in runs.values()
               for i, a in enumerate(names) for b in names[i + 1:]), runs
