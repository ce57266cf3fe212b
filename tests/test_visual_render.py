"""The pure renderers: graph_export (DOT, Mermaid, JSON) and timeline (HTML, trace events).

Every output is read back - DOT with pydot, Mermaid by its structure, JSON by
json - and must hold every test and every edge; node ids with characters
that each format must escape are part of every check.
"""

from __future__ import annotations

import html
import json
import shutil
import subprocess

import pydot
import pytest
from helpers import outputs_under_hash_seeds
from support.render_readers import (
    MERMAID_NODE,
    assert_self_contained,
    bars,
    lanes,
    parse_dot,
    read_mermaid,
    unquote_dot,
)

from pytest_dagorder.render import graph_export, timeline
from pytest_dagorder.render.graph_export import Edge, Node
from pytest_dagorder.render.timeline import Interval, Skipped

# Ids that need escaping somewhere: quotes, backslashes, '#', '<>', '::' in parameters.
NODES = [
    Node("tests/test_a.py::test_root", "tests/test_a.py", 3, outcome="passed"),
    Node('tests/test_a.py::test_p[a"b]', "tests/test_a.py", 7, group="g1", outcome="failed"),
    Node("tests/test_a.py::test_p[c\\nd]", "tests/test_a.py", 7, group="g1",
         outcome="skipped", reason="prerequisite test_p[a\"b] failed"),
    Node("tests/test_a.py::TestK::test_m[#1<x>]", "tests/test_a.py", 12,
         resources=("db", "net"), outcome="passed"),
    Node("tests/sub/test_b.py::test_other", "tests/sub/test_b.py", 1, outcome="not run"),
    Node("tests/sub/test_c.py::test_gone", "tests/sub/test_c.py", None, selected=False,
         outcome="deselected"),
]
EDGES = [
    Edge(0, 1, "requires-pass"),
    Edge(1, 2, "requires-pass"),
    Edge(0, 3, "ordering-only"),
    Edge(3, 4, "requires-pass"),
    Edge(5, 4, "ordering-only"),
]
IDS = [n.nodeid for n in NODES]
EDGE_SET = {(IDS[e.prerequisite], IDS[e.dependent], e.kind) for e in EDGES}


def test_dot_parses_with_every_test_edge_and_module_cluster() -> None:
    graph = parse_dot(graph_export.render(".dot", NODES, EDGES))
    clusters = graph.get_subgraphs()
    assert [unquote_dot(c.get_label()) for c in clusters] == [
        "tests/test_a.py", "tests/sub/test_b.py", "tests/sub/test_c.py"]
    found: dict[str, pydot.Node] = {}
    for cluster in clusters:
        for node in cluster.get_nodes():
            nid = unquote_dot(node.get_name())
            assert nid.startswith(unquote_dot(cluster.get_label()) + "::")
            found[nid] = node
    assert list(found) == IDS
    edges = {(unquote_dot(e.get_source()), unquote_dot(e.get_destination()),
              "ordering-only" if e.get_style() == "dashed" else "requires-pass")
             for e in graph.get_edges()}
    assert edges == EDGE_SET
    assert len(graph.get_edges()) == len(EDGES)
    # Outcome colours, and a deselected prerequisite drawn dashed.
    assert found[IDS[0]].get_fillcolor() == f'"{graph_export.COLOURS["passed"]}"'
    assert found[IDS[1]].get_fillcolor() == f'"{graph_export.COLOURS["failed"]}"'
    assert "dashed" in found[IDS[5]].get_style()
    assert "prerequisite" in found[IDS[2]].get_tooltip()


@pytest.mark.skipif(shutil.which("dot") is None, reason="Graphviz (dot) is not installed")
def test_dot_is_accepted_by_graphviz() -> None:
    text = graph_export.render(".dot", NODES, EDGES)
    svg = subprocess.run(["dot", "-Tsvg"], input=text, capture_output=True, text=True,
                         check=True, timeout=60).stdout
    assert svg.count('class="node"') == len(NODES)
    assert svg.count('class="edge"') == len(EDGES)
    assert svg.count('class="cluster"') == 3


