"""decide: every decision about a run from the facts of its collection, without
workers, xdist or pytest items."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pytest

from pytest_dagorder.deciding.decide import decide_serial, decide_xdist
from pytest_dagorder.declaring.notes import EdgesFileNote, ShardNote
from pytest_dagorder.options.settings import Settings
from pytest_dagorder.planning.facts import Facts

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
    decided = decide_xdist(payload({"a": "", "b": "a", "c": "b", "d": ""}), settings(), {})
    run = decided.run
    assert run.nodeids[:3] == [f"{MODULE}::test_{n}" for n in "abc"]
    assert run.machine.groups == [[0, 1, 2]]
    assert decided.relay is None and decided.dag_users == ()
    assert decided.mean_duration is None
    assert list(decided.header) == [
        "dagorder: 4 tests, 2 dependencies, longest chain 3; xdist scheduling, "
        "affinity module (1 group); critical path by test counts",
        "dagorder: 1 affinity group keeps 3 of 4 tests on one worker, in serial "
        "order (edges inside a module keep their tests in one process); --dag-explain: "
        "each group"]


def test_the_header_weighs_the_groups_by_recorded_durations() -> None:
    recorded = {f"{MODULE}::test_{n}": 1.0 for n in "abcd"}
    decided = decide_xdist(payload({"a": "", "b": "a", "c": "", "d": ""}), settings(), recorded,
                      workers=4)
    # Grouped, a and b run one after the other either way: nothing to pay,
    # nothing said.
    assert "1 affinity group keeps 2 of 4 tests on one worker, in serial order" in \
        decided.header[-1]
    assert "cost" not in decided.header[-1]
    decided = decide_xdist(payload({"a": "", "b": "a", "c": "a", "d": "a"}), settings(), recorded,
                      workers=4)
    # b, c and d could run at once after a: on one worker they take 4 s, not 2.
    assert "cost 2.00 s (no schedule beats 4.00 s with them, 2.00 s without)" in \
        decided.header[-1]


def test_explain_names_each_groups_reasons_its_order_and_the_free_edges() -> None:
    # a -> b -> c -> d across three modules: one group, whatever they share
    # (c and d use one session fixture: said, not decided on).
    shop = [("shop", "session", "")]
    p = payload({"a": "", "b": "a", "c": "b", "d": "c", "e": ""},
                modules={"c": "test_n.py", "d": "test_p.py", "e": "test_o.py"},
                fixtures=[[], [], shop, shop, []],
                xdist_groups=[None, None, None, None, "solo"])
    decided = decide_xdist(p, settings(affinity="state", explain=True), {})
    text = "\n".join(decided.header)
    assert ("dagorder: group of test_m.py::test_a (4 tests): edges from test_m.py to "
            "test_n.py; edges from test_n.py to test_p.py; edges inside test_m.py; its tests "
            "share session fixture 'shop'; they run in this order, on one worker:\n"
            "    test_m.py::test_a\n    test_m.py::test_b\n    test_n.py::test_c\n"
            "    test_p.py::test_d") in text
    assert "group of test_o.py::test_e (1 test): xdist_group 'solo'" in text
    assert "no dependency left free: every edge keeps its tests together" in text
    # The user's statement lifts c's edges: the two left free are listed.
    quiet = decide_xdist(Facts(**{**p.__dict__, "shares_nothing": [False, False, True, False,
                                                                False]}),
                   settings(affinity="state", explain=True), {})
    text = "\n".join(quiet.header)
    assert "group of test_m.py::test_a (2 tests): edges inside test_m.py; they run" in text
    assert ("2 dependencies left free (the user stated a test shares nothing "
            "(dag_shares_nothing), or evidence showed the dependent passes in a fresh "
            "process):\n    test_m.py::test_b -> test_n.py::test_c\n"
            "    test_n.py::test_c -> test_p.py::test_d") in text


def test_a_group_runs_in_serial_order_whatever_the_ranks() -> None:
    # One module fixture edited by a chain: c declares only a, yet serially
    # it ran after b.  The recorded durations make c the most urgent.
    p = payload({"a": "", "b": "a", "c": "a", "d": ""})
    recorded = {p.ids[0]: 0.1, p.ids[1]: 0.1, p.ids[2]: 5.0, p.ids[3]: 0.1}
    decided = decide_xdist(p, settings(affinity="state"), recorded, workers=2)
    machine = decided.run.machine
    machine.add_worker("w")
    assert machine.take("w", 3) == [0]
    machine.finished(0, "passed")
    assert machine.take("w", 3) == [1, 2]


def test_affinity_none_makes_no_group() -> None:
    decided = decide_xdist(payload({"a": "", "b": "a"}), settings(affinity="none"), {})
    assert decided.run.machine.groups == []
    assert "affinity none (0 groups)" in decided.header[0]


def test_recorded_durations_rank_and_set_the_mean() -> None:
    p = payload({"a": "", "b": "", "c": ""})
    decided = decide_xdist(p, settings(), {p.ids[0]: 1.0, p.ids[2]: 3.0, "elsewhere::x": 9.0})
    assert decided.mean_duration == 2.0
    assert "recorded durations of 2/3 tests" in decided.header[0]
    # The longest recorded test goes first (the longest remaining path).
    worker = object()
    decided.run.machine.add_worker(worker)
    assert decided.run.machine.take(worker, 1) == [2]


def test_a_deselected_prerequisite_is_settled_and_blocks_its_dependent() -> None:
    decided = decide_xdist(payload({"a": "", "b": "gone"}, deselected=["gone"]), settings(), {})
    run = decided.run
    assert run.n_run == 2 and len(run.graph) == 3
    assert run.machine.outcome[2] == "deselected"
    skips = run.pop_skips()
    assert [s.task for s in skips] == [1]
    assert "deselected" in skips[0].reason


def test_loadfile_keeps_each_file_whole_in_collection_order() -> None:
    p = payload({"a": "", "b": "", "c": "", "d": ""},
                modules={"c": "test_n.py", "d": "test_n.py"})
    decided = decide_xdist(p, settings(), {}, dist="loadfile")
    assert decided.run.machine.groups == [[0, 1], [2, 3]]
    assert list(decided.run.graph.after[1]) == [0]
    assert any("2 files" in line for line in decided.header[1:])


def test_runtime_depends_chains_its_module() -> None:
    p = payload({"a": "", "b": "", "c": ""}, modules={"c": "test_n.py"},
                runtime_depends=[False, True, False])
    decided = decide_xdist(p, settings(), {})
    assert decided.run.machine.groups == [[0, 1]]
    assert list(decided.run.graph.after[1]) == [0]
    assert decided.header[1] == ("dagorder: runtime depends() in 1 module: "
                               "each runs on one worker, in collection order")
    assert decided.notes == ()


def test_a_runtime_depends_order_against_a_declared_edge_is_dropped_with_a_note() -> None:
    # b requires c, yet c comes after b in the module: chaining them would be a cycle.
    p = payload({"a": "", "b": "c", "c": ""}, runtime_depends=[True, False, False])
    decided = decide_xdist(p, settings(), {})
    assert list(decided.notes) == [
        "runtime depends() modules not chained: their order contradicts an edge"]
    assert list(decided.run.graph.requires[1]) == [2]
    assert not any(decided.run.graph.after)


def test_dag_users_get_a_relay_that_counts_only_passed_tests() -> None:
    p = payload({"a": "", "b": "a"}, dag_users=[False, True])
    decided = decide_xdist(p, settings(), {})
    assert decided.relay is not None
    assert list(decided.dag_users) == [False, True]


def test_resources_and_exclusive_tests_are_announced() -> None:
    p = payload({"a": "", "b": "", "c": ""}, resources=[("db",), (), ()],
                exclusive=[False, False, True])
    decided = decide_xdist(p, settings(limits={"db": 2, "typo": 1}), {})
    assert list(decided.header[1:]) == [
        "dagorder: resource limits db=2",
        "dagorder: warning: no test uses 'typo' (check the name in --dag-limit / dag_limits)",
        "dagorder: 1 test run alone (dag_exclusive): nothing else runs meanwhile"]


def test_the_collection_steps_are_worded_in_the_order_they_ran() -> None:
    p = payload({"a": ""}, lf_blocked=2, edges_file=EdgesFileNote("ci/edges.json", True, 3, 1, 1),
                shard=ShardNote(2, 3, 1, 4, None, ("t.py::test_x", 3, None), True, False),
                complete=True)
    decided = decide_xdist(p, settings(), {})
    assert list(decided.header[1:4]) == [
        "--lf: also 2 tests skipped last time because a prerequisite did not pass",
        "dagorder: 3 edges and 1 resource from edges.json "
        "(1 entry naming tests not collected here)",
        decided.header[3]]
    assert decided.header[3].startswith("dagorder: shard 2/3: 1 of 4 tests")
    assert "t.py::test_x" in decided.header[3]
    assert decided.run is not None and decided.run.whole is True
    missing = decide_xdist(payload({"a": ""}, edges_file=EdgesFileNote("e.json", False, 0, 0, 0),
                             shard=ShardNote(1, 2, 0, 3, None, None, False, True)), settings(), {})
    assert list(missing.header[1:]) == [
        "dagorder: no edges file at e.json yet (--dag-find-missing writes one)",
        "dagorder: shard 1/2: no failure of this part to re-run (--lf): the failures "
        "recorded when this loop over the parts began were in the parts that ran since; "
        "nothing to run, so the part passes"]


def test_explain_under_module_says_why_cross_module_edges_are_free() -> None:
    p = payload({"a": "", "b": "a", "c": "b"}, modules={"c": "test_n.py"})
    text = "\n".join(decide_xdist(p, settings(explain=True), {}).header)
    assert "group of test_m.py::test_a (2 tests): edges inside test_m.py" in text
    assert ("1 dependency left free (--dag-affinity=module keeps only edges inside a "
            "module):\n    test_m.py::test_b -> test_n.py::test_c") in text


def test_state_groups_rest_on_declared_edges_only() -> None:
    spec = {"a": "", "b": "a", "c": "", "d": "c", "e": "", "f": "e"}
    modules = {"b": "test_n.py", "d": "test_n.py", "f": "test_n.py"}
    # Whatever the fixtures (none, unknown, one session fixture), each edge
    # joins its tests: no reading of code decides a group.
    shop = [("shop", "session", "")]
    p = payload(spec, modules=modules, fixtures=[[], [], shop, shop, None, []])
    assert payload_groups(p) == [[0, 1], [2, 3], [4, 5]]
    # dag_stateless_fixtures lifts no edge (a fixture cannot say what else an
    # edge carries); dag_shares_nothing and evidence do.
    assert payload_groups(p, stateless_fixtures=frozenset({"shop"})) == [[0, 1], [2, 3], [4, 5]]
    quiet = Facts(**{**p.__dict__, "shares_nothing": [False, True, False, False, False, False]})
    assert payload_groups(quiet) == [[2, 3], [4, 5]]
    lifted = Facts(**{**p.__dict__, "lifted": ((2, 3),)})
    assert payload_groups(lifted) == [[0, 1], [4, 5]]
    # Ordering-only edges join too.
    after = payload({"a": "", "b": ""}, modules={"b": "test_n.py"}, after=[(), (0,)])
    assert payload_groups(after) == [[0, 1]]


def test_the_header_names_the_cost_the_finder_and_lifts_only_what_no_fixture_holds() -> None:
    # b, c and d could run at once after a: grouped they cost 2 s of 4.
    spec = {"a": "", "b": "a", "c": "a", "d": "a"}
    recorded = {f"{MODULE}::test_{n}": 1.0 for n in spec}
    line = decide_xdist(payload(spec), settings(affinity="state"), recorded, workers=4).header[-1]
    assert line == (
        "dagorder: 1 affinity group keeps 4 of 4 tests on one worker, in serial order "
        "(every declared edge keeps its two tests in one process); by the recorded "
        "durations they cost 2.00 s (no schedule beats 4.00 s with them, 2.00 s without); "
        "--dag-find-missing learns which of them a dependent needs (a probe runs it in a "
        "fresh process); if the tests share no process state, --dag-affinity=none lifts "
        "this (--dag-explain: each group)")
    # Two of them share a module fixture: none would lift nothing they need.
    held = payload(spec, module_fixtures=[True, True, False, False])
    line = decide_xdist(held, settings(affinity="state"), recorded, workers=4).header[-1]
    assert "--dag-affinity=none" not in line
    assert line.endswith("; a module fixture of test_m.py holds tests of a group together "
                         "(--dag-explain: each group)")
    box = [("box", "session", "conftest.py")]
    shared = payload(spec, fixtures=[box, [], [], box])
    line = decide_xdist(shared, settings(affinity="state"), recorded, workers=4).header[-1]
    assert "session fixture 'box' of conftest.py holds" in line
    # ... unless the user said it carries nothing.
    line = decide_xdist(shared, settings(affinity="state", stateless_fixtures=frozenset({"box"})),
                  recorded, workers=4).header[-1]
    assert "--dag-affinity=none lifts this" in line
    # A small suite whose groups cost nothing keeps its header short.
    chain = {"a": "", "b": "a"}
    line = decide_xdist(payload(chain), settings(affinity="state"),
                  {f"{MODULE}::test_{n}": 1.0 for n in chain}, workers=2).header[-1]
    assert "cost" not in line
    assert line.endswith("in one process); --dag-explain: each group")


def test_pytest_order_ordinals_fence_the_hand_out() -> None:
    # pytest-order sorted z (order(-1)) last and f (order(0)) first; z is the
    # most urgent by its recorded duration, yet goes only after every other.
    p = payload({"f": "", "a": "", "b": "", "z": ""}, ordinals=[0, None, None, -1])
    recorded = {p.ids[0]: 0.1, p.ids[1]: 0.1, p.ids[2]: 0.5, p.ids[3]: 9.0}
    decided = decide_xdist(p, settings(affinity="none"), recorded, workers=2)
    machine = decided.run.machine
    machine.add_worker("w1")
    machine.add_worker("w2")
    assert machine.take("w1") == [0]  # the first: nothing goes before it
    assert machine.take("w2") == [2]  # then by priority, up to the fence
    assert machine.take("w2") == [1]
    assert machine.take("w1") == [3]  # last, once every other test went
    machine.validate()


def test_a_test_evidence_freed_is_held_by_no_fence_and_the_header_says_so() -> None:
    # As above, but the edges file's fence verdicts free z ("") and keep b:
    # z, the most urgent, goes first; b still waits at f's fence.
    from pytest_dagorder.declaring.notes import FenceNote

    p = payload({"f": "", "a": "", "b": "", "z": ""}, ordinals=[0, None, None, -1],
                fence_verdicts=[None, None, "changed the process's state", ""],
                fence_evidence=FenceNote("e.json", 1))
    recorded = {p.ids[0]: 0.1, p.ids[1]: 0.1, p.ids[2]: 0.5, p.ids[3]: 9.0}
    decided = decide_xdist(p, settings(affinity="none", explain=True), recorded, workers=2)
    machine = decided.run.machine
    machine.add_worker("w1")
    machine.add_worker("w2")
    assert machine.take("w1") == [3]  # freed: ahead of every test sorted before it
    assert machine.take("w2") == [0]
    assert machine.take("w2") == [2]
    machine.validate()
    assert ("dagorder: 1 of 3 fenced tests free by evidence from e.json (1 stale: a file "
            "they rest on changed; renew with pytest --dag-find-missing -n 2 "
            "--dag-edges=e.json)") in decided.header
    assert f"dagorder: fence kept by evidence: {p.ids[2]} (changed the process's state)" \
        in decided.header
    assert any(line.startswith("dagorder: fence lifted by evidence") and line.endswith(p.ids[3])
               for line in decided.header)


@pytest.mark.parametrize(("ordinals", "second"), [([1, 1, 1], [2]), ([1, 1, 2], [])],
                         ids=["one ordinal", "two ordinals"])
def test_tests_of_one_ordinal_share_a_stretch_of_the_hand_out(
        ordinals: list[int | None], second: list[int]) -> None:
    # Every test has an ordinal (pytest-order, as a suite marking each module);
    # b waits for a.  x of a's and b's ordinal goes to the other worker at
    # once; of a later ordinal it waits until b was handed out.
    p = payload({"a": "", "b": "a", "x": ""}, ordinals=ordinals)
    machine = decide_xdist(p, settings(affinity="none"), {}, workers=2).run.machine
    machine.add_worker("w1")
    machine.add_worker("w2")
    assert machine.take("w1") == [0]
    assert machine.take("w2") == second
    machine.validate()


def payload_groups(p: Facts, **over: Any) -> list[list[int]]:
    decided = decide_xdist(p, settings(affinity="state", **over), {})
    assert decided.run is not None
    return [list(g) for g in decided.run.machine.groups]


def test_problems_and_the_usage_error_are_decided_without_a_run() -> None:
    p = payload({"a": ""}, problems=[(f"{MODULE}::test_a", "target 'x' matches no test")])
    decided = decide_xdist(p, settings(), {})
    assert decided.run is None and decided.header == ()
    assert [(x.nodeid, x.message) for x in decided.problems] == [
        (f"{MODULE}::test_a", "target 'x' matches no test")]
    decided = decide_xdist(payload({"a": ""}, ordering_failure="cannot order"), settings(), {})
    assert decided.run is None and decided.usage_error == "cannot order"
    # --continue-on-collection-errors: reported, and the rest runs; not the whole suite.
    decided = decide_xdist(payload({"a": ""}, errors=[("t.py::b", "broken")], complete=True),
                     settings(), {})
    assert decided.run is not None and not decided.whole
    assert [x.nodeid for x in decided.errors] == ["t.py::b"]


def test_the_serial_driver_gets_its_run_and_header_from_the_same_function() -> None:
    p = payload({"a": "", "b": "a", "c": "b"}, shard=ShardNote(1, 2, 1, 2, 1.0, None, True, False),
                pulled_back=1, resources=[["db"], [], []])
    decided = decide_serial(p, settings(explain=True, limits={"typo": 1}))
    assert decided.run is not None and decided.run.machine.groups == []
    assert list(decided.header) == [
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
    assert decide_serial(plain, settings()).run is None
    stop = decide_serial(plain, settings(on_failure="stop"))
    assert stop.run is not None and stop.run.graph.edge_count == 0
