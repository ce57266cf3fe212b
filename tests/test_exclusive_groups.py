"""Tests that run alone or hold a resource keep their affinity group (core).

A ``dag_exclusive`` or ``dag_resource`` test that belongs to a group runs on
the group's worker (it reads the state its group left in that process),
exclusive ones with nothing else running anywhere, and no mix of groups,
exclusive tasks and limits deadlocks.
"""

from __future__ import annotations

from collections.abc import Hashable

from hypothesis import given, settings
from hypothesis import strategies as st

from pytest_dagorder.core.graph import Graph
from pytest_dagorder.core.state_machine import Setup, State, StateMachine


def chain_graph() -> Graph:
    # setup -> reader (alone) -> after, one module; f1, f2, f3 free.
    return Graph.build([("setup", []), ("reader", ["setup"]), ("after", ["reader"]),
                        ("f1", []), ("f2", []), ("f3", [])])


def test_an_exclusive_member_waits_for_the_drain_then_runs_on_its_groups_worker() -> None:
    graph = chain_graph()
    sched = StateMachine(graph, Setup(exclusive=[False, True, False, False, False, False],
                      groups=["g", "g", "g", None, None, None], locality=False))
    for w in ("w1", "w2", "w3"):
        sched.add_worker(w)
    assert sched.take("w1") == [0]  # setup binds the group to w1
    assert sched.take("w2") == [3]
    assert sched.take("w3") == [4]
    assert 1 in sched.groups[0]
    sched.finished(0, "passed")
    # The reader is w1's, and f1/f2 still run: it is parked, and the run drains.
    assert sched.take("w1") == []
    sched.validate()
    sched.finished(3, "passed")
    assert sched.take("w2") == []  # f3 is ready, but the reader waits for the drain
    sched.finished(4, "passed")
    sched.validate()
    assert sched.take("w2") == [] and sched.take("w3") == []  # not theirs to run
    assert sched.take("w1") == [1]  # nothing runs: the reader, on its group's worker
    assert sched.take("w2") == []  # and nothing beside it
    sched.validate()
    sched.finished(1, "passed")
    assert sched.take("w1") == [2]
    assert sched.take("w2") == [5]
    sched.validate()


def test_the_parked_member_of_a_lost_worker_goes_with_its_group() -> None:
    graph = chain_graph()
    sched = StateMachine(graph, Setup(exclusive=[False, True, False, False, False, False],
                      groups=["g", "g", "g", None, None, None], locality=False))
    for w in ("w1", "w2"):
        sched.add_worker(w)
    assert sched.take("w1") == [0]
    assert sched.take("w2") == [3]
    sched.finished(0, "passed")
    assert sched.take("w1") == []  # parked: f1 runs on w2
    sched.remove_worker("w1")
    sched.validate()
    sched.finished(3, "passed")
    # w2 takes the group afresh, reader first (nothing else runs now).
    assert sched.take("w2") == [1]
    sched.validate()
    sched.finished(1, "passed")
    assert sched.take("w2") == [2]


def test_the_group_worker_may_hold_the_members_behind_its_exclusive_task() -> None:
    graph = chain_graph()
    sched = StateMachine(graph, Setup(exclusive=[False, True, False, False, False, False],
                      groups=["g", "g", "g", None, None, None]))
    for w in ("w1", "w2"):
        sched.add_worker(w)
    assert sched.take("w1", ahead=True) == [0]
    sched.finished(0, "passed")
    assert sched.take("w1", 3, ahead=True) == [1, 2]  # 'after' held behind it
    assert sched.take("w2") == []  # the reader runs alone
    sched.validate()
    sched.finished(1, "passed")
    sched.finished(2, "passed")
    assert sched.take("w2") == [3]
    sched.validate()


def test_a_limited_member_runs_on_its_groups_worker_once_the_resource_is_free() -> None:
    graph = Graph.build([("setup", []), ("reader", ["setup"]), ("after", ["reader"]),
                         ("other", [])])
    sched = StateMachine(graph, Setup(resources=[(), ("db",), (), ("db",)],
                      groups=["g", "g", "g", None], locality=False))
    for w in ("w1", "w2"):
        sched.add_worker(w)
    assert sched.take("w1") == [0]  # binds the group
    assert sched.take("w2") == [3]  # holds db
    sched.finished(0, "passed")
    assert sched.take("w1") == []  # db is held
    assert sched.take("w2") == []  # the group's member is not w2's
    sched.finished(3, "passed")
    assert sched.take("w2") == []
    assert sched.take("w1") == [1]
    sched.validate()