def test_mermaid_structure_holds_every_test_and_edge() -> None:
    text = graph_export.render(".mmd", NODES, EDGES)
    ids, edges, classes = read_mermaid(text)
    assert ids == IDS
    assert edges == EDGE_SET
    assert text.count("-->") + text.count("-.->") == len(EDGES)
    assert classes[IDS[1]] == "failed"
    assert classes[IDS[4]] == "not_run"
    # Labels never carry a raw quote (it would end the label early).
    for line in text.splitlines():
        if MERMAID_NODE.match(line):
            assert line.count('"') == 2


def test_json_holds_every_field() -> None:
    doc = json.loads(graph_export.render(".JSON", NODES, EDGES))
    assert doc["version"] == graph_export.JSON_VERSION
    assert [n["id"] for n in doc["nodes"]] == IDS
    k = doc["nodes"][3]
    assert (k["file"], k["line"], k["module"], k["resources"]) == (
        "tests/test_a.py", 12, "tests/test_a.py", ["db", "net"])
    assert doc["nodes"][1]["group"] == "g1"
    assert doc["nodes"][2]["reason"] == 'prerequisite test_p[a"b] failed'
    assert doc["nodes"][5]["selected"] is False
    assert {(e["from"], e["to"], e["kind"]) for e in doc["edges"]} == EDGE_SET


def test_before_the_run_nodes_carry_no_outcome() -> None:
    plain = [Node(n.nodeid, n.file, n.line) for n in NODES]
    assert "fillcolor=\"#b7e4c7\"" not in graph_export.to_dot(plain, EDGES)
    assert "classDef" not in graph_export.to_mermaid(plain, EDGES)
    doc = json.loads(graph_export.to_json(plain, EDGES))
    assert all(n["outcome"] is None for n in doc["nodes"])


def test_unknown_format_is_refused() -> None:
    with pytest.raises(ValueError, match=r"'\.png'.*\.dot, \.mmd, \.json"):
        graph_export.render(".png", NODES, EDGES)


def test_edges_of_keeps_both_kinds() -> None:
    assert graph_export.edges_of([(), (0,), (0, 1)], [(), (), (1,)]) == [
        Edge(0, 1, "requires-pass"), Edge(0, 2, "requires-pass"), Edge(1, 2, "requires-pass"),
        Edge(1, 2, "ordering-only")]


# -- timeline ------------------------------------------------------------------------

T0 = 1_700_000_000.0


def iv(nodeid: str, lane: str, start: float, stop: float, outcome: str = "passed") -> Interval:
    return Interval(nodeid, lane, T0 + start, T0 + stop, outcome)


# a -> b -> d (1 + 3 + 1 = 5 s) beats a -> c -> d (1 + 2 + 1); e runs alone.
RUN = [
    iv("t.py::a", "gw0", 0, 1),
    iv("t.py::b", "gw0", 1, 4),
    iv("t.py::c", "gw1", 1, 3, "failed"),
    iv("t.py::d", "gw1", 4, 5),
    iv("t.py::e<&>", "gw10", 0, 0.5, "xfailed"),
    iv("t.py::f", "gw2", 0, 2, "error"),
]
RUN_EDGES = [("t.py::a", "t.py::b"), ("t.py::a", "t.py::c"), ("t.py::b", "t.py::d"),
             ("t.py::c", "t.py::d"), ("t.py::c", "t.py::g"), ("t.py::g", "t.py::h")]
SKIPPED = [
    Skipped("t.py::g", "prerequisite c failed", "t.py::c"),
    Skipped("t.py::h", "prerequisite g was skipped: c failed", "t.py::c"),
    Skipped("t.py::i", "run stopped: -x", None),
]


