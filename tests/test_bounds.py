"""The lower bounds with and without affinity groups (core), and where users see them."""

from __future__ import annotations

import itertools
import random

import pytest
from helpers import make_modules
from support.dagtester import DagTester

from pytest_dagorder.core.bounds import bounds
from pytest_dagorder.render.timeline import Interval, render_html

pytestmark = pytest.mark.dag_modes("own")


def test_without_groups_the_bounds_agree() -> None:
    b = bounds({"a": 1.0, "b": 2.0, "c": 4.0}, [("a", "b")], {}, 2)
    assert (b.work, b.critical, b.grouped_critical) == (7.0, 4.0, 4.0)
    assert b.bound == b.grouped_bound == 4.0 and b.cost == 0.0
    assert b.groups_on_path == ()


def test_a_group_waiting_on_a_slow_prerequisite_elsewhere_costs_its_length() -> None:
    # m1..m4 (one group, 1 s each, free of each other) wait for "slow" (4 s)
    # because m4 depends on it: the group cannot start before 4 s, then takes 4 s.
    durations = {"slow": 4.0, "m1": 1.0, "m2": 1.0, "m3": 1.0, "m4": 1.0}
    groups = {m: "g" for m in ("m1", "m2", "m3", "m4")}
    b = bounds(durations, [("slow", "m4")], groups, 2)
    assert b.critical == 5.0
    assert b.grouped_critical == 8.0
    assert b.cost == pytest.approx(8.0 - 5.0)
    assert b.groups_on_path == (("g", 4, 4.0),)


def test_a_member_gates_its_dependents_by_its_own_chain_not_the_whole_group() -> None:
    durations = {"g1": 1.0, "g2": 5.0, "after": 1.0}
    b = bounds(durations, [("g1", "after")], {"g1": "g", "g2": "g"}, 2)
    assert b.grouped_critical == 6.0  # the group itself: 1 + 5
    b = bounds(durations, [("g1", "after")], {"g1": "g", "g2": "g"}, 2)
    assert b.groups_on_path == (("g", 2, 6.0),)


def test_groups_on_a_cycle_between_them_count_as_free() -> None:
    # a1 -> b1, b2 -> a2: groups a and b wait on each other (the scheduler dissolves them).
    durations = {"a1": 1.0, "a2": 1.0, "b1": 1.0, "b2": 1.0}
    b = bounds(durations, [("a1", "b1"), ("b2", "a2")], {"a1": "a", "a2": "a", "b1": "b",
                                                         "b2": "b"}, 2)
    assert b.grouped_critical == b.critical == 2.0


def test_the_grouped_bound_is_never_below_the_plain_one_and_is_deterministic() -> None:
    rng = random.Random(7)
    for _ in range(200):
        n = rng.randint(1, 12)
        durations = {k: rng.uniform(0.1, 2.0) for k in range(n)}
        edges = [(p, d) for p, d in itertools.combinations(range(n), 2) if rng.random() < 0.2]
        groups = {k: rng.choice(["x", "y", None]) for k in range(n)}
        b = bounds(durations, edges, groups, rng.randint(1, 4))
        assert b.grouped_bound >= b.bound - 1e-9
        for g, size, seconds in b.groups_on_path:
            members = [k for k in range(n) if groups[k] == g]
            assert size == len(members) and seconds == pytest.approx(
                sum(durations[k] for k in members))
        assert b == bounds(durations, edges, groups, b.workers)


def test_a_chain_that_opens_the_run_raises_the_staggered_bound() -> None:
    # "a" (4 s) gates four 1 s tests: on 2 workers nothing else can run in
    # the first 4 s, then 4 s of work is left for 2 workers: 6 s at best,
    # while max(C, W/N) says 5 s.
    durations = {"a": 4.0, "b1": 1.0, "b2": 1.0, "b3": 1.0, "b4": 1.0}
    b = bounds(durations, [("a", f"b{k}") for k in range(1, 5)], {}, 2)
    assert b.simple == 5.0
    assert b.staggered == pytest.approx(6.0)
    assert b.bound == b.grouped_bound == pytest.approx(6.0)
    # The same shape reversed (four tests gate one): counted from the end.
    b = bounds(durations, [(f"b{k}", "a") for k in range(1, 5)], {}, 2)
    assert b.staggered == pytest.approx(6.0)


