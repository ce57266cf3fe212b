"""decide: every decision about a run from the facts of its collection, without
workers, xdist or pytest items."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from pytest_dagorder.glue.decide import decide
from pytest_dagorder.glue.facts import Facts
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
            deselected: Sequence[str] = (), **fields: Any) -> Facts:
    """``{"b": "a"}``: b requires a, in key order; ``deselected`` tests are
    prerequisites outside the run (graph positions past the run's tests)."""
    names = list(spec)
    mods = [(modules or {}).get(n, MODULE) for n in names]
    ids = [f"{m}::test_{n}" for n, m in zip(names, mods, strict=True)]
    every = [*names, *deselected]
    pos = {n: k for k, n in enumerate(every)}
    requires = [tuple(pos[p] for p in spec.get(n, "").split()) for n in every]
    return Facts(
        ids=ids,
        locations=[(m, k, f"test_{n}") for k, (n, m) in enumerate(zip(names, mods, strict=True))],
        module_scopes=list(mods), class_scopes=[None] * len(ids),
        graph=True, requires=requires,
        outside=[f"{MODULE}::test_{n}" for n in deselected], **fields)


def test_a_chain_in_one_module_is_one_group_and_the_header_counts_it() -> None:
    decided = decide(payload({"a": "", "b": "a", "c": "b", "d": ""}), settings(), {})
    run = decided.run
    assert run.nodeids[:3] == [f"{MODULE}::test_{n}" for n in "abc"]
    assert run.machine.groups == [[0, 1, 2]]
    assert decided.relay is None and decided.dag_users == ()
    assert decided.mean_duration is None
    assert decided.header == [
        "dagorder: 4 tests, 2 dependencies, longest chain 3; xdist scheduling, "
        "affinity module (1 group); critical path by test counts",
        "dagorder: 1 affinity group keeps 3 of 4 tests on one worker (a dependent "
        "may read what its prerequisites left in the process); if the tests share no "
        "process state, --dag-affinity=none lifts this (--dag-explain: why each group "
        "formed)"]


def test_the_header_weighs_the_groups_by_recorded_durations() -> None:
    recorded = {f"{MODULE}::test_{n}": 1.0 for n in "abcd"}
    decided = decide(payload({"a": "", "b": "a", "c": "", "d": ""}), settings(), recorded,
                      workers=4)
    # Grouped, a and b run one after the other either way: nothing to pay,
    # nothing said.
    assert "1 affinity group keeps 2 of 4 tests on one worker (a dependent" in \
        decided.header[-1]
    assert "cost" not in decided.header[-1]
    decided = decide(payload({"a": "", "b": "a", "c": "a", "d": "a"}), settings(), recorded,
                      workers=4)
    # b, c and d could run at once after a: on one worker they take 4 s, not 2.
    assert "cost 2.00 s (no schedule beats 4.00 s with them, 2.00 s without)" in \
        decided.header[-1]


def test_explain_names_each_groups_reasons_and_the_free_edges() -> None:
    # c and d (two modules) use one session fixture; b -> c crosses modules
    # and shares nothing.
    shop = [("shop", "session", "")]
    p = payload({"a": "", "b": "a", "c": "b", "d": "c", "e": ""},
                modules={"c": "test_n.py", "d": "test_p.py", "e": "test_o.py"},
                fixtures=[[], [], shop, shop, []],
                xdist_groups=[None, None, None, None, "solo"])
    decided = decide(p, settings(affinity="state", explain=True), {})
    text = "\n".join(decided.header)
    assert "dagorder: group of test_m.py::test_a (2 tests): edges inside test_m.py\n" \
        "    test_m.py::test_a\n    test_m.py::test_b" in text
    assert "group of test_n.py::test_c (2 tests): session fixture 'shop'\n" \
        "    test_n.py::test_c\n    test_p.py::test_d" in text
    assert "group of test_o.py::test_e (1 test): xdist_group 'solo'" in text
    assert "1 dependency left free" in text
    assert "    test_m.py::test_b -> test_n.py::test_c" in text


def test_affinity_none_makes_no_group() -> None:
    decided = decide(payload({"a": "", "b": "a"}), settings(affinity="none"), {})
    assert decided.run.machine.groups == []
    assert "affinity none (0 groups)" in decided.header[0]


def test_recorded_durations_rank_and_set_the_mean() -> None:
    p = payload({"a": "", "b": "", "c": ""})
    decided = decide(p, settings(), {p.ids[0]: 1.0, p.ids[2]: 3.0, "elsewhere::x": 9.0})
    assert decided.mean_duration == 2.0
    assert "recorded durations of 2/3 tests" in decided.header[0]
    # The longest recorded test goes first (the longest remaining path).
    worker = object()
    decided.run.machine.add_worker(worker)
    assert decided.run.machine.take(worker, 1) == [2]


def test_a_deselected_prerequisite_is_settled_and_blocks_its_dependent() -> None:
    decided = decide(payload({"a": "", "b": "gone"}, deselected=["gone"]), settings(), {})
    run = decided.run
    assert run.n_run == 2 and len(run.graph) == 3
    assert run.machine.outcome[2] == "deselected"
    skips = run.pop_skips()
    assert [s.task for s in skips] == [1]
    assert "deselected" in skips[0].reason


def test_loadfile_keeps_each_file_whole_in_collection_order() -> None:
    p = payload({"a": "", "b": "", "c": "", "d": ""},
                modules={"c": "test_n.py", "d": "test_n.py"})
    decided = decide(p, settings(), {}, dist="loadfile")
    assert decided.run.machine.groups == [[0, 1], [2, 3]]
    assert list(decided.run.graph.after[1]) == [0]
    assert any("2 files" in line for line in decided.header[1:])


def test_runtime_depends_chains_its_module() -> None:
    p = payload({"a": "", "b": "", "c": ""}, modules={"c": "test_n.py"},
                runtime_depends=[False, True, False])
    decided = decide(p, settings(), {})
    assert decided.run.machine.groups == [[0, 1]]
    assert list(decided.run.graph.after[1]) == [0]
    assert decided.header[1] == ("dagorder: runtime depends() in 1 module: "
                               "each runs on one worker, in collection order")
    assert decided.notes == []


def test_a_runtime_depends_order_against_a_declared_edge_is_dropped_with_a_note() -> None:
    # b requires c, yet c comes after b in the module: chaining them would be a cycle.
    p = payload({"a": "", "b": "c", "c": ""}, runtime_depends=[True, False, False])
    decided = decide(p, settings(), {})
    assert decided.notes == [
        "runtime depends() modules not chained: their order contradicts an edge"]
    assert list(decided.run.graph.requires[1]) == [2]
    assert not any(decided.run.graph.after)


def test_dag_users_get_a_relay_that_counts_only_passed_tests() -> None:
    p = payload({"a": "", "b": "a"}, dag_users=[False, True])
    decided = decide(p, settings(), {})
    assert decided.relay is not None
    assert list(decided.dag_users) == [False, True]


def test_resources_and_exclusive_tests_are_announced() -> None:
    p = payload({"a": "", "b": "", "c": ""}, resources=[("db",), (), ()],
                exclusive=[False, False, True])
    decided = decide(p, settings(limits={"db": 2, "typo": 1}), {})
    assert decided.header[1:] == [
        "dagorder: resource limits db=2",
        "dagorder: warning: no test uses 'typo' (check the name in --dag-limit / dag_limits)",
        "dagorder: 1 test run alone (dag_exclusive): nothing else runs meanwhile"]


def test_the_collection_steps_are_worded_in_the_order_they_ran() -> None:
    p = payload({"a": ""}, lf_blocked=2, edges_file=("ci/edges.json", True, 3, 1, 1),
                shard=(2, 3, 1, 4, None, ("t.py::test_x", 3, None), True, False),
                complete=True)
    decided = decide(p, settings(), {})
    assert decided.header[1:4] == [
        "--lf: also 2 tests skipped last time because a prerequisite did not pass",
        "dagorder: 3 edges and 1 resource from edges.json "
        "(1 entry naming tests not collected here)",
        decided.header[3]]
    assert decided.header[3].startswith("dagorder: shard 2/3: 1 of 4 tests")
    assert "t.py::test_x" in decided.header[3]
    assert decided.run is not None and decided.run.whole is True
    missing = decide(payload({"a": ""}, edges_file=("e.json", False, 0, 0, 0),
                             shard=(1, 2, 0, 3, None, None, False, True)), settings(), {})
    assert missing.header[1:] == [
        "dagorder: no edges file at e.json yet (--dag-find-missing writes one)",
        "dagorder: shard 1/2: no failure of this part to re-run (--lf): the failures "
        "recorded when this loop over the parts began were in the parts that ran since; "
        "nothing to run, so the part passes"]


def test_explain_under_module_says_why_cross_module_edges_are_free() -> None:
    p = payload({"a": "", "b": "a", "c": "b"}, modules={"c": "test_n.py"})
    text = "\n".join(decide(p, settings(explain=True), {}).header)
    assert "group of test_m.py::test_a (2 tests): edges inside test_m.py" in text
    assert ("1 dependency left free (--dag-affinity=module keeps only edges inside a "
            "module):\n    test_m.py::test_b -> test_n.py::test_c") in text


def test_state_groups_are_formed_from_the_fixture_and_source_facts() -> None:
    spec = {"a": "", "b": "a", "c": "", "d": "c", "e": "", "f": "e"}
    modules = {"b": "test_n.py", "d": "test_n.py", "f": "test_n.py"}
    # a -> b crosses modules and shares nothing; c's module writes state its
    # tests leave behind; e's fixtures are unknown: those two edges keep their tests.
    p = payload(spec, modules=modules, fixtures=[[], [], [], [], None, []])
    assert payload_groups(p) == [[4, 5]]
    p = payload({**spec}, modules=modules, fixtures=[[], [], [], [], None, []],
                writes_state=[MODULE])
    decided = decide(p, settings(affinity="state", explain=True), {})
    assert decided.run is not None
    assert decided.run.machine.groups == [[0, 1], [2, 3], [4, 5]]
    text = "\n".join(decided.header)
    assert f"{MODULE} writes state its tests leave behind" in text
    assert f"fixtures of {MODULE}::test_e unknown" in text
    # The user's word: these fixtures carry nothing (dag_stateless_fixtures).
    shop = [("shop", "session", "")]
    p = payload({"a": "", "b": "a"}, modules={"b": "test_n.py"}, fixtures=[shop, shop])
    assert payload_groups(p) == [[0, 1]]
    assert payload_groups(p, stateless_fixtures=frozenset({"shop"})) == []


def payload_groups(p: Facts, **over: Any) -> list[list[int]]:
    decided = decide(p, settings(affinity="state", **over), {})
    assert decided.run is not None
    return [list(g) for g in decided.run.machine.groups]


def test_problems_and_the_usage_error_are_decided_without_a_run() -> None:
    p = payload({"a": ""}, problems=[(f"{MODULE}::test_a", "target 'x' matches no test")])
    decided = decide(p, settings(), {})
    assert decided.run is None and decided.header == []
    assert [(x.nodeid, x.message) for x in decided.problems] == [
        (f"{MODULE}::test_a", "target 'x' matches no test")]
    decided = decide(payload({"a": ""}, ordering_failure="cannot order"), settings(), {})
    assert decided.run is None and decided.usage_error == "cannot order"
    # --continue-on-collection-errors: reported, and the rest runs; not the whole suite.
    decided = decide(payload({"a": ""}, errors=[("t.py::b", "broken")], complete=True),
                     settings(), {})
    assert decided.run is not None and not decided.whole
    assert [x.nodeid for x in decided.errors] == ["t.py::b"]


def test_the_serial_driver_gets_its_run_and_header_from_the_same_function() -> None:
    p = payload({"a": "", "b": "a", "c": "b"}, shard=(1, 2, 1, 2, 1.0, None, True, False),
                pulled_back=1, resources=[["db"], [], []])
    decided = decide(p, settings(explain=True, limits={"typo": 1}), {}, driver="serial")
    assert decided.run is not None and decided.run.machine.groups == []
    assert decided.header == [
        "dagorder: 3 tests, 2 dependencies, longest chain 3 (serial)",
        "dagorder: shard 1/2: 1 of 2 tests, about 1.0 s recorded",
        "dagorder: 1 prerequisite pulled back into the run (--dag-with-prerequisites): "
        "3 tests in all",
        decided.header[3],
        "dagorder: warning: no test uses 'typo' (check the name in --dag-limit / dag_limits)"]
    assert decided.header[3].startswith("dagorder: serial run: every test runs")
    # Nothing declared: no run (the plugin stays out of the way), but --dag-on-failure=stop
    # needs the core to withhold what follows a failure.
    plain = Facts([f"{MODULE}::test_a"], [], [None], [None])
    assert decide(plain, settings(), {}, driver="serial").run is None
    stop = decide(plain, settings(on_failure="stop"), {}, driver="serial")
    assert stop.run is not None and stop.run.graph.edge_count == 0