def test_critical_path_is_the_longest_weighted_chain() -> None:
    assert timeline.critical_path(RUN, RUN_EDGES) == ["t.py::a", "t.py::b", "t.py::d"]
    # Heavier c: the path goes through it instead.
    heavier = [*RUN[:2], iv("t.py::c", "gw1", 1, 5), *RUN[3:]]
    assert timeline.critical_path(heavier, RUN_EDGES) == ["t.py::a", "t.py::c", "t.py::d"]
    # No edges: the single longest test.
    assert timeline.critical_path(RUN, []) == ["t.py::b"]
    assert timeline.critical_path([], RUN_EDGES) == []


def test_critical_path_ties_go_to_the_earliest_start_whatever_the_hash_seed() -> None:
    script = (
        "import json\n"
        "from pytest_dagorder.render.timeline import Interval, critical_path\n"
        "ivs = [Interval(f't::{k}', 'main', float(k), float(k) + 1.0, 'passed') "
        "for k in range(12)]\n"
        "edges = [(f't::{k}', f't::{k + 2}') for k in range(10)]\n"
        "print(json.dumps(critical_path(ivs, edges)))\n"
    )
    outputs = outputs_under_hash_seeds(script)
    assert outputs[0] == ["t::0", "t::2", "t::4", "t::6", "t::8", "t::10"]
    assert outputs.count(outputs[0]) == len(outputs)


def test_html_page_has_one_bar_per_test_and_one_lane_per_worker() -> None:
    page = timeline.render_html(RUN, SKIPPED, RUN_EDGES, lanes=["gw0", "gw3"])
    assert_self_contained(page)
    assert sorted(bars(page)) == sorted(
        (i.nodeid, i.nodeid in ("t.py::a", "t.py::b", "t.py::d")) for i in RUN)
    # Natural order (gw2 before gw10); a named lane with no bar is still shown (idle).
    assert lanes(page) == ["gw0", "gw1", "gw2", "gw3", "gw10"]
    assert page.count('fill="url(#idle)"') == 5
    assert "t.py::e&lt;&amp;&gt;" in page and "t.py::e<&>" not in page
    # Durations on hover.
    assert "<title>t.py::b - 3.00 s - passed - critical path</title>" in page
    # Skipped tests by root cause, biggest first, the stop last.
    skipped_part = page.split("Skipped by the graph (3)")[1]
    assert skipped_part.index("t.py::c</code>: blocked 2 tests") < skipped_part.index(
        "run stopped before these started: blocked 1 test")
    for s in SKIPPED:
        assert html.escape(s.reason) in skipped_part
    # Figures: makespan 5 s, critical path 5 s.
    assert "Makespan 5.00 s" in page and "critical path 5.00 s over 3 tests" in page


def test_html_page_of_an_empty_run() -> None:
    page = timeline.render_html([], [], [], lanes=["main"])
    assert_self_contained(page)
    assert bars(page) == [] and lanes(page) == ["main"]
    assert "<p>None.</p>" in page


def test_trace_events_hold_every_test_on_its_lane() -> None:
    doc = json.loads(timeline.render_trace(RUN, SKIPPED, RUN_EDGES, lanes=["gw0"]))
    events = doc["traceEvents"]
    names = {e["tid"]: e["args"]["name"] for e in events if e["name"] == "thread_name"}
    assert sorted(names.values(), key=timeline.lane_key) == ["gw0", "gw1", "gw2", "gw10"]
    complete = [e for e in events if e["ph"] == "X"]
    assert len(complete) == len(RUN)
    for e, i in zip(complete, RUN, strict=True):
        assert (e["name"], names[e["tid"]], e["cat"]) == (i.nodeid, i.lane, i.outcome)
        assert e["ts"] == pytest.approx((i.start - T0) * 1e6)
        assert e["dur"] == pytest.approx(i.duration * 1e6)
        assert e["args"]["critical_path"] is (i.nodeid in ("t.py::a", "t.py::b", "t.py::d"))
    assert doc["otherData"]["skipped_by_graph"] == "3"