def _list_schedule(durations: dict[int, float], edges: list[tuple[int, int]],
                   workers: int) -> float:
    """The makespan of one feasible schedule: whenever a worker is free it
    takes the ready task with the lowest number."""
    preds = {k: {p for p, d in edges if d == k} for k in durations}
    free_at = [0.0] * workers
    end: dict[int, float] = {}
    while len(end) < len(durations):
        ready = [k for k in durations if k not in end and preds[k] <= end.keys()]
        k = min(ready)
        w = min(range(workers), key=free_at.__getitem__)
        start = max([free_at[w], *(end[p] for p in preds[k])])
        end[k] = free_at[w] = start + durations[k]
    return max(end.values(), default=0.0)


def test_no_schedule_beats_the_bounds() -> None:
    rng = random.Random(11)
    for _ in range(300):
        n = rng.randint(1, 14)
        durations = {k: rng.choice([rng.uniform(0.1, 1.0), rng.uniform(2.0, 6.0)])
                     for k in range(n)}
        edges = [(p, d) for p, d in itertools.combinations(range(n), 2) if rng.random() < 0.25]
        workers = rng.randint(1, 4)
        b = bounds(durations, edges, {}, workers)
        assert b.staggered >= b.work / workers - 1e-9
        assert b.bound <= _list_schedule(durations, edges, workers) + 1e-9


def test_the_timeline_header_gives_both_bounds() -> None:
    intervals = [Interval("slow", "gw0", 0.0, 4.0, "passed"),
                 Interval("m1", "gw1", 4.0, 5.0, "passed"),
                 Interval("m2", "gw1", 5.0, 6.0, "passed")]
    page = render_html(intervals, edges=[("slow", "m2")], groups={"m1": "g", "m2": "g"})
    assert "max(C, W/N) = 5.00 s" in page
    assert "With affinity groups (each on one worker, contiguously, after its " \
        "prerequisites): critical path 6.00 s, no schedule beats 6.00 s" in page
    assert "With affinity groups" not in render_html(intervals, edges=[("slow", "m2")])
    assert "nor, as no test starts" not in page  # 5 s is already the best there is


def test_the_timeline_header_gives_the_staggered_bound_where_it_is_tighter() -> None:
    intervals = [Interval("a", "gw0", 0.0, 4.0, "passed"),
                 *(Interval(f"b{k}", f"gw{k % 2}", 4.0 + k // 2, 5.0 + k // 2, "passed")
                   for k in range(4))]
    page = render_html(intervals, edges=[("a", f"b{k}") for k in range(4)])
    assert ("no schedule beats max(C, W/N) = 5.00 s, nor, as no test starts before its "
            "prerequisites can end, 6.00 s, 1.00x the bound.") in page


def cost_of_one_group(pytester: pytest.Pytester, head: str = "") -> None:
    """A module whose tests form one group (an edge joins them) that also waits
    for a slow test in another module (which states it shares nothing: its
    edge joins nothing); the other worker idles."""
    make_modules(pytester, test_slow="""
        pytestmark = pytest.mark.dag_shares_nothing


        def test_slow():
            mark("slow", 0.6)
    """, test_group=head + """
        SEEN = []  # state the module's tests share: the default affinity groups them


        def test_g0():
            SEEN.append("g0")
            mark("g0", 0.15)


        @depends_on("test_g0")
        def test_g1():
            SEEN.append("g1")
            mark("g1", 0.15)


        @depends_on("test_g0", "test_slow.py::test_slow")
        def test_g2():
            SEEN.append("g2")
            mark("g2", 0.15)


        def test_g3():
            SEEN.append("g3")
            mark("g3", 0.15)


        @depends_on("test_g3", "test_g2")
        def test_g4():
            SEEN.append("g4")
            mark("g4", 0.15)
    """)


def test_the_summary_names_the_groups_that_cost_time(
    pytester: pytest.Pytester, dagtester: DagTester
) -> None:
    cost_of_one_group(pytester)
    result = dagtester.run("-n", "2", timeout=180)
    result.assert_outcomes(passed=6)
    result.stdout.fnmatch_lines([
        "dagorder: affinity groups cost at least * of this * run (no schedule beats *",
        "  on the critical path: the group of test_group.py::test_g0 (5 tests, *)*",
    ])
    quiet = dagtester.run("-n", "2", "--dag-affinity=none", timeout=180)
    assert "affinity groups cost" not in quiet.stdout.str()


def test_the_summary_names_a_group_by_its_xdist_group(
    pytester: pytest.Pytester, dagtester: DagTester
) -> None:
    cost_of_one_group(pytester, head="""
        pytestmark = pytest.mark.xdist_group("ledger")
    """)
    result = dagtester.run("-n", "2", timeout=180)
    result.assert_outcomes(passed=6)
    result.stdout.fnmatch_lines([
        "dagorder: affinity groups cost at least * of this * run (no schedule beats *",
        "  on the critical path: xdist_group 'ledger' (5 tests, *)*",
    ])