GROUP_LABELS = st.sampled_from([None, "a", "b"])
RESOURCE_SETS = st.sampled_from([(), (), ("db",)])


@st.composite
def runs(draw: st.DrawFn) -> tuple[list[list[int]], list[str | None], list[bool],
                                   list[tuple[str, ...]], list[int]]:
    n = draw(st.integers(1, 12))
    requires = [sorted(set(draw(st.lists(st.integers(0, i - 1), max_size=2)))) if i else []
                for i in range(n)]
    groups = draw(st.lists(GROUP_LABELS, min_size=n, max_size=n))
    alone = draw(st.lists(st.booleans(), min_size=n, max_size=n))
    resources = draw(st.lists(RESOURCE_SETS, min_size=n, max_size=n))
    # A step acts by its value modulo 6 (worker, take or run, how many): 200
    # bytes are one draw, where 200 integers were 200 (a run uses a few dozen).
    steps = list(draw(st.binary(min_size=200, max_size=200)))
    return requires, groups, alone, resources, steps


@settings(max_examples=300, deadline=None)
@given(runs(), st.booleans(), st.booleans())
def test_groups_exclusive_and_limits_never_deadlock_and_keep_their_promises(
        case: tuple[list[list[int]], list[str | None], list[bool],
                    list[tuple[str, ...]], list[int]],
        ahead: bool, next_group: bool) -> None:
    requires, groups, alone, resources, steps = case
    n = len(requires)
    graph = Graph.build([(i, [p for p in requires[i]]) for i in range(n)])
    sched = StateMachine(graph, Setup(exclusive=alone, groups=groups, resources=resources))
    workers: list[Hashable] = ["w1", "w2", "w3"]
    for w in workers:
        sched.add_worker(w)
    queue: dict[Hashable, list[int]] = {w: [] for w in workers}  # in the order run
    ran_on: dict[int, Hashable] = {}
    pick = iter(steps)
    for _ in range(20 * n + 20):
        if sched.done:
            break
        step = next(pick, 0)
        w = workers[step % 3]
        if step % 2:
            got = sched.take(w, 1 + step % 3, ahead=ahead,
                             next_group=next_group and bool(queue[w]))
            queue[w] += got
        elif queue[w]:
            head = queue[w].pop(0)
            if sched.state[head] is State.RUNNING:
                # What runs now, anywhere: the heads of every worker's queue.
                if alone[head]:
                    others = [queue[v][0] for v in workers if v != w and queue[v]
                              and sched.state[queue[v][0]] is State.RUNNING]
                    assert others == [], (head, others)
                ran_on[head] = w
                sched.finished(head, "passed")
        sched.validate()
        if not any(queue.values()) and not sched.done:
            # Nobody holds anything: some worker must get work now.
            got_any = False
            for v in workers:
                queue[v] += sched.take(v, 1, ahead=ahead)
                got_any = got_any or bool(queue[v])
            assert got_any, "deadlock: nothing runs and nobody gets work"
    # Drain.
    for _ in range(10 * n + 10):
        if sched.done:
            break
        for w in workers:
            if not queue[w]:
                queue[w] += sched.take(w, 1, ahead=ahead)
            if queue[w]:
                head = queue[w].pop(0)
                if sched.state[head] is State.RUNNING:
                    ran_on[head] = w
                    sched.finished(head, "passed")
            sched.validate()
    assert sched.done, "the run did not end"
    for gid, members in enumerate(sched.groups):
        places = {ran_on[m] for m in members if m in ran_on}
        assert len(places) <= 1, (gid, places)
    if sum(map(len, sched.groups)) == sum(g is not None for g in groups):
        # No group was dissolved (a cycle between groups): each label is one group.
        for label in ("a", "b"):
            places = {ran_on[i] for i in range(n) if groups[i] == label and i in ran_on}
            assert len(places) <= 1, (label, places)
