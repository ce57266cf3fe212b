"""Tier 1: the placement policies on their own, driven through the Placement protocol.

The state machine's tests (test_state_machine.py, test_affinity.py) cover them
end to end; these pin what each policy promises the state machine.
"""

from __future__ import annotations

import pytest

from pytest_dagorder.core.graph import Graph
from pytest_dagorder.core.placement import Rank, ReadyQueues, ResourceLimits
from pytest_dagorder.core.state_machine import StateMachine
from pytest_dagorder.core.states import State


def ranks(paths: list[float]) -> list[Rank]:
    return [(-p, i) for i, p in enumerate(paths)]


def test_local_queue_pops_the_most_urgent_release_first() -> None:
    state = [State.READY] * 4
    q = ReadyQueues(ranks([1, 3, 2, 3]), state, locality=True)
    q.worker_added("w")
    q.released([0, 1, 2], "w")
    assert [q.next_for("w") for _ in range(4)] == [1, 2, 0, None]


def test_heap_beats_local_only_with_a_strictly_longer_path() -> None:
    state = [State.READY] * 3
    q = ReadyQueues(ranks([2, 2, 5]), state, locality=True)
    q.worker_added("w")
    q.released([1], None)  # heap, same path as the local entry
    q.released([0], "w")
    assert q.next_for("w") == 0  # a tie keeps locality
    q.released([2], None)
    assert q.next_for("w") == 2
    assert q.next_for("w") == 1


def test_another_workers_queued_task_goes_first_when_its_path_is_strictly_longer() -> None:
    # "a" released a long chain's next test (path 10) and runs something
    # else; "b" has short tests of its own queued and the heap is empty.
    state = [State.READY] * 5
    q = ReadyQueues(ranks([10, 1, 1, 5, 2]), state, locality=True)
    for w in ("a", "b"):
        q.worker_added(w)
    q.released([0], "a")
    q.released([1, 2], "b")
    assert q.next_for("b") == 0
    assert q.next_for("b") == 1  # then its own again
    # With the heap holding something shorter than a's entry (and longer
    # than b's own), a's entry still goes first, then the heap's.
    q.released([3], "a")
    q.released([4], None)
    assert q.next_for("b") == 3
    assert q.next_for("b") == 4
    # A tie keeps locality: b's own entry.
    state2 = [State.READY] * 2
    q2 = ReadyQueues(ranks([1, 1]), state2, locality=True)
    for w in ("a", "b"):
        q2.worker_added(w)
    q2.released([0], "a")
    q2.released([1], "b")
    assert q2.next_for("b") == 1


def test_steals_the_oldest_entry_of_the_longest_queue_first_added_on_ties() -> None:
    state = [State.READY] * 5
    q = ReadyQueues(ranks([1] * 5), state, locality=True)
    for w in ("a", "b", "c"):
        q.worker_added(w)
    q.released([0, 1], "a")
    q.released([2, 3], "b")
    assert q.next_for("c") == 1  # the oldest of "a" (reverse priority: 1 went in first)
    assert q.next_for("c") == 3  # "b" is now the longest


def test_stale_entries_are_dropped_never_returned() -> None:
    state = [State.READY] * 3
    q = ReadyQueues(ranks([3, 2, 1]), state, locality=False)
    q.worker_added("w")
    q.released([0, 1, 2], "w")  # no locality: all on the heap
    state[0] = State.RUNNING  # started elsewhere (a claim)
    state[1] = State.SKIPPED
    assert q.has_ready()
    assert q.next_for("w") == 2
    assert q.next_for("w") is None
    assert not q.has_ready()


def test_worker_removed_moves_its_local_queue_to_the_heap() -> None:
    state = [State.READY] * 2
    q = ReadyQueues(ranks([1, 2]), state, locality=True)
    q.worker_added("a")
    q.worker_added("b")
    q.released([0, 1], "a")
    q.worker_removed("a")
    assert q.ready_for("b")
    assert [q.next_for("b"), q.next_for("b")] == [1, 0]


def test_resource_limits_park_until_a_holder_ends() -> None:
    state = [State.READY] * 3
    inner = ReadyQueues(ranks([3, 2, 1]), state, locality=False)
    limits = ResourceLimits(inner, [["db"], ["db"], []], {"db": 1}, state, 3)
    limits.worker_added("w")
    limits.released([0, 1, 2], None)
    assert limits.next_for("w") == 0
    limits.started(0, "w")
    state[0] = State.RUNNING
    assert limits.next_for("w") == 2  # 1 is parked: it does not idle the worker
    assert limits.has_parked()
    assert not limits.has_ready()  # parked tasks are off the queues
    state[0] = State.PASSED
    limits.ended(0)
    assert not limits.has_parked()
    assert limits.next_for("w") == 1
    limits.validate()
    assert limits.constrained(1) and not limits.constrained(2)


def test_resource_limit_below_one_is_refused() -> None:
    state = [State.READY]
    with pytest.raises(ValueError, match="must be at least 1"):
        ResourceLimits(ReadyQueues(ranks([1]), state, locality=False), None, {"db": 0}, state, 1)


def test_a_group_bound_by_claim_is_never_handed_to_another_worker() -> None:
    # The group's heap entry stays queued when a claim binds it; taking it
    # from elsewhere must drop it, not try to bind the group twice.
    g = Graph.build([("a", []), ("b", ["a"]), ("c", [])])
    s = StateMachine(g, groups=["m", "m", None])
    s.add_worker("w1")
    s.add_worker("w2")
    s.claim(0, "w1")
    assert s.bound_group("w1") == 0
    assert s.take("w2", 5) == [2]
    assert s.bound_group("w2") is None
    s.validate()


def test_a_start_the_placement_refuses_changes_nothing() -> None:
    g = Graph.build([("a", []), ("b", [])])
    s = StateMachine(g, groups=["m", "m"])
    s.add_worker("w1")
    s.add_worker("w2")
    s.claim(0, "w1")
    with pytest.raises(ValueError, match="cannot be bound"):
        s.claim(1, "w2")
    assert s.state[1] is State.READY
    assert "w2" not in s.where.values()
    s.validate()


def test_a_group_is_queued_under_its_first_ready_member() -> None:
    # Free task f (path 2) against group {a (path 1), b (path 3)}: the group
    # waits in the heap under a's rank, the first member released, so f goes first.
    g = Graph.build([("a", []), ("b", []), ("f", [])])
    s = StateMachine(g, groups=["m", "m", None], priority=[1.0, 3.0, 2.0])
    s.add_worker("w")
    assert s.take("w") == [2]
    assert s.take("w", 2) == [1, 0]
    s.validate()
