"""End to end: --dag-graph and --dag-timeline, serial and under ``-n 2``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from support.dagtester import DagTester
from support.render_readers import (
    assert_self_contained,
    bars,
    lanes,
    parse_dot,
    read_mermaid,
    unquote_dot,
)
from support.suites import MODULE_TEARDOWN_ERROR

#: Each test gives ``-n`` or ``-p no:xdist`` itself.
pytestmark = [
    pytest.mark.dag_modes("own"),
    pytest.mark.dagtester(
        ini="markers =\n    dag_resource(*names): resources a test holds\n", timeout=120.0),
]
BARRIER = "dagorder-barrier"

SUITE_A = """
def test_ok():
    mark("ok")


def test_fail():
    mark("fail")
    assert 0


@depends_on("test_fail")
def test_blocked():
    mark("blocked")


@depends_on("test_blocked")
def test_blocked2():
    mark("blocked2")


@depends_on("test_ok")
def test_after_ok():
    mark("after_ok")


@run_after("test_fail")
def test_ordered():
    mark("ordered")


@pytest.mark.skip(reason="its own reason")
def test_own_skip():
    mark("own_skip")
"""

SUITE_B = """
@depends_on("test_a.py::test_ok")
@pytest.mark.dag_resource("db", "net")
def test_cross():
    mark("cross")


def test_free():
    mark("free")
