"""Tier 1: the placement policies on their own, driven through the Placement protocol.

The state machine's tests (test_state_machine.py, test_affinity.py) cover them
end to end; these pin what each policy promises the state machine.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pytest_dagorder.core.graph import Graph
from pytest_dagorder.core.placement import Rank, ReadyQueues, ResourceLimits
from pytest_dagorder.core.state_machine import Setup, StateMachine
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
    s = StateMachine(g, Setup(groups=["m", "m", None]))
    s.add_worker("w1")
    s.add_worker("w2")
    s.claim(0, "w1")
    assert s.bound_group("w1") == 0
    assert s.take("w2", 5) == [2]
    assert s.bound_group("w2") is None
    s.validate()


def test_a_start_the_placement_refuses_changes_nothing() -> None:
    g = Graph.build([("a", []), ("b", [])])
    s = StateMachine(g, Setup(groups=["m", "m"]))
    s.add_worker("w1")
    s.add_worker("w2")
    s.claim(0, "w1")
    with pytest.raises(ValueError, match="cannot be bound"):
        s.claim(1, "w2")
    assert s.state[1] is State.READY
    assert "w2" not in s.where.values()
    s.validate()


def test_a_group_is_queued_under_its_most_urgent_member_and_runs_in_serial_order() -> None:
    # Free task f (path 2) against group {a (path 1), b (path 3)}: the group
    # waits in the heap under b's rank, its most urgent member, so it goes
    # first; inside it a goes before b (serial order), whatever their ranks.
    g = Graph.build([("a", []), ("b", []), ("f", [])])
    s = StateMachine(g, Setup(groups=["m", "m", None], priority=[1.0, 3.0, 2.0]))
    s.add_worker("w")
    assert s.take("w", 2) == [0, 1]
    s.validate()
    assert s.take("w") == []  # bound to its group until its tests ended
    s.finished(0, "passed")
    s.finished(1, "passed")
    assert s.take("w") == [2]
    s.validate()


# -- module runs: a worker keeps each module's tests in one stretch ---------------------


def simulate_modules(durations: list[float], modules: list[str], keeps: list[bool],
                     requires: list[list[int]], workers: int = 2,
                     **kwargs: object) -> tuple[dict[str, list[int]], StateMachine]:
    """Run the tasks on ``workers`` simulated workers, one task at a time each,
    in simulated time: per worker, the tasks it ran in order."""
    graph = Graph.of_positions(requires, durations=dict(enumerate(durations)))
    m = StateMachine(graph, Setup(modules=modules, module_fixtures=keeps, **kwargs))  # type: ignore[arg-type]
    names = [f"w{k}" for k in range(workers)]
    for w in names:
        m.add_worker(w)
    ran: dict[str, list[int]] = {w: [] for w in names}
    busy: dict[str, tuple[float, int]] = {}
    now = 0.0
    while not m.done:
        for w in names:  # idle workers ask, in a fixed order
            if w not in busy:
                got = m.take(w)
                if got:
                    busy[w] = (now + durations[got[0]], got[0])
                    ran[w].append(got[0])
        m.validate()
        assert busy, "nothing runs although tasks remain"
        w = min(busy, key=lambda k: (busy[k][0], k))
        now, task = busy.pop(w)
        m.finished(task, "passed")
    return ran, m


def stretches(ran: list[int], modules: list[str]) -> list[str]:
    """The modules of ``ran``, one entry per stretch of consecutive tasks."""
    out: list[str] = []
    for i in ran:
        if not out or out[-1] != modules[i]:
            out.append(modules[i])
    return out


def test_a_worker_keeps_each_modules_tests_in_one_stretch() -> None:
    # Recorded durations interleave the modules in priority order (a long
    # test of each module, then the short ones): taken one by one, longest
    # first, a worker went back to a module it had left.
    durations = [0.30, 0.01, 0.20, 0.05, 0.25, 0.15, 0.05, 0.12, 0.10, 0.10]
    modules = ["a", "a", "a", "b", "b", "c", "c", "c", "d", "d"]
    keeps = [True] * 8 + [False] * 2  # d uses no module fixture
    ran, m = simulate_modules(durations, modules, keeps, [[] for _ in durations])
    for w, tasks in ran.items():
        mods = stretches(tasks, modules)
        kept = [x for x in mods if x != "d"]
        assert len(kept) == len(set(kept)), f"{w} came back to a module: {mods}"
    assert m.runs is not None and m.runs.returns == []
    assert sorted(i for tasks in ran.values() for i in tasks) == list(range(10))


def test_inside_a_module_a_worker_runs_its_ready_tests_in_the_run_order() -> None:
    # Priority picks the module (a1 has the longest path: a dependent in b),
    # but the worker starts the module where serial pytest would, at a0, so
    # a1 is the module's last test there (its fixtures' teardown reports on
    # it, and b0 runs after that).
    durations = [0.1, 0.1, 0.1]
    modules = ["a", "a", "b"]
    ran, _ = simulate_modules(durations, modules, [True] * 3, [[], [], [1]], workers=1)
    assert ran["w0"] == [0, 1, 2]


def test_without_module_facts_the_longest_first_order_interleaves_modules() -> None:
    # The same run without the facts: what the rule changes.
    durations = [0.30, 0.01, 0.20, 0.05, 0.25, 0.15, 0.05, 0.12]
    modules = ["a", "a", "a", "b", "b", "c", "c", "c"]
    ran, _ = simulate_modules(durations, modules, [False] * 8, [[] for _ in durations])
    assert any(len(stretches(t, modules)) > len(set(stretches(t, modules))) for t in ran.values())


def test_a_module_every_worker_left_is_taken_by_the_first_to_ask() -> None:
    # b1 waits on a chain through c: a worker must come back to b (or wait forever).
    #   b0 -> c0 -> b1, both workers run a b test before c0 ends.
    durations = [0.1, 0.1, 0.3, 0.1, 0.1]
    modules = ["b", "b", "c", "b", "a"]
    requires: list[list[int]] = [[], [], [0], [2], []]
    ran, m = simulate_modules(durations, modules, [True] * 5, requires)
    assert sorted(i for tasks in ran.values() for i in tasks) == list(range(5))
    assert m.runs is not None and m.runs.returns  # the return is counted


def test_forced_returns_names_modules_the_edges_split() -> None:
    from pytest_dagorder.core.module_runs import forced_returns

    # 0,1: module 0; 2: module 1; 3: module 0.  0 -> 2 -> 3 splits module 0.
    g = Graph.of_positions([[], [], [0], [2]])
    assert forced_returns(g, [0, 0, 1, 0], [True, True, True, True]) == [0]
    # The test that comes back keeps nothing: no fixture is set up again.
    assert forced_returns(g, [0, 0, 1, 0], [True, True, True, False]) == []
    # An edge within the module and one out of it: nothing comes back.
    g2 = Graph.of_positions([[], [0], [1]])
    assert forced_returns(g2, [0, 0, 1], [True, True, True]) == []
    # Out through a test that keeps nothing, back through another module.
    g3 = Graph.of_positions([[], [0], [1], [2]])
    assert forced_returns(g3, [0, 0, 1, 0], [True, False, False, True]) == [0]


def test_a_return_names_its_module() -> None:
    durations = [0.1, 0.1, 0.3, 0.1, 0.1]
    modules = ["b", "b", "c", "b", "a"]
    _, m = simulate_modules(durations, modules, [True] * 5, [[], [], [0], [2], []])
    assert m.runs is not None
    assert [m.runs.names[k] for k in m.runs.returns] == ["b"]


@pytest.mark.parametrize("ahead", [False, True])
def test_a_group_spanning_modules_runs_module_by_module(ahead: bool) -> None:
    # One group over modules a and b (an xdist_group); durations rank
    # a1, b2, a3, b1, a2 first: taken in rank order the worker went a, b, a, b, a.
    durations = [0.30, 0.01, 0.20, 0.05, 0.25, 0.1]
    modules = ["a", "a", "a", "b", "b", "c"]
    requires: list[list[int]] = [[], [0], [], [], [], []] if ahead else [[]] * 6
    graph = Graph.of_positions(requires, durations=dict(enumerate(durations)))
    m = StateMachine(graph, Setup(groups=["g"] * 5 + [None], modules=modules,
                     module_fixtures=[True] * 6))
    m.add_worker("w")
    order: list[int] = []
    while not m.done:
        got = m.take("w", 10, ahead=ahead)
        assert got
        order += got
        for t in got:
            m.finished(t, "passed")
        m.validate()
    assert stretches(order, modules) in (["a", "b", "c"], ["b", "a", "c"], ["c", "a", "b"],
                                         ["c", "b", "a"])


def test_an_idle_worker_comes_back_only_when_the_others_are_busy() -> None:
    # Module a: a0, and a1 which waits on c0 (module c); module b: b0, b1.
    # w0 runs a0 then b0 (leaving a) while w1 runs c0.
    graph = Graph.of_positions([[], [2], [], [], []])
    modules = ["a", "a", "c", "b", "b"]
    m = StateMachine(graph, Setup(modules=modules, module_fixtures=[True] * 5))
    m.add_worker("w0")
    m.add_worker("w1")
    m.claim(0, "w0")  # w0 enters a
    m.claim(2, "w1")  # w1 runs c0, on which a1 waits
    m.finished(0, "passed")
    m.claim(3, "w0")  # w0 leaves a for b
    m.finished(3, "passed")
    m.finished(2, "passed")  # a1 ready; w1 has never held a
    # w0 is idle but w1, which has not left a, is idle too: a1 is w1's.
    assert m.take("w0") == [4]  # b's other test, not a1
    assert m.take("w0") == []
    assert m.take("w1") == [1]
    assert m.runs is not None and m.runs.returns == []


def test_an_idle_worker_comes_back_rather_than_wait_for_a_busy_one() -> None:
    graph = Graph.of_positions([[], [2], [], [], []])
    modules = ["a", "a", "c", "b", "b"]
    m = StateMachine(graph, Setup(modules=modules, module_fixtures=[True] * 5))
    m.add_worker("w0")
    m.add_worker("w1")
    m.claim(0, "w0")
    m.claim(2, "w1")
    m.finished(0, "passed")
    m.claim(3, "w0")
    m.finished(3, "passed")
    m.finished(2, "passed")  # a1 ready
    m.claim(4, "w1")  # w1 is busy
    assert m.take("w0") == [1]  # back to a: counted
    assert m.runs is not None and [m.runs.names[k] for k in m.runs.returns] == ["a"]


def test_a_batch_stops_before_leaving_a_module_whose_next_test_waits_on_it() -> None:
    graph = Graph.of_positions([[], [0], [], []])
    modules = ["a", "a", "b", "b"]
    m = StateMachine(graph, Setup(modules=modules, module_fixtures=[True] * 4))
    m.add_worker("w")
    order: list[int] = []
    while not m.done:
        got = m.take("w", 10)
        assert got
        order += got
        for t in got:
            m.finished(t, "passed")
    assert order == [0, 1, 2, 3]
    assert m.runs is not None and m.runs.returns == []


@pytest.mark.parametrize("seed", range(40))
def test_module_runs_never_stall_a_run(seed: int) -> None:
    """Random graphs, modules, groups, limits, exclusive tests, batches and
    hand-outs ahead: every task ends, the invariants hold after every event."""
    import random

    rng = random.Random(seed)
    n = rng.randint(2, 30)
    requires = [sorted({rng.randrange(i) for _ in range(rng.randint(0, 2))})
                 if i and rng.random() < 0.5 else [] for i in range(n)]
    graph = Graph.of_positions(requires, durations={
        i: rng.choice([0.01, 0.1, 0.3, 1.0]) for i in range(n)})
    m = StateMachine(
        graph, Setup(modules=[f"m{rng.randrange(4)}" for _ in range(n)],
        module_fixtures=[rng.random() < 0.7 for _ in range(n)],
        groups=[rng.choice([None, None, "g1", "g2"]) for _ in range(n)] if seed % 2 else None,
        resources=[["r"] if rng.random() < 0.1 else [] for _ in range(n)] if seed % 3 else None,
        exclusive=[rng.random() < 0.05 for _ in range(n)] if seed % 5 == 0 else None))
    workers = [f"w{k}" for k in range(rng.randint(1, 3))]
    for w in workers:
        m.add_worker(w)
    held: dict[str, list[int]] = {w: [] for w in workers}
    batch = rng.choice([1, 3])
    for _ in range(10 * n + 10):
        if m.done:
            break
        for w in workers:
            if len(held[w]) < batch:
                held[w] += m.take(w, batch - len(held[w]), ahead=seed % 4 == 0)
            if seed % 4 == 0 and len(held[w]) == 1:
                held[w] += m.ahead(w)
        m.validate()
        busy = [w for w in workers if held[w]]
        assert busy, "nothing runs although tasks remain"
        w = rng.choice(busy)
        task = held[w].pop(0)
        m.finished(task, "passed" if rng.random() < 0.9 else "failed")
        for skip in m.pop_skipped():
            for tasks in held.values():
                if skip.task in tasks:
                    tasks.remove(skip.task)
    assert m.done


# -- serial order inside a group, and fences -------------------------------------------


GROUP_LABELS = st.sampled_from([None, None, "G", "H"])


@st.composite
def ordered_runs(draw: st.DrawFn) -> tuple[list[list[int]], list[str | None], list[float]]:
    """A graph whose edges lead back (a plan's), groups, and priorities."""
    n = draw(st.integers(1, 14))
    requires = [draw(st.lists(st.integers(0, i - 1), max_size=2, unique=True)) if i else []
                for i in range(n)]
    groups = draw(st.lists(GROUP_LABELS, min_size=n, max_size=n))
    priority = [float(k) for k in draw(st.lists(st.integers(0, 9), min_size=n, max_size=n))]
    return requires, groups, priority


# What a worker asks for (a batch, next_group, how many ahead), one draw: each
# ``data.draw`` costs more than what it draws, and a strategy is built once.
TAKES = st.tuples(st.integers(1, 3), st.booleans(), st.integers(1, 2))
OUTCOMES = st.sampled_from(["passed"] * 5 + ["failed"])


def drive(machine: StateMachine, workers: int, data: st.DataObject, *,
          ahead: bool = False) -> list[int]:
    """Run ``machine`` to its end with ``workers`` workers that take batches ahead
    and finish what they hold in order, mostly passing: the tasks in the order
    they were handed out.  ``ahead``: each also holds what ``machine.ahead`` gives."""
    names = [f"w{k}" for k in range(workers)]
    for w in names:
        machine.add_worker(w)
    held: dict[str, list[int]] = {w: [] for w in names}
    handed: list[int] = []
    for _ in range(20 * len(machine.state) + 20):
        if machine.done:
            break
        for w in names:
            limit, next_group, more = data.draw(TAKES)
            got = machine.take(w, limit, ahead=True, next_group=next_group)
            if ahead:
                got += machine.ahead(w, more)
            held[w] += got
            handed += got
        machine.validate()
        busy = [w for w in names if held[w]]
        assert busy, "nothing runs although tasks remain"
        w = busy[data.draw(st.integers(0, len(busy) - 1))]
        task = held[w].pop(0)
        if not machine.state[task].terminal:
            machine.finished(task, data.draw(OUTCOMES))
        machine.pop_skipped()
        machine.validate()
    assert machine.done
    return handed


@settings(max_examples=100, deadline=None)
@given(case=ordered_runs(), workers=st.integers(1, 3), data=st.data())
def test_a_group_hands_out_its_tests_in_serial_order_whatever_their_priority(
        case: tuple[list[list[int]], list[str | None], list[float]], workers: int,
        data: st.DataObject) -> None:
    requires, groups, priority = case
    machine = StateMachine(Graph.of_positions(requires), Setup(groups=groups, priority=priority))
    handed = drive(machine, workers, data)
    for members in machine.groups:
        mine = [i for i in handed if i in members]
        assert mine == sorted(mine), (members, handed)


@settings(max_examples=100, deadline=None)
@given(case=ordered_runs(), workers=st.integers(1, 3), data=st.data())
def test_a_fenced_test_is_handed_out_after_every_test_before_the_fence(
        case: tuple[list[list[int]], list[str | None], list[float]], workers: int,
        data: st.DataObject) -> None:
    requires, _, priority = case
    n = len(requires)
    fences = sorted(data.draw(st.sets(st.integers(1, max(1, n - 1)), max_size=2)))
    # Tasks evidence freed wait at no fence, and still hold the tasks after them.
    free = data.draw(st.sets(st.integers(0, n - 1), max_size=2))
    machine = StateMachine(Graph.of_positions(requires), Setup(priority=priority,
                           fences=fences, unfenced=sorted(free), on_failure="skip"))
    handed = drive(machine, workers, data, ahead=data.draw(st.booleans()))
    at = {task: k for k, task in enumerate(handed)}
    for f in fences:
        before = [at[i] for i in range(f) if i in at]
        after = [at[i] for i in range(f, n) if i in at and i not in free]
        if before and after:
            assert max(before) < min(after), (f, handed)


def test_a_test_fenced_last_waits_for_every_other_to_be_handed_out() -> None:
    # z is the most urgent, ready from the start, and fenced at its place:
    # it goes only once a and b went (started, not ended).
    graph = Graph.of_positions([[], [], []])
    machine = StateMachine(graph, Setup(priority=[1.0, 2.0, 9.0], fences=[2], locality=False))
    machine.add_worker("w1")
    machine.add_worker("w2")
    assert machine.take("w1") == [1]
    assert machine.take("w2") == [0]
    assert machine.take("w1") == [2]
    machine.validate()


def test_a_test_no_fence_holds_goes_at_once_and_still_holds_the_tests_after_it() -> None:
    # As above, with z freed by evidence: it goes first, the most urgent;
    # c, fenced behind z's stretch, waits until a, b and z all went.
    graph = Graph.of_positions([[], [], [], []])
    machine = StateMachine(graph, Setup(priority=[1.0, 2.0, 9.0, 5.0], fences=[2, 3],
                                        unfenced=[2], locality=False))
    machine.add_worker("w1")
    machine.add_worker("w2")
    assert machine.take("w1") == [2]
    assert machine.take("w2") == [1]
    machine.validate()
    assert machine.finished(1, "passed")
    assert machine.take("w2") == [0]
    assert machine.finished(0, "passed")
    assert machine.take("w2") == [3]
    machine.validate()


def test_a_ready_test_behind_a_fence_does_not_keep_the_next_test_from_being_held() -> None:
    # Every test has an ordinal (a fence after each): a, then b (needs a),
    # then x (free, ready, fenced behind b).  x keeps nothing back: b is held
    # behind a on w1, which opens the fence, and x goes to w2 at once, not
    # once a ended.
    graph = Graph.of_positions([[], [0], []])
    machine = StateMachine(graph, Setup(fences=[1, 2], on_failure="skip"))
    machine.add_worker("w1")
    machine.add_worker("w2")
    assert machine.take("w1") == [0]
    assert machine.take("w2") == []  # x waits at the fence
    assert machine.ahead("w1") == [1]
    assert machine.take("w2") == [2]
    machine.validate()
    assert machine.finished(0, "passed") and machine.finished(1, "passed")
    assert machine.finished(2, "passed") and machine.done
