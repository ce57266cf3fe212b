"""build_run: the controller's run built from a worker's plan, without workers or xdist."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from pytest_dagorder.distributed import wire
from pytest_dagorder.distributed.build import build_run
from pytest_dagorder.glue.settings import Settings

MODULE = "test_m.py"


def settings(**over: Any) -> Settings:
    values: dict[str, Any] = {
        "affinity": "module", "on_failure": "skip", "with_prerequisites": False,
        "ignore_durations": False, "automark_dependency": False,
        "ignore_unknown_dependency": False}
    values.update(over)
    return Settings(**values)


def payload(spec: Mapping[str, str], *, modules: Mapping[str, str] | None = None,
            deselected: Sequence[str] = (), **fields: Any) -> wire.Payload:
    """``{"b": "a"}``: b requires a, in key order; ``deselected`` tests are
    prerequisites outside the run (graph positions past the run's tests)."""
    names = list(spec)
    mods = [(modules or {}).get(n, MODULE) for n in names]
    ids = [f"{m}::test_{n}" for n, m in zip(names, mods, strict=True)]
    every = [*names, *deselected]
    pos = {n: k for k, n in enumerate(every)}
    graph_ids = [*ids, *(f"{MODULE}::test_{n}" for n in deselected)]
    requires = [[pos[p] for p in spec.get(n, "").split()] for n in every]
    return wire.Payload(
        ids=ids, barrier=len(ids),
        locations=[(m, k, f"test_{n}") for k, (n, m) in enumerate(zip(names, mods, strict=True))],
        module_scopes=list(mods), class_scopes=[None] * len(ids),
        xdist_groups=[None] * len(ids),
        graph=wire.GraphData(graph_ids, requires, [[] for _ in every]),
        **fields)


def test_a_chain_in_one_module_is_one_group_and_the_header_counts_it() -> None:
    built = build_run(payload({"a": "", "b": "a", "c": "b", "d": ""}), settings(), {})
    run = built.run
    assert run.nodeids[:3] == [f"{MODULE}::test_{n}" for n in "abc"]
    assert run.machine.groups == [[0, 1, 2]]
    assert built.relay is None and built.dag_users == ()
    assert built.mean_duration is None
    assert built.header == [
        "dagorder: 4 tests, 2 dependencies, longest chain 3; xdist scheduling, "
        "affinity module (1 group); critical path by test counts",
        "dagorder: 1 affinity group keeps 3 of 4 tests on one worker each (a dependent "
        "may read what its prerequisites left in the process); if the tests share no "
        "process state, --dag-affinity=none lifts this (--dag-explain: why each group "
        "formed)"]


def test_the_header_weighs_the_groups_by_recorded_durations() -> None:
    recorded = {f"{MODULE}::test_{n}": 1.0 for n in "abcd"}
    built = build_run(payload({"a": "", "b": "a", "c": "", "d": ""}), settings(), recorded,
                      workers=4)
    # Grouped, a and b run one after the other either way: nothing to pay.
    assert "cost 0.00 s (no schedule beats 2.00 s with them, 2.00 s without)" in \
        built.header[-1]
    built = build_run(payload({"a": "", "b": "a", "c": "a", "d": "a"}), settings(), recorded,
                      workers=4)
    # b, c and d could run at once after a: on one worker they take 4 s, not 2.
    assert "cost 2.00 s (no schedule beats 4.00 s with them, 2.00 s without)" in \
        built.header[-1]


def test_explain_names_each_groups_reasons_and_the_free_edges() -> None:
    p = payload({"a": "", "b": "a", "c": "b", "d": "c", "e": ""},
                modules={"c": "test_n.py", "d": "test_n.py", "e": "test_o.py"},
                state_scopes=["edges inside test_m.py"] * 2 + [
                    "edges inside test_n.py; session fixture 'shop'"] * 2 + [None])
    p = wire.Payload(**{**p.__dict__, "xdist_groups": [None, None, None, None, "solo"]})
    built = build_run(p, settings(affinity="state", explain=True), {})
    text = "\n".join(built.header)
    assert "dagorder: group of test_m.py::test_a (2 tests): edges inside test_m.py\n" \
        "    test_m.py::test_a\n    test_m.py::test_b" in text
    assert "group of test_n.py::test_c (2 tests): edges inside test_n.py; " \
        "session fixture 'shop'" in text
    assert "group of test_o.py::test_e (1 test): xdist_group 'solo'" in text
    assert "1 dependency left free" in text
    assert "    test_m.py::test_b -> test_n.py::test_c" in text


def test_affinity_none_makes_no_group() -> None:
    built = build_run(payload({"a": "", "b": "a"}), settings(affinity="none"), {})
    assert built.run.machine.groups == []
    assert "affinity none (0 groups)" in built.header[0]


def test_recorded_durations_rank_and_set_the_mean() -> None:
    p = payload({"a": "", "b": "", "c": ""})
    built = build_run(p, settings(), {p.ids[0]: 1.0, p.ids[2]: 3.0, "elsewhere::x": 9.0})
    assert built.mean_duration == 2.0
    assert "recorded durations of 2/3 tests" in built.header[0]
    # The longest recorded test goes first (the longest remaining path).
    worker = object()
    built.run.machine.add_worker(worker)
    assert built.run.machine.take(worker, 1) == [2]


def test_a_deselected_prerequisite_is_settled_and_blocks_its_dependent() -> None:
    built = build_run(payload({"a": "", "b": "gone"}, deselected=["gone"]), settings(), {})
    run = built.run
    assert run.n_run == 2 and len(run.graph) == 3
    assert run.machine.outcome[2] == "deselected"
    skips = run.pop_skips()
    assert [s.task for s in skips] == [1]
    assert "deselected" in skips[0].reason


def test_loadfile_keeps_each_file_whole_in_collection_order() -> None:
    p = payload({"a": "", "b": "", "c": "", "d": ""},
                modules={"c": "test_n.py", "d": "test_n.py"})
    built = build_run(p, settings(), {}, dist="loadfile")
    assert built.run.machine.groups == [[0, 1], [2, 3]]
    assert list(built.run.graph.after[1]) == [0]
    assert any("2 files" in line for line in built.header[1:])


def test_runtime_depends_chains_its_module() -> None:
    p = payload({"a": "", "b": "", "c": ""}, modules={"c": "test_n.py"},
                runtime_depends=[False, True, False])
    built = build_run(p, settings(), {})
    assert built.run.machine.groups == [[0, 1]]
    assert list(built.run.graph.after[1]) == [0]
    assert built.header[1] == ("dagorder: runtime depends() in 1 module: "
                               "each runs on one worker, in collection order")
    assert built.notes == []


def test_a_runtime_depends_order_against_a_declared_edge_is_dropped_with_a_note() -> None:
    # b requires c, yet c comes after b in the module: chaining them would be a cycle.
    p = payload({"a": "", "b": "c", "c": ""}, runtime_depends=[True, False, False])
    built = build_run(p, settings(), {})
    assert built.notes == [
        "runtime depends() modules not chained: their order contradicts an edge"]
    assert list(built.run.graph.requires[1]) == [2]
    assert not any(built.run.graph.after)


def test_dag_users_get_a_relay_that_counts_only_passed_tests() -> None:
    p = payload({"a": "", "b": "a"}, dag_users=[False, True])
    built = build_run(p, settings(), {})
    assert built.relay is not None
    assert list(built.dag_users) == [False, True]


def test_resources_and_exclusive_tests_are_announced() -> None:
    p = payload({"a": "", "b": "", "c": ""}, resources=[("db",), (), ()],
                exclusive=[False, False, True])
    built = build_run(p, settings(limits={"db": 2, "typo": 1}), {})
    assert built.header[1:] == [
        "dagorder: resource limits db=2",
        "dagorder: warning: no test uses 'typo' (check the name in --dag-limit / dag_limits)",
        "dagorder: 1 test run alone (dag_exclusive): nothing else runs meanwhile"]


def test_the_plans_own_header_lines_and_whole_flag_carry_over() -> None:
    p = payload({"a": ""}, header=["dagorder: shard 1/2"], whole=True)
    built = build_run(p, settings(), {})
    assert built.header[1] == "dagorder: shard 1/2"
    assert built.run.whole is True


def test_explain_under_module_says_why_cross_module_edges_are_free() -> None:
    p = payload({"a": "", "b": "a", "c": "b"}, modules={"c": "test_n.py"})
    text = "\n".join(build_run(p, settings(explain=True), {}).header)
    assert "group of test_m.py::test_a (2 tests): edges inside test_m.py" in text
    assert ("1 dependency left free (--dag-affinity=module keeps only edges inside a "
            "module):\n    test_m.py::test_b -> test_n.py::test_c") in text