"""

A = "test_a.py::"
ALL = [f"{A}test_{n}" for n in ("ok", "fail", "blocked", "blocked2", "after_ok", "ordered",
                           "own_skip")] + ["test_b.py::test_cross", "test_b.py::test_free"]
EDGES = {
    (f"{A}test_fail", f"{A}test_blocked", "requires-pass"),
    (f"{A}test_blocked", f"{A}test_blocked2", "requires-pass"),
    (f"{A}test_ok", f"{A}test_after_ok", "requires-pass"),
    (f"{A}test_fail", f"{A}test_ordered", "ordering-only"),
    (f"{A}test_ok", "test_b.py::test_cross", "requires-pass"),
}
BLOCKED = {f"{A}test_blocked", f"{A}test_blocked2"}
EXECUTED = set(ALL) - BLOCKED
OUTCOMES = {
    f"{A}test_ok": "passed", f"{A}test_fail": "failed", f"{A}test_blocked": "skipped",
    f"{A}test_blocked2": "skipped", f"{A}test_after_ok": "passed",
    f"{A}test_ordered": "passed", f"{A}test_own_skip": "skipped",
    "test_b.py::test_cross": "passed", "test_b.py::test_free": "passed",
}


@pytest.fixture
def suite(dagtester: DagTester) -> DagTester:
    dagtester.modules(test_a=SUITE_A, test_b=SUITE_B)
    return dagtester


def graph_args(path: Path) -> list[str]:
    return [f"--dag-graph={path / name}" for name in ("g.dot", "g.mmd", "g.json")]


def read_dot(path: Path) -> tuple[list[str], set[tuple[str, str, str]]]:
    graph = parse_dot(path.read_text(encoding="utf-8"))
    ids = [unquote_dot(n.get_name()) for c in graph.get_subgraphs() for n in c.get_nodes()]
    edges = {(unquote_dot(e.get_source()), unquote_dot(e.get_destination()),
              "ordering-only" if e.get_style() == "dashed" else "requires-pass")
             for e in graph.get_edges()}
    return ids, edges


def check_graphs(path: Path, *, ran: bool) -> dict[str, Any]:
    """Every format holds every test and every edge; the JSON nodes, by id."""
    dot_ids, dot_edges = read_dot(path / "g.dot")
    mmd_ids, mmd_edges, classes = read_mermaid((path / "g.mmd").read_text(encoding="utf-8"))
    doc = json.loads((path / "g.json").read_text(encoding="utf-8"))
    json_ids = [n["id"] for n in doc["nodes"]]
    json_edges = {(e["from"], e["to"], e["kind"]) for e in doc["edges"]}
    for ids in (dot_ids, mmd_ids, json_ids):
        assert sorted(ids) == sorted(ALL)
    for edges in (dot_edges, mmd_edges, json_edges):
        assert edges == EDGES
    for text in (p.read_text(encoding="utf-8") for p in path.glob("g.*")):
        assert BARRIER not in text
    nodes = {n["id"]: n for n in doc["nodes"]}
    if ran:
        assert {k: n["outcome"] for k, n in nodes.items()} == OUTCOMES
        assert {k: c.replace("_", " ") for k, c in classes.items()} == OUTCOMES
        assert nodes[f"{A}test_blocked"]["reason"] == "prerequisite test_fail failed (assert 0)"
        assert nodes[f"{A}test_blocked2"]["reason"] == (
            "prerequisite test_blocked was skipped: test_fail failed (assert 0)")
        assert nodes[f"{A}test_own_skip"]["reason"] == "its own reason"
    else:
        assert all(n["outcome"] is None for n in nodes.values())
        assert classes == {}
    cross = nodes["test_b.py::test_cross"]
    assert (cross["file"], cross["module"]) == ("test_b.py", "test_b.py")
    assert isinstance(cross["line"], int)
    return nodes


def check_timeline_page(page: str, expected_lanes: list[str]) -> None:
    assert_self_contained(page)
    assert BARRIER not in page
    drawn = [nid for nid, _ in bars(page)]
    assert sorted(drawn) == sorted(EXECUTED)  # one bar per executed test
    assert lanes(page) == expected_lanes
    skipped_part = page.split("Skipped by the graph (2)")[1]
    assert f"{A}test_fail</code>: blocked 2 tests" in skipped_part
    for nid in BLOCKED:
        assert nid in skipped_part


def test_serial_run_writes_graph_and_timeline(suite: DagTester) -> None:
    out = suite.path
    result = suite.run("-p", "no:xdist", *graph_args(out), f"--dag-timeline={out / 't.html'}")
    result.assert_outcomes(passed=5, failed=1, skipped=3)
    result.stdout.fnmatch_lines(["dagorder: wrote the graph (9 tests, 5 dependencies) to *g.dot*",
                                 "dagorder: wrote the timeline (7 tests, 2 skipped*) to *t.html*"])
    nodes = check_graphs(out, ran=True)
    assert nodes["test_b.py::test_cross"]["resources"] == ["db", "net"]
    assert all(n["group"] is None for n in nodes.values())  # serial: no affinity groups
    check_timeline_page((out / "t.html").read_text(encoding="utf-8"), ["main"])


def test_xdist_run_writes_graph_and_timeline(suite: DagTester) -> None:
    out = suite.path
    result = suite.run("-n", "2", "--dag-affinity=module", *graph_args(out),
                 f"--dag-timeline={out / 't.html'}")
    result.assert_outcomes(passed=5, failed=1, skipped=3)
    nodes = check_graphs(out, ran=True)
    # Module affinity: the chains inside test_a.py are groups; test_b.py's tests are free.
    groups = {k: n["group"] for k, n in nodes.items()}
    assert groups[f"{A}test_fail"] == groups[f"{A}test_blocked"] == groups[f"{A}test_ordered"]
    assert groups[f"{A}test_ok"] == groups[f"{A}test_after_ok"] != groups[f"{A}test_fail"]
    assert groups[f"{A}test_ok"] is not None and groups["test_b.py::test_free"] is None
    check_timeline_page((out / "t.html").read_text(encoding="utf-8"), ["gw0", "gw1"])


def test_xdist_trace_events(suite: DagTester) -> None:
    out = suite.path
    # Repeatable, like --dag-graph: one run writes the page and the trace.
    result = suite.run("-n", "2", f"--dag-timeline={out / 'trace.json'}",
                 f"--dag-timeline={out / 'page.html'}")
    result.assert_outcomes(passed=5, failed=1, skipped=3)
    assert (out / "page.html").read_text(encoding="utf-8").startswith("<!DOCTYPE html>")
    text = (out / "trace.json").read_text(encoding="utf-8")
    assert BARRIER not in text
    events = json.loads(text)["traceEvents"]
    lane = {e["tid"]: e["args"]["name"] for e in events if e["name"] == "thread_name"}
    assert sorted(lane.values()) == ["gw0", "gw1"]
    complete = [e for e in events if e["ph"] == "X"]
    assert sorted(e["name"] for e in complete) == sorted(EXECUTED)
    assert {e["name"]: e["cat"] for e in complete} == {k: OUTCOMES[k] for k in EXECUTED}
    assert all(e["tid"] in lane and e["dur"] >= 0 for e in complete)


def test_collect_only_writes_the_graph_and_runs_nothing(suite: DagTester) -> None:
    out = suite.path
    result = suite.run("--collect-only", "-q", *graph_args(out))
    assert result.ret == 0
    check_graphs(out, ran=False)
    assert suite.ran() == {}


def test_a_suite_without_declarations_still_gets_its_graph_and_timeline(
    dagtester: DagTester,
) -> None:
    dagtester.modules(test_plain="def test_x():\n    mark('x')\n\n\n"
                                      "def test_y():\n    mark('y')\n")
    out = dagtester.path
    result = dagtester.run("-p", "no:xdist", f"--dag-graph={out / 'g.json'}",
                 f"--dag-timeline={out / 't.html'}")
    result.assert_outcomes(passed=2)
    doc = json.loads((out / "g.json").read_text(encoding="utf-8"))
    assert [n["id"] for n in doc["nodes"]] == ["test_plain.py::test_x", "test_plain.py::test_y"]
    assert doc["edges"] == []
    assert [n["outcome"] for n in doc["nodes"]] == ["passed", "passed"]
    page = (out / "t.html").read_text(encoding="utf-8")
    assert sorted(nid for nid, _ in bars(page)) == ["test_plain.py::test_x",
                                                    "test_plain.py::test_y"]


@pytest.mark.parametrize(
    ("option", "message"),
    [
        ("--dag-graph=g.png", "*--dag-graph 'g.png': unknown suffix '.png'; name the file with "
                              "one of .dot, .mmd, .json*"),
        ("--dag-graph=nowhere/g.dot", "*--dag-graph 'nowhere/g.dot': directory * does not "
                                      "exist; create it first*"),
        ("--dag-timeline=t.svg", "*--dag-timeline 't.svg': unknown suffix '.svg'*"),
        ("--dag-timeline=.", "*--dag-timeline '.': unknown suffix '(none)'*"),
    ],
)
def test_bad_paths_are_usage_errors_before_anything_runs(
    suite: DagTester, option: str, message: str
) -> None:
    result = suite.run(option)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([message])
    assert "Traceback" not in result.stderr.str()
    assert suite.ran() == {}


def test_a_directory_is_refused(suite: DagTester) -> None:
    (suite.path / "out.dot").mkdir()
    result = suite.run("--dag-graph=out.dot")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--dag-graph 'out.dot' is a directory; give a file name*"])


MODES = pytest.mark.parametrize("mode", [("-p", "no:xdist"), ("-n", "2")], ids=["serial", "n2"])


@MODES
@pytest.mark.skipif(not Path("/proc/self").is_dir(), reason="needs Linux's /proc")
def test_a_path_the_kernel_refuses_is_refused_before_anything_runs(
    suite: DagTester, mode: tuple[str, str]
) -> None:
    # /proc refuses new files even to root, whom os.access lets through.
    result = suite.run(*mode, "--dag-graph=/proc/dagorder-graph.dot")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        ["*--dag-graph '/proc/dagorder-graph.dot' is not writable (*); choose another path*"])
    assert suite.ran() == {}


@MODES
@pytest.mark.parametrize(
    ("first", "second"),
    [("--dag-graph=same.json", "--dag-timeline=same.json"),
     ("--dag-graph=g.dot", "--dag-graph=./g.dot")],
)
def test_two_outputs_naming_one_file_are_refused(
    suite: DagTester, mode: tuple[str, str], first: str, second: str
) -> None:
    result = suite.run(*mode, first, second)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    first_option, first_raw = first.split("=")
    second_option, second_raw = second.split("=")
    result.stderr.fnmatch_lines(
        [f"*{first_option} '{first_raw}' and {second_option} '{second_raw}' name the same "
         f"file '{suite.path / Path(first_raw).name}'; give each output a path of its own*"])
    assert suite.ran() == {}
    assert not (suite.path / first_raw).exists()  # the probe leaves nothing behind


def test_invalid_declarations_write_no_graph(dagtester: DagTester) -> None:
    dagtester.modules(test_cycle="""
@depends_on("test_b")
def test_a():
    pass


@depends_on("test_a")
def test_b():
    pass
""")
    result = dagtester.run("-p", "no:xdist", f"--dag-graph={dagtester.path / 'g.dot'}")
    assert result.ret == pytest.ExitCode.INTERRUPTED
    result.stdout.fnmatch_lines(["dagorder: graph not written to *g.dot: the dependency "
                                 "declarations have errors"])
    assert not (dagtester.path / "g.dot").exists()


def test_a_deselected_prerequisite_is_a_node_outside_the_run(suite: DagTester) -> None:
    out = suite.path
    result = suite.run("-p", "no:xdist", "-k", "test_after_ok", f"--dag-graph={out / 'g.json'}",
                 f"--dag-timeline={out / 't.html'}")
    result.assert_outcomes(skipped=1)
    doc = json.loads((out / "g.json").read_text(encoding="utf-8"))
    nodes = {n["id"]: n for n in doc["nodes"]}
    assert sorted(nodes) == [f"{A}test_after_ok", f"{A}test_ok"]
    assert (nodes[f"{A}test_ok"]["selected"], nodes[f"{A}test_ok"]["outcome"]) == (
        False, "deselected")
    assert nodes[f"{A}test_after_ok"]["reason"] == (
        "prerequisite test_ok was deselected; add --dag-with-prerequisites to run it")
    assert doc["edges"] == [{"from": f"{A}test_ok", "to": f"{A}test_after_ok",
                             "kind": "requires-pass"}]
    page = (out / "t.html").read_text(encoding="utf-8")
    assert bars(page) == [] and lanes(page) == ["main"]
    assert f"{A}test_ok</code>: blocked 1 test" in page


def test_a_crashed_worker_shows_as_a_crashed_test(dagtester: DagTester) -> None:
    dagtester.modules(test_crash="""
def test_crash():
    mark("crash")
    # Not at once: a worker that dies while the controller is still sending
    # it its first tests can make the controller's dispatch write to a closed
    # channel (an INTERNALERROR, seen without these options too).
    time.sleep(0.5)
    os._exit(1)


@depends_on("test_crash")
def test_after_crash():
    mark("after_crash")


def test_fine():
    mark("fine")
""")
    out = dagtester.path
    result = dagtester.run("-n", "2", f"--dag-graph={out / 'g.json'}",
                 f"--dag-timeline={out / 't.json'}")
    result.assert_outcomes(passed=1, failed=1, skipped=1)
    doc = json.loads((out / "g.json").read_text(encoding="utf-8"))
    assert {n["id"]: n["outcome"] for n in doc["nodes"]} == {
        "test_crash.py::test_crash": "crashed", "test_crash.py::test_after_crash": "skipped",
        "test_crash.py::test_fine": "passed"}
    events = json.loads((out / "t.json").read_text(encoding="utf-8"))["traceEvents"]
    complete = {e["name"]: e["cat"] for e in events if e["ph"] == "X"}
    # The crashed test's setup report arrived before its worker died: it is a bar.
    assert complete == {"test_crash.py::test_crash": "crashed",
                        "test_crash.py::test_fine": "passed"}


def test_a_deferred_module_teardown_error_stays_on_its_test(dagtester: DagTester) -> None:
    """Under -n a module fixture may be torn down after its last test's own teardown
    (by the barrier, when the next test is known); its error is still one bar."""
    dagtester.modules(test_mfix=MODULE_TEARDOWN_ERROR,
                 test_other='@pytest.mark.parametrize("n", range(4))\n'
                            'def test_z(n):\n    mark(f"test_z{n}")\n')
    out = dagtester.path
    result = dagtester.run("-n", "2", f"--dag-timeline={out / 't.json'}",
                 f"--dag-graph={out / 'g.json'}")
    result.assert_outcomes(passed=6, errors=1)
    events = json.loads((out / "t.json").read_text(encoding="utf-8"))["traceEvents"]
    complete = [e for e in events if e["ph"] == "X"]
    assert sorted(e["name"] for e in complete) == [
        "test_mfix.py::test_a", "test_mfix.py::test_b",
        *(f"test_other.py::test_z[{n}]" for n in range(4))]
    outcome = {e["name"]: e["cat"] for e in complete}
    assert outcome["test_mfix.py::test_b"] == "error"
    doc = json.loads((out / "g.json").read_text(encoding="utf-8"))
    assert {n["id"]: n["outcome"] for n in doc["nodes"]}["test_mfix.py::test_b"] == "error"
