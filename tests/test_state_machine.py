"""Tier 1: the scheduler state machine, table-driven and property-based.

Every event goes through :class:`Driver`, which calls ``validate()`` after it,
so each test also checks the invariants at every step.
"""

from __future__ import annotations

import textwrap
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TypeVar

import pytest
from helpers import outputs_under_hash_seeds
from hypothesis import given, settings
from hypothesis import strategies as st

from pytest_dagorder.core.graph import Graph
from pytest_dagorder.core.state_machine import (
    OUTCOMES,
    FailurePolicy,
    Setup,
    Skip,
    State,
    StateMachine,
)

# ---------------------------------------------------------------- the driver


def graph_of(spec: Mapping[str, str], after: Mapping[str, str] | None = None,
             durations: Mapping[str, float] | None = None) -> Graph:
    """``{"b": "a c"}``: task b requires a and c; tasks appear in key order."""
    return Graph.build(
        [(t, deps.split()) for t, deps in spec.items()],
        after={t: deps.split() for t, deps in (after or {}).items()},
        durations={t: float(d) for t, d in (durations or {}).items()},
    )


def running_on(sched: StateMachine, worker: Hashable) -> list[int]:
    """The tasks running on ``worker``, read from ``where`` as the drivers read it."""
    return sorted(t for t, w in sched.where.items() if w == worker)


def group_of(sched: StateMachine) -> dict[int, int]:
    """Task -> its group's index in ``sched.groups`` (what the drivers report); free
    tasks are absent."""
    return {t: gid for gid, members in enumerate(sched.groups) for t in members}


class Driver:
    """Names in, names out; ``validate()`` after every event."""

    def __init__(
        self,
        spec: Mapping[str, str],
        *,
        after: Mapping[str, str] | None = None,
        durations: Mapping[str, float] | None = None,
        on_failure: FailurePolicy = "skip",
        resources: Mapping[str, str] | None = None,
        limits: Mapping[str, int] | None = None,
        groups: Mapping[str, str] | None = None,
        workers: Sequence[Hashable] = (),
    ) -> None:
        self.graph = graph_of(spec, after, durations)
        ids = [str(t) for t in self.graph.ids]
        self.sched = StateMachine(
            self.graph,
            Setup(on_failure=on_failure,
            resources=[(resources or {}).get(t, "").split() for t in ids]
            if resources else None,
            limits=limits,
            groups=[(groups or {}).get(t) for t in ids] if groups else None),
        )
        self.log: list[tuple[Hashable, str]] = []  # (worker, task) per dispatch
        self.check()
        for w in workers:
            self.add(w)

    def check(self) -> None:
        self.sched.validate()

    def i(self, name: str) -> int:
        return self.graph.index[name]

    def names(self, tasks: Sequence[int]) -> list[str]:
        return [str(self.graph.ids[i]) for i in tasks]

    def add(self, *workers: Hashable) -> None:
        for w in workers:
            self.sched.add_worker(w)
            self.check()

    def take(self, worker: Hashable, limit: int = 1) -> list[str]:
        got = self.names(self.sched.take(worker, limit))
        self.log.extend((worker, t) for t in got)
        self.check()
        return got

    def claim(self, name: str, worker: Hashable) -> None:
        self.sched.claim(self.i(name), worker)
        self.log.append((worker, name))
        self.check()

    def finish(self, name: str, outcome: str = "passed") -> bool:
        ok = self.sched.finished(self.i(name), outcome)
        self.check()
        return ok

    def remove(self, worker: Hashable) -> list[str]:
        back = self.names(self.sched.remove_worker(worker))
        self.check()
        return back

    def stop(self, reason: str = "run stopped") -> list[str]:
        got = self.names(self.sched.stop(reason))
        self.check()
        return got

    def state(self, name: str) -> State:
        return self.sched.state[self.i(name)]

    def reasons(self) -> dict[str, str]:
        out = {}
        for i, s in enumerate(self.sched.state):
            if s is State.SKIPPED:
                r = self.sched.reason(i)
                assert r is not None
                out[str(self.graph.ids[i])] = r
        return out

    def popped(self) -> list[tuple[str, str]]:
        return [(self.names([s.task])[0], s.reason) for s in self.sched.pop_skipped()]

    def run(self, outcomes: Mapping[str, str] | None = None,
            workers: Sequence[Hashable] = ("w",)) -> list[str]:
        """Run to the end one task at a time, always finishing the oldest running one."""
        for w in workers:
            if w not in self.sched._workers:
                self.add(w)
        order: list[str] = []
        running: list[str] = []
        while not self.sched.done:
            for w in workers:
                if not running_on(self.sched, w):
                    got = self.take(w)
                    order.extend(got)
                    running.extend(got)
            assert running, "stuck: nothing running, run not done"
            t = running.pop(0)
            self.finish(t, (outcomes or {}).get(t, "passed"))
        return order


# ---------------------------------------------------------------- shapes


def test_chain_dispatches_one_at_a_time() -> None:
    d = Driver({"a": "", "b": "a", "c": "b"}, workers=["w1", "w2"])
    assert d.take("w1", 5) == ["a"]
    assert d.take("w2", 5) == []
    assert d.state("b") is State.WAITING
    assert d.sched.ready_count == 0
    assert d.finish("a")
    assert d.state("b") is State.READY
    assert d.take("w2", 5) == ["b"]  # stolen from w1's queue: never level by level
    assert d.finish("b")
    assert d.take("w1") == ["c"]
    assert not d.sched.done
    assert d.finish("c")
    assert d.sched.done
    assert d.sched.outcome == ["passed"] * 3


def test_diamond_join_after_both_parents() -> None:
    d = Driver({"a": "", "b": "a", "c": "a", "d": "b c"}, workers=["w1", "w2"])
    assert d.take("w1") == ["a"]
    d.finish("a")
    # b and c join w1's queue; w1 gets the more urgent (lower index) one,
    # the idle w2 steals the other.
    assert d.take("w1") == ["b"]
    assert d.take("w2") == ["c"]
    d.finish("c")
    assert d.state("d") is State.WAITING
    assert d.take("w2") == []
    d.finish("b")
    assert d.take("w2") == ["d"]
    d.finish("d")
    assert d.sched.done


def test_wide_fan_out_fan_in() -> None:
    mids = [f"m{k}" for k in range(20)]
    spec = {"root": "", **{m: "root" for m in mids}, "sink": " ".join(mids)}
    d = Driver(spec, workers=["w1", "w2", "w3"])
    assert d.take("w1", 100) == ["root"]
    d.finish("root")
    assert d.sched.ready_count == 20
    got = d.take("w2", 7) + d.take("w3", 7) + d.take("w1", 100)
    assert sorted(got) == sorted(mids)
    assert len(set(got)) == 20
    for m in mids[:-1]:
        d.finish(m)
        assert d.state("sink") is State.WAITING
    d.finish(mids[-1])
    assert d.take("w3") == ["sink"]


def test_serial_run_keeps_collection_order_when_free() -> None:
    d = Driver({"a": "", "b": "", "c": "a", "d": ""})
    order = d.run()
    # Longest remaining path first: a heads a chain of two.
    assert order == ["a", "c", "b", "d"]


def test_priority_longest_critical_path_first() -> None:
    d = Driver({"short": "", "long": "", "tail": "long"},
               durations={"short": 1.0, "long": 1.0, "tail": 10.0}, workers=["w"])
    assert d.take("w") == ["long"]


def test_explicit_priority_overrides_the_critical_path() -> None:
    g = graph_of({"a": "", "b": "", "c": ""})
    s = StateMachine(g, Setup(priority=[1.0, 3.0, 2.0]))
    s.add_worker("w")
    assert s.take("w", 3) == [1, 2, 0]
    s.validate()


def test_take_limit_and_released_order() -> None:
    d = Driver({"a": "", "b": "", "x": "a", "y": "a", "z": "a"}, workers=["w"])
    assert d.take("w", 2) == ["a", "b"]
    d.finish("a")
    assert d.take("w", 10) == ["x", "y", "z"]


# ---------------------------------------------------------------- failure policies

OUTCOME_PHRASES = [
    ("failed", "failed"),
    ("error", "had an error"),
    ("skipped", "was skipped"),
    ("xfailed", "xfailed"),
    ("crashed", "crashed its worker"),
    ("deselected", "was deselected"),
    ("not run", "did not run"),
]


@pytest.mark.parametrize(("outcome", "phrase"), OUTCOME_PHRASES)
def test_skip_policy_reasons(outcome: str, phrase: str) -> None:
    d = Driver({"a": "", "b": "a", "c": "b", "d": "a c", "e": ""}, workers=["w"])
    assert d.take("w") == ["a"]
    assert d.finish("a", outcome)
    assert d.reasons() == {
        "b": f"prerequisite a {phrase}",
        "c": f"prerequisite b was skipped: a {phrase}",
        "d": f"prerequisite a {phrase}",
    }
    skips = {d.names([s.task])[0]: s for s in d.sched.pop_skipped()}
    assert skips["b"] == Skip(1, f"prerequisite a {phrase}", 0, 0, outcome)
    assert skips["c"] == Skip(2, f"prerequisite b was skipped: a {phrase}", 1, 0, outcome)
    assert d.sched.pop_skipped() == []
    assert d.sched.outcome[d.i("b")] == "skipped"
    assert d.take("w") == ["e"]
    d.finish("e")
    assert d.sched.done


def test_skip_policy_grandchild_reason_names_direct_prerequisite_and_root() -> None:
    d = Driver({"create_user": "", "login": "create_user", "checkout": "login"})
    d.run({"create_user": "failed"})
    assert d.reasons()["checkout"] == "prerequisite login was skipped: create_user failed"


def test_a_cause_given_with_the_outcome_is_named_down_the_chain() -> None:
    # A driver's short text of what ended a test (a failure's first line).
    d = Driver({"a": "", "b": "a", "c": "b", "x": "", "y": "x"}, workers=["w"])
    d.take("w")
    assert d.sched.finished(d.i("a"), "failed", "KeyError: 'ann'")
    d.take("w")
    d.finish("x", "crashed")
    assert d.reasons() == {
        "b": "prerequisite a failed (KeyError: 'ann')",
        "c": "prerequisite b was skipped: a failed (KeyError: 'ann')",
        "y": "prerequisite x crashed its worker",
    }
    assert d.sched.skips[d.i("c")].root_cause == "KeyError: 'ann'"


def test_skip_decisions_popped_in_order() -> None:
    d = Driver({"a": "", "b": "a", "c": "b"}, workers=["w"])
    d.take("w")
    d.finish("a", "failed")
    assert d.popped() == [
        ("b", "prerequisite a failed"),
        ("c", "prerequisite b was skipped: a failed"),
    ]


def test_stop_policy() -> None:
    d = Driver({"a": "", "b": "a", "c": "b", "x": "", "y": "x", "r": ""},
               on_failure="stop", workers=["w1", "w2"])
    assert d.take("w1") == ["a"]
    assert d.take("w2") == ["x"]
    d.finish("a", "failed")
    assert d.sched.stopped == "run stopped after a failed"
    assert d.reasons() == {
        "b": "prerequisite a failed",
        "c": "prerequisite b was skipped: a failed",
        "y": "run stopped after a failed",
        "r": "run stopped after a failed",
    }
    skip = d.sched.skips[d.i("r")]
    assert (skip.prerequisite, skip.root, skip.root_outcome) == (None, None, None)
    # The running task is left to finish; nothing new is admitted.
    assert d.state("x") is State.RUNNING
    assert d.take("w1") == []
    assert not d.sched.done
    d.finish("x", "passed")
    assert d.sched.done
    assert d.reasons()["y"] == "run stopped after a failed"


def test_stop_policy_after_a_pass_does_nothing() -> None:
    d = Driver({"a": "", "b": "a"}, on_failure="stop")
    d.run()
    assert d.sched.stopped is None
    assert d.sched.outcome == ["passed", "passed"]


def test_run_policy_runs_dependents_of_failures() -> None:
    d = Driver({"a": "", "b": "a", "c": "b"}, on_failure="run")
    assert d.run({"a": "failed", "b": "error"}) == ["a", "b", "c"]
    assert d.reasons() == {}
    assert d.sched.outcome == ["failed", "error", "passed"]


def test_explicit_stop_skips_every_unstarted_task_with_its_reason() -> None:
    d = Driver({"a": "", "b": "a", "c": "b", "d": ""}, workers=["w"])
    assert d.take("w") == ["a"]
    assert d.stop("cancelled") == ["b", "c", "d"]
    assert d.reasons() == {"b": "cancelled", "c": "cancelled", "d": "cancelled"}
    assert d.take("w") == []
    d.finish("a", "failed")
    assert d.reasons()["b"] == "cancelled"
    assert d.sched.done
    assert d.stop("again") == []


def test_bad_policy_and_limits_rejected() -> None:
    g = graph_of({"a": ""})
    with pytest.raises(ValueError, match="on_failure"):
        StateMachine(g, Setup(on_failure="ignore"))  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="at least 1"):
        StateMachine(g, Setup(limits={"db": 0}))
    with pytest.raises(ValueError, match="groups has 2 entries for 1 tasks"):
        StateMachine(g, Setup(groups=["x", "y"]))


# ---------------------------------------------------------------- after-edges


@pytest.mark.parametrize("outcome", sorted(OUTCOMES))
def test_after_edge_waits_on_any_outcome(outcome: str) -> None:
    d = Driver({"a": "", "cleanup": "", "b": "a"}, after={"cleanup": "a b"}, workers=["w"])
    assert d.take("w", 5) == ["a"]
    assert d.state("cleanup") is State.WAITING
    d.finish("a", outcome)
    if outcome == "passed":
        assert d.take("w") == ["b"]
        assert d.state("cleanup") is State.WAITING
        d.finish("b", "failed")
    else:
        assert d.reasons() == {"b": f"prerequisite a {dict(OUTCOME_PHRASES)[outcome]}"}
    # A skipped "after" prerequisite releases its follower too.
    assert d.take("w") == ["cleanup"]
    d.finish("cleanup")
    assert d.sched.done
    assert "cleanup" not in d.reasons()


def test_after_edge_released_by_a_stop_skip_under_run_policy() -> None:
    d = Driver({"a": "", "b": ""}, after={"b": "a"}, on_failure="run", workers=["w"])
    d.stop("halt")
    assert d.reasons() == {"a": "halt", "b": "halt"}
    assert d.sched.done


# ---------------------------------------------------------------- resources


def test_resource_limit_one_by_default() -> None:
    d = Driver({"d1": "", "d2": "", "d3": ""}, resources={"d1": "db", "d2": "db", "d3": "db"},
               workers=["w1", "w2"])
    assert d.take("w1", 3) == ["d1"]
    assert d.take("w2", 3) == []
    d.finish("d1")
    assert d.take("w2", 3) == ["d2"]


def test_resource_limit_k() -> None:
    d = Driver({f"t{k}": "" for k in range(5)},
               resources={f"t{k}": "gpu" for k in range(5)}, limits={"gpu": 2},
               workers=["w1", "w2", "w3"])
    assert d.take("w1") + d.take("w2") + d.take("w3") == ["t0", "t1"]
    d.finish("t1")
    assert d.take("w3") == ["t2"]


def test_blocked_resource_never_idles_a_worker_while_other_work_is_ready() -> None:
    spec = {"db1": "", "db2": "", "db3": "", "free1": "", "free2": ""}
    d = Driver(spec, resources={"db1": "db", "db2": "db", "db3": "db"},
               durations={"db1": 5.0, "db2": 5.0, "db3": 5.0, "free1": 1, "free2": 1},
               workers=["w1", "w2", "w3"])
    assert d.take("w1") == ["db1"]
    # db2 and db3 come first by priority but their resource is taken:
    # the worker gets the free tasks instead of nothing.
    assert d.take("w2") == ["free1"]
    assert d.take("w3") == ["free2"]
    d.finish("free1")
    assert d.take("w2") == []
    d.finish("db1")
    assert d.take("w2") == ["db2"]
    assert d.take("w3") == []


def test_task_with_two_resources() -> None:
    d = Driver({"ab": "", "a": "", "b": ""}, resources={"ab": "ra rb", "a": "ra", "b": "rb"},
               workers=["w1", "w2", "w3"])
    assert d.take("w1") == ["ab"]
    assert d.take("w2") == []
    d.finish("ab")
    assert d.take("w2") + d.take("w3") == ["a", "b"]


def test_resource_released_by_a_removed_worker() -> None:
    d = Driver({"d1": "", "d2": ""}, resources={"d1": "db", "d2": "db"}, workers=["w1", "w2"])
    assert d.take("w1") == ["d1"]
    assert d.take("w2") == []
    assert d.remove("w1") == ["d1"]
    assert d.take("w2", 2) == ["d1"]
    d.finish("d1")
    assert d.take("w2") == ["d2"]


# ---------------------------------------------------------------- locality and stealing


def test_released_task_joins_the_completing_workers_queue() -> None:
    d = Driver({"a": "", "b": "", "a1": "a", "b1": "b"}, workers=["w1", "w2"])
    assert d.take("w1") == ["a"]
    assert d.take("w2") == ["b"]
    d.finish("b")  # b1 joins w2's queue
    d.finish("a")  # a1 joins w1's queue
    assert d.take("w1") == ["a1"]
    assert d.take("w2") == ["b1"]


def test_local_queue_is_newest_first() -> None:
    d = Driver({"x": "", "y": "", "x1": "x", "y1": "y"}, workers=["w"])
    assert d.take("w", 2) == ["x", "y"]
    d.finish("x")
    d.finish("y")
    # Depth first: the task released last comes first.
    assert d.take("w") == ["y1"]
    assert d.take("w") == ["x1"]


def test_local_queue_before_global_heap() -> None:
    d = Driver({"a": "", "r1": "", "r2": "", "a1": "a"},
               durations={"a": 1, "a1": 1, "r1": 10, "r2": 10}, workers=["w"])
    assert d.take("w") == ["r1"]
    d.finish("r1")
    assert d.take("w") == ["r2"]
    d.finish("r2")
    assert d.take("w") == ["a"]
    d.finish("a")
    assert d.take("w") == ["a1"]


def test_local_queue_preferred_over_more_urgent_heap_entry() -> None:
    d = Driver({"a": "", "b": "", "a1": "a"}, durations={"a": 1, "a1": 1, "b": 0.5},
               workers=["w"])
    assert d.take("w") == ["a"]
    d.finish("a")
    assert d.take("w") == ["a1"]  # warm fixtures beat the heap
    d.finish("a1")
    assert d.take("w") == ["b"]


def test_idle_worker_steals_oldest_entry_of_longest_queue() -> None:
    spec = {"p": "", "q": "", **{f"p{k}": "p" for k in range(3)}, "q0": "q"}
    d = Driver(spec, workers=["w1", "w2", "w3"])
    assert d.take("w1") == ["p"]
    assert d.take("w2") == ["q"]
    d.finish("p")  # w1's queue: newest first p0, then p1, p2 (oldest = p2)
    d.finish("q")  # w2's queue: q0
    assert d.take("w3") == ["p2"]
    assert d.take("w3") == ["p1"]  # w1 still has the longest queue (2 vs 1)
    assert d.take("w1") == ["p0"]
    assert d.take("w3") == ["q0"]  # w1 empty; the only queue left is w2's
    assert d.take("w2") == []


def test_steal_ties_go_to_the_worker_added_first() -> None:
    d = Driver({"a": "", "b": "", "a1": "a", "b1": "b"}, workers=["w1", "w2", "w3"])
    d.take("w1")
    d.take("w2")
    d.finish("b")
    d.finish("a")
    assert d.take("w3") == ["a1"]


# ---------------------------------------------------------------- worker removal


def test_remove_worker_requeues_running_tasks() -> None:
    d = Driver({"a": "", "b": "", "c": "a"}, workers=["w1", "w2"])
    assert d.take("w1", 2) == ["a", "b"]
    assert d.remove("w1") == ["a", "b"]
    assert d.state("a") is State.READY
    assert d.sched.running == 0
    assert d.take("w2", 5) == ["a", "b"]
    d.finish("a")
    assert d.take("w2") == ["c"]


def test_crash_then_remove_worker() -> None:
    d = Driver({"a": "", "b": "", "c": "a", "e": "c"}, workers=["w1", "w2"])
    assert d.take("w1", 2) == ["a", "b"]
    d.finish("a", "crashed")
    assert d.remove("w1") == ["b"]
    assert d.reasons() == {"c": "prerequisite a crashed its worker",
                           "e": "prerequisite c was skipped: a crashed its worker"}
    d.add("w3")
    assert d.take("w3") == ["b"]
    d.finish("b")
    assert d.sched.done


def test_local_queue_of_removed_worker_goes_back_to_the_heap() -> None:
    d = Driver({"a": "", "a1": "a", "a2": "a"}, workers=["w1"])
    d.take("w1")
    d.finish("a")
    d.remove("w1")
    d.add("w2")
    assert d.take("w2", 5) == ["a1", "a2"]


def test_finished_after_remove_releases_to_the_heap() -> None:
    d = Driver({"a": "", "a1": "a"}, workers=["w1", "w2"])
    d.take("w1")
    d.finish("a")
    assert d.take("w2") == ["a1"]  # stolen


def test_remove_worker_after_stop_skips_what_it_held() -> None:
    d = Driver({"a": "", "b": "", "c": ""}, workers=["w1", "w2"])
    assert d.take("w1", 2) == ["a", "b"]
    d.stop("interrupted")
    assert d.remove("w1") == ["a", "b"]
    assert d.reasons() == {"a": "interrupted", "b": "interrupted", "c": "interrupted"}
    assert d.sched.done


def test_worker_misuse() -> None:
    d = Driver({"a": ""}, workers=["w"])
    with pytest.raises(ValueError, match="already added"):
        d.sched.add_worker("w")
    with pytest.raises(KeyError):
        d.sched.take("nobody")
    with pytest.raises(KeyError):
        d.sched.remove_worker("nobody")
    with pytest.raises(ValueError, match="unknown outcome"):
        d.sched.finished(0, "exploded")


# ---------------------------------------------------------------- stale events


def test_duplicate_and_stale_finished_events() -> None:
    d = Driver({"a": "", "b": "a", "c": "b"}, workers=["w"])
    d.take("w")
    assert d.finish("a", "failed") is True
    assert d.finish("a", "passed") is False
    assert d.sched.outcome[0] == "failed"
    assert d.finish("b", "passed") is False  # already skipped
    assert d.state("b") is State.SKIPPED
    assert d.sched.done


def test_duplicate_pass_does_not_release_twice() -> None:
    d = Driver({"a": "", "b": "", "c": "a b"}, workers=["w"])
    d.take("w", 2)
    assert d.finish("a")
    assert d.finish("a") is False
    assert d.state("c") is State.WAITING
    assert d.finish("b")
    assert d.take("w") == ["c"]


def test_finishing_a_task_that_never_started() -> None:
    d = Driver({"a": "", "b": "a", "c": ""}, workers=["w"])
    assert d.finish("b", "deselected")
    assert d.take("w", 5) == ["a", "c"]
    assert d.finish("b", "passed") is False


def test_claim() -> None:
    d = Driver({"a": "", "b": "", "c": "a"}, workers=["w"])
    d.claim("b", "w")
    with pytest.raises(ValueError, match="c is waiting, not ready"):
        d.claim("c", "w")
    with pytest.raises(ValueError, match="b is running, not ready"):
        d.claim("b", "w")
    assert d.take("w") == ["a"]  # the heap entry for b is stale, dropped


# ---------------------------------------------------------------- groups


def test_bound_worker_gets_only_its_groups_tasks() -> None:
    spec = {"g1": "", "g2": "g1", "g3": "g2", "f1": "", "f2": "", "f3": ""}
    d = Driver(spec, groups={"g1": "G", "g2": "G", "g3": "G"}, workers=["w1", "w2"])
    assert d.sched.groups == [[0, 1, 2]]
    assert d.take("w1", 3) == ["g1"]
    assert d.sched.bound_group("w1") == 0
    assert d.take("w1", 3) == []  # contiguity: waits for its own group
    assert d.take("w2", 1) == ["f1"]
    d.finish("g1")
    assert d.take("w2", 5) == ["f2", "f3"]  # the group's task is not stolen
    assert d.take("w1", 5) == ["g2"]
    d.finish("g2")
    assert d.take("w1", 5) == ["g3"]
    d.finish("g3")
    assert d.sched.bound_group("w1") is None


def test_group_waits_for_outside_prerequisites() -> None:
    d = Driver({"x": "", "g1": "", "g2": "x"}, groups={"g1": "G", "g2": "G"},
               workers=["w1", "w2"])
    assert d.take("w1") == ["x"]
    assert d.state("g1") is State.READY
    assert d.take("w2") == []  # g1 is ready but its group is not startable yet
    d.finish("x")
    assert d.take("w2", 5) == ["g1", "g2"]
    assert d.sched.bound_group("w2") == 0


def test_group_starts_after_outside_prerequisite_failed() -> None:
    d = Driver({"x": "", "g1": "", "g2": "x"}, groups={"g1": "G", "g2": "G"}, workers=["w"])
    assert d.take("w") == ["x"]
    d.finish("x", "failed")
    assert d.reasons() == {"g2": "prerequisite x failed"}
    assert d.take("w") == ["g1"]


def test_failure_in_group_skips_only_its_dependents() -> None:
    spec = {"g1": "", "g2": "g1", "g3": "", "g4": "g3"}
    d = Driver(spec, groups=dict.fromkeys(spec, "G"), workers=["w1", "w2"])
    assert d.take("w1") == ["g1"]
    d.finish("g1", "failed")
    assert d.reasons() == {"g2": "prerequisite g1 failed"}
    assert d.take("w2") == []
    assert d.take("w1") == ["g3"]
    d.finish("g3")
    assert d.take("w1") == ["g4"]
    d.finish("g4")
    assert d.sched.done


def test_groups_spread_over_workers() -> None:
    spec = {"a1": "", "a2": "a1", "b1": "", "b2": "b1"}
    d = Driver(spec, groups={"a1": "A", "a2": "A", "b1": "B", "b2": "B"}, workers=["w1", "w2"])
    assert d.take("w1", 2) == ["a1"]
    assert d.take("w2", 2) == ["b1"]
    assert (d.sched.bound_group("w1"), d.sched.bound_group("w2")) == (0, 1)


def test_group_rebinds_after_its_worker_is_removed() -> None:
    d = Driver({"g1": "", "g2": "g1"}, groups={"g1": "G", "g2": "G"}, workers=["w1", "w2"])
    assert d.take("w1") == ["g1"]
    assert d.remove("w1") == ["g1"]
    assert d.take("w2") == ["g1"]
    assert d.sched.bound_group("w2") == 0


def test_group_members_finished_before_start_do_not_bind_a_worker() -> None:
    # Found while writing these tests: a group whose members all ended while
    # queued ("deselected") used to bind the next worker for good.
    d = Driver({"g1": "", "g2": "", "f": ""}, groups={"g1": "G", "g2": "G"}, workers=["w"])
    d.finish("g1", "deselected")
    d.finish("g2", "deselected")
    assert d.take("w") == ["f"]
    assert d.sched.bound_group("w") is None
    d.finish("f")
    assert d.sched.done


def test_group_on_a_cycle_of_the_group_graph_is_dissolved() -> None:
    # G = {a, c}; the free b sits between them: G -> b -> G.
    spec = {"a": "", "b": "a", "c": "b", "d": "", "e": "d"}
    d = Driver(spec, groups={"a": "G", "c": "G", "d": "H", "e": "H"})
    assert d.sched.groups == [[3, 4]]
    assert 0 not in group_of(d.sched)
    assert group_of(d.sched)[3] == 0
    # After b, group H (d heads a path of two) outranks c (a path of one).
    assert d.run() == ["a", "b", "d", "e", "c"]


def test_only_groups_on_the_cycle_are_dissolved() -> None:
    # G1 and G2 each sit on a cycle through a free task; G3 lies on the path
    # G2 -> G3 -> G1 between them but on no cycle: it survives.
    spec = {"a1": "", "x": "a1", "a2": "x", "m1": "a2", "m2": "m1",
            "b1": "m2", "y": "b1", "b2": "y"}
    groups = {"a1": "G1", "a2": "G1", "m1": "G3", "m2": "G3", "b1": "G2", "b2": "G2"}
    d = Driver(spec, groups=groups)
    assert d.sched.groups == [[3, 4]]
    d.run()
    assert d.sched.done


def test_group_cycle_through_two_groups() -> None:
    # G -> H -> G, no free task between.
    spec = {"g1": "", "h1": "g1", "g2": "h1", "h2": "g2"}
    d = Driver(spec, groups={"g1": "G", "g2": "G", "h1": "H", "h2": "H"})
    assert d.sched.groups == []


# ---------------------------------------------------------------- determinism

HASHSEED_SCRIPT = textwrap.dedent("""
    import json
    from pytest_dagorder.core.graph import Graph
    from pytest_dagorder.core.state_machine import Setup, StateMachine

    names = ["t%02d" % k for k in range(40)]
    pairs = [(n, [names[j] for j in range(k) if (k * 7 + j * 3) % 5 == 0][:3])
             for k, n in enumerate(names)]
    after = {names[k]: [names[k - 1]] for k in range(3, 40, 6)}
    g = Graph.build(pairs, after=after)
    s = StateMachine(g, Setup(
        resources=[["db", "net"] if k % 4 == 0 else (["net"] if k % 3 == 0 else [])
                   for k in range(40)],
        limits={"net": 2},
        groups=[("grp%d" % (k % 3)) if k % 5 == 1 else None for k in range(40)],
    ))
    workers = ["w%d" % k for k in range(3)]
    for w in workers:
        s.add_worker(w)
    log, running, step = [], [], 0
    while not s.done:
        for w in workers:
            for t in s.take(w, 2):
                log.append((w, names[t]))
                running.append(t)
        t = running.pop(step % len(running))
        step += 1
        s.finished(t, "failed" if step % 9 == 0 else "passed")
    skips = [(names[k.task], k.reason) for k in s.pop_skipped()]
    print(json.dumps({"log": log, "skips": skips, "groups": s.groups}))
""")


def test_results_do_not_depend_on_hash_seed() -> None:
    outputs = outputs_under_hash_seeds(HASHSEED_SCRIPT)
    assert outputs[0]["log"], "the script dispatched nothing"
    assert outputs[0]["skips"], "the script exercised no skip"
    assert outputs[0] == outputs[1] == outputs[2]


# ---------------------------------------------------------------- properties


@dataclass
class Case:
    spec: dict[str, list[str]]
    after: dict[str, list[str]]
    resources: list[list[str]]
    limits: dict[str, int]
    groups: list[str | None] | None
    durations: dict[str, float] = field(default_factory=dict)
    exclusive: list[bool] | None = None

    def graph(self) -> Graph:
        # Graph.build's mappings are keyed by Hashable: mypy wants that key type.
        after: dict[Hashable, list[str]] = {k: v for k, v in self.after.items()}
        durations: dict[Hashable, float | None] = {k: v for k, v in self.durations.items()}
        return Graph.build(list(self.spec.items()), after=after, durations=durations)


T = TypeVar("T")

# Strategies a random case or run draws from again and again, built once: hypothesis
# builds and checks a strategy on its first draw, which cost more than the draw.
RESOURCE_SETS = st.lists(st.sampled_from(["r1", "r2"]), max_size=2, unique=True)
GROUP_LABELS = st.sampled_from([None, None, "G", "H"])
RUN_OUTCOMES = st.sampled_from(["passed"] * 6 + ["failed", "error", "skipped", "xfailed"])
ACTIONS = st.sampled_from(["take"] * 4 + ["finish"] * 4 + ["deselect", "crash", "churn"])


def pick(data: st.DataObject, among: Sequence[T], label: str) -> T:
    """One of ``among``, drawn by index (``st.integers`` of the same bounds is
    built once; a ``st.sampled_from`` of a new list is built at each draw)."""
    return among[data.draw(st.integers(0, len(among) - 1), label=label)]


@st.composite
def cases(draw: st.DrawFn, *, with_groups: bool = True) -> Case:
    n = draw(st.integers(1, 16))
    names = [f"t{k}" for k in range(n)]
    perm = draw(st.permutations(range(n)))  # hidden topological order
    spec: dict[str, list[str]] = {}
    after: dict[str, list[str]] = {}
    for k in range(n):
        earlier = [names[perm[j]] for j in range(k)]
        me = names[perm[k]]
        if earlier:
            spec[me] = [earlier[j] for j in draw(st.lists(st.integers(0, k - 1), max_size=3))]
            aft = [earlier[j] for j in draw(st.lists(st.integers(0, k - 1), max_size=1))]
            if aft:
                after[me] = aft
        else:
            spec[me] = []
    spec = {t: spec[t] for t in names}
    resources = [draw(RESOURCE_SETS)
                 if draw(st.integers(0, 3)) == 0 else [] for _ in range(n)]
    limits = {"r1": draw(st.integers(1, 2))}  # r2: the default limit of 1
    groups: list[str | None] | None = None
    if with_groups and draw(st.booleans()):
        groups = [draw(GROUP_LABELS) for _ in range(n)]
    durations = {t: float(draw(st.integers(1, 3))) for t in names}
    exclusive = ([draw(st.integers(0, 5)) == 0 for _ in range(n)]
                 if draw(st.booleans()) else None)
    return Case(spec, after, resources, limits, groups, durations, exclusive)


def requires_closure(graph: Graph, roots: set[int]) -> set[int]:
    seen: set[int] = set()
    stack = list(roots)
    while stack:
        i = stack.pop()
        for d in graph.dependents[i]:
            if d not in seen:
                seen.add(d)
                stack.append(d)
    return seen


@dataclass
class Run:
    graph: Graph
    sched: StateMachine
    dispatched: dict[int, int]
    put_back: dict[int, int]
    events: dict[int, str]  # outcome reported through finished()


def simulate(case: Case, policy: FailurePolicy, data: st.DataObject) -> Run:
    graph = case.graph()
    n = len(graph)
    sched = StateMachine(graph, Setup(on_failure=policy, resources=case.resources,
                                      limits=case.limits, groups=case.groups,
                                      exclusive=case.exclusive, history=True))
    sched.validate()
    alone = case.exclusive or [False] * n
    dispatched = dict.fromkeys(range(n), 0)
    put_back = dict.fromkeys(range(n), 0)
    workers: list[str] = []
    next_worker = 0

    def add_worker() -> None:
        nonlocal next_worker
        workers.append(f"w{next_worker}")
        sched.add_worker(workers[-1])
        next_worker += 1

    def replace_worker(w: str) -> None:
        """The worker goes (what it ran goes back), a new one comes, as xdist restarts one."""
        for i in sched.remove_worker(w):
            put_back[i] += 1
        workers.remove(w)
        add_worker()

    for _ in range(data.draw(st.integers(1, 4), label="workers")):
        add_worker()
    events: dict[int, str] = {}
    for _step in range(20 * n + 20):
        if sched.done:
            break
        action = data.draw(ACTIONS, label="action")
        running = sorted(sched.where)
        if action == "finish" and running:
            t = pick(data, running, "finish")
            outcome = data.draw(RUN_OUTCOMES, label="outcome")
            assert sched.finished(t, outcome)
            events[t] = outcome
            assert not sched.finished(t, "passed")  # a duplicate changes nothing
        elif action == "deselect":
            pending = [i for i in range(n) if sched.state[i] in (State.WAITING, State.READY)]
            if pending:
                t = pick(data, pending, "deselect")
                assert sched.finished(t, "deselected")
                events[t] = "deselected"
        elif action == "crash" and running:
            t = pick(data, running, "crash")
            w = str(sched.where[t])
            assert sched.finished(t, "crashed")
            events[t] = "crashed"
            sched.validate()
            replace_worker(w)
        elif action == "churn" and next_worker < 8:
            replace_worker(pick(data, workers, "remove"))
        else:
            w = pick(data, workers, "taker")
            limit = data.draw(st.integers(1, 3), label="limit")
            before = set(running_on(sched, w))
            bound_before = sched.bound_group(w)
            got = sched.take(w, limit)
            assert len(got) <= limit
            for t in got:
                dispatched[t] += 1
                assert sched.where[t] == w
                for p in graph.requires[t]:
                    if policy != "run":
                        assert sched.state[p] is State.PASSED, (t, p)
                    else:
                        assert sched.state[p].terminal
                for p in graph.after[t]:
                    assert sched.state[p].terminal, (t, p)
            # Groups: contiguity.  Once a worker took a group's task it takes only
            # that group's tasks (tasks it was already running may still end), it
            # never runs two groups at once, and a group runs on one worker at a time.
            gid_of = group_of(sched).get
            bound = bound_before
            for t in got:
                g = gid_of(t)
                if bound is not None:
                    assert g == bound, f"{w} bound to group {bound} got {t} ({g})"
                bound = g if g is not None else bound
            gids = {gid_of(i) for i in before | set(got)} - {None}
            assert len(gids) <= 1, f"worker {w} runs groups {gids}"
            for g in gids:
                owners = {sched.where[i] for i in sched.where if gid_of(i) == g}
                assert owners == {w}, f"group {g} runs on {owners}"
        sched.validate()
        # Resource limits hold at every step.
        use: dict[str, int] = {}
        for i in sched.where:
            for r in case.resources[i]:
                use[r] = use.get(r, 0) + 1
        for r, k in use.items():
            assert k <= case.limits.get(r, 1)
        # A task that runs alone runs alone.
        if any(alone[i] for i in sched.where):
            assert len(sched.where) == 1, sorted(sched.where)
    # Drain: deterministic, to be sure the run can always finish.
    guard = 0
    while not sched.done:
        guard += 1
        assert guard < 10 * n + 10, "run does not terminate"
        got_any = False
        for w in workers:
            for t in sched.take(w, 2):
                dispatched[t] += 1
                got_any = True
                for p in graph.requires[t]:
                    assert sched.state[p] is State.PASSED or policy == "run"
                for p in graph.after[t]:
                    assert sched.state[p].terminal
        sched.validate()
        running = sorted(sched.where)
        if any(alone[i] for i in running):
            assert len(running) == 1, running
        assert running or got_any, "stuck: nothing running, nothing dispatched"
        for t in running:
            assert sched.finished(t, "passed")
            events[t] = "passed"
            sched.validate()
    return Run(graph, sched, dispatched, put_back, events)


def check_end(run: Run, policy: FailurePolicy) -> None:
    sched, graph = run.sched, run.graph
    n = len(graph)
    assert sched.done
    for i in range(n):  # each move is in the table (checked as made) and they chain
        moves = sched.history(i)
        assert moves and moves[0].before is State.WAITING
        assert [m.after for m in moves[:-1]] == [m.before for m in moves[1:]]
        assert moves[-1].after is sched.state[i]
        if sched.state[i] is State.SKIPPED:
            assert moves[-1].cause == "skipped" and moves[-1].detail == sched.reason(i)
    assert all(s.terminal for s in sched.state)
    assert sched.running == 0
    for i in range(n):
        assert run.dispatched[i] <= 1 + run.put_back[i], f"task {i} dispatched twice"
        if i in run.events:
            assert sched.outcome[i] == run.events[i]
            assert sched.state[i] is (State.PASSED if run.events[i] == "passed"
                                      else State.FAILED)
        else:
            assert sched.state[i] is State.SKIPPED
            assert sched.reason(i)
    skipped = {i for i in range(n) if sched.state[i] is State.SKIPPED}
    if policy == "skip":
        bad = {i for i, o in run.events.items() if o != "passed"}
        assert skipped == requires_closure(graph, bad) - set(run.events)
        for i in skipped:
            skip = sched.skips[i]
            assert skip.prerequisite is not None and skip.prerequisite in graph.requires[i]
            assert skip.root is not None and run.events.get(skip.root, "passed") != "passed"
            assert sched.outcome[skip.prerequisite] != "passed"
    elif policy == "run":
        assert skipped == set()


@settings(max_examples=100, deadline=None)
@given(cases(), st.data())
def test_random_runs_skip_policy(case: Case, data: st.DataObject) -> None:
    check_end(simulate(case, "skip", data), "skip")


@settings(max_examples=50, deadline=None)
@given(cases(), st.data())
def test_random_runs_run_policy(case: Case, data: st.DataObject) -> None:
    check_end(simulate(case, "run", data), "run")


@settings(max_examples=50, deadline=None)
@given(cases(), st.data())
def test_random_runs_stop_policy(case: Case, data: st.DataObject) -> None:
    run = simulate(case, "stop", data)
    check_end(run, "stop")
    failures = [i for i, o in run.events.items() if o != "passed"]
    if failures:
        assert run.sched.stopped is not None


@settings(max_examples=50, deadline=None)
@given(cases(with_groups=False), st.integers(1, 4))
def test_all_pass_runs_everything_without_idling(case: Case, nworkers: int) -> None:
    """Every worker that asks gets work whenever a ready task fits its resources."""
    graph = case.graph()
    sched = StateMachine(graph, Setup(resources=case.resources, limits=case.limits))
    workers = [f"w{k}" for k in range(nworkers)]
    for w in workers:
        sched.add_worker(w)
    while not sched.done:
        for w in workers:
            if not running_on(sched, w):
                got = sched.take(w)
                if not got:
                    # Nothing handed out: every ready task must be blocked by a resource.
                    use: dict[str, int] = {}
                    for i in sched.where:
                        for r in case.resources[i]:
                            use[r] = use.get(r, 0) + 1
                    for i in range(len(graph)):
                        if sched.state[i] is State.READY:
                            assert any(use.get(r, 0) >= case.limits.get(r, 1)
                                       for r in case.resources[i]), f"{w} idles; {i} ready"
        sched.validate()
        running = sorted(sched.where)
        assert running
        sched.finished(running[0], "passed")
        sched.validate()
    assert sched.outcome == ["passed"] * len(graph)


# -- hand-out ahead ---------------------------------------------------------


def test_speculation_hands_out_a_chain_to_its_bound_worker() -> None:
    d = Driver({"a": "", "b": "a", "c": "b", "x": ""}, groups={"a": "G", "b": "G", "c": "G"},
               workers=["w0"])
    s = d.sched
    # The group outranks the free task x (a heads a path of three).
    got = s.take("w0", 3, ahead=True)
    assert d.names(got) == ["a", "b", "c"]
    s.validate()
    # b fails on the worker: c was handed out, so its skip is the worker's to report.
    assert s.finished(d.i("a"), "passed")
    assert s.finished(d.i("b"), "failed")
    s.validate()
    skip = s.skips[d.i("c")]
    assert skip.ahead and skip.reason == "prerequisite b failed"
    assert d.i("c") not in s.where


def test_speculation_only_for_a_bound_worker_and_open_prerequisites_on_it() -> None:
    d = Driver({"a": "", "b": "a", "c": ""}, workers=["w0"])
    # No groups: nothing is handed out before it is ready.
    assert d.names(d.sched.take("w0", 3, ahead=True)) == ["a", "c"]


def test_speculated_task_of_a_removed_worker_waits_again() -> None:
    d = Driver({"a": "", "b": "a"}, groups={"a": "G", "b": "G"}, workers=["w0"])
    s = d.sched
    assert len(s.take("w0", 2, ahead=True)) == 2
    assert s.remove_worker("w0") == [d.i("a"), d.i("b")]
    s.validate()
    assert s.state[d.i("a")] is State.READY and s.state[d.i("b")] is State.WAITING


def test_next_group_is_taken_once_the_worker_holds_all_of_its_group() -> None:
    spec = {"a1": "", "a2": "a1", "b1": "", "b2": "b1"}
    d = Driver(spec, groups={"a1": "A", "a2": "A", "b1": "B", "b2": "B"}, workers=["w"])
    s = d.sched
    assert d.names(s.take("w", 2, ahead=True)) == ["a1", "a2"]  # a2 held behind a1
    # Without next_group the worker waits for its group's end (contiguity).
    assert s.take("w", 2, ahead=True) == []
    got = s.take("w", 2, ahead=True, next_group=True)
    assert d.names(got) == ["b1", "b2"]
    assert s.bound_group("w") == 1
    s.validate()
    # Everything runs in the order handed out; the old group ends under the new binding.
    for name in ("a1", "a2", "b1", "b2"):
        assert d.finish(name)
    assert s.done and s.bound_group("w") is None


def test_next_group_waits_while_a_member_is_still_to_hand_out() -> None:
    spec = {"a1": "", "a2": "a1", "a3": "a2", "b1": ""}
    d = Driver(spec, groups={"a1": "A", "a2": "A", "a3": "A", "b1": "B"}, workers=["w"])
    s = d.sched
    assert d.names(s.take("w", 2, ahead=True, next_group=True)) == ["a1", "a2"]
    # a3 is still to hand out: the binding stays, and a3 comes before anything else.
    assert d.names(s.take("w", 1, ahead=True, next_group=True)) == ["a3"]
    assert s.bound_group("w") == 0
    assert d.names(s.take("w", 1, ahead=True, next_group=True)) == ["b1"]
    s.validate()


def test_taking_shorter_tasks_stops_at_a_long_one_and_leaves_it_ready() -> None:
    """A worker topped up behind a zero-second task: a long task held there
    would delay the dependent that task releases (the longest chain) by its
    whole duration, so taking ``shorter`` stops at it and it stays READY."""
    spec = {"end": "", "next": "end", "long": "", "quick": ""}
    d = Driver(spec, durations={"end": 0.0, "next": 60.0, "long": 30.0, "quick": 0.01},
               workers=["w", "v"])
    s = d.sched
    assert d.names(s.take("w")) == ["end"]  # 60 s remain behind it: the most urgent
    # Next in rank is "long": not shorter than 0.2 s, so nothing is taken.
    assert s.take("w", 2, shorter=0.2) == []
    s.validate()
    assert s.state[d.i("long")] is State.READY
    assert d.finish("end")
    # The dependent "end" released comes first, on whichever worker asks.
    assert d.take("w") == ["next"]
    assert d.take("v") == ["long"]
    # Short enough tasks are taken as before.
    assert d.names(s.take("v", 2, shorter=0.2)) == ["quick"]
    s.validate()


def test_next_group_goes_to_the_worker_with_fewest_tasks_in_hand() -> None:
    spec = {"a1": "", "a2": "a1", "f": "", "b1": ""}
    d = Driver(spec, groups={"a1": "A", "a2": "A", "b1": "B"}, workers=["w", "v"])
    s = d.sched
    assert d.names(s.take("w", 2, ahead=True)) == ["a1", "a2"]
    assert d.take("v") == ["f"]
    # w holds two tasks, v one: v will be free first, so w keeps its binding.
    assert s.take("w", 2, ahead=True, next_group=True) == []
    d.finish("a1")
    assert d.names(s.take("w", 2, ahead=True, next_group=True)) == ["b1"]
    s.validate()


def test_a_group_let_go_early_is_bound_again_if_its_worker_goes() -> None:
    spec = {"a1": "", "a2": "a1", "b1": ""}
    d = Driver(spec, groups={"a1": "A", "a2": "A", "b1": "B"}, workers=["w"])
    s = d.sched
    assert d.names(s.take("w", 2, ahead=True)) == ["a1", "a2"]
    assert d.names(s.take("w", 1, ahead=True, next_group=True)) == ["b1"]
    d.add("v")
    assert d.remove("w") == ["a1", "a2", "b1"]
    assert d.names(s.take("v", 3, ahead=True)) == ["a1", "a2"]
    assert s.bound_group("v") == 0
    s.validate()


def test_speculation_needs_the_skip_policy() -> None:
    d = Driver({"a": ""}, on_failure="stop", workers=["w0"])
    with pytest.raises(ValueError, match="on_failure='skip'"):
        d.sched.take("w0", 1, ahead=True)


SPECULATED_OUTCOMES = st.sampled_from(["passed"] * 4 + ["failed"])


@settings(max_examples=75, deadline=None)
@given(cases(), st.data())
def test_random_runs_with_speculation(case: Case, data: st.DataObject) -> None:
    """Workers run what they got in order; a held task whose prerequisite failed
    is skipped by the worker itself (remote), everything else ran after its
    prerequisites passed, and the outcome equals the rule for tests not handed out ahead."""
    graph = case.graph()
    n = len(graph)
    sched = StateMachine(graph, Setup(on_failure="skip", resources=case.resources,
                                      limits=case.limits, groups=case.groups, history=True))
    workers = [f"w{k}" for k in range(data.draw(st.integers(1, 3), label="workers"))]
    for w in workers:
        sched.add_worker(w)
    fifo: dict[str, list[int]] = {w: [] for w in workers}
    popped: dict[str, list[int]] = {w: [] for w in workers}  # in the order run (or skipped)
    ran_on: dict[int, str] = {}
    events: dict[int, str] = {}
    dispatched = dict.fromkeys(range(n), 0)
    guard = 0
    while not sched.done:
        guard += 1
        assert guard < 60 * n + 60, "run does not terminate"
        w = pick(data, workers, "worker")
        if not fifo[w] or data.draw(st.booleans(), label="take"):
            got = sched.take(w, data.draw(st.integers(1, 4), label="limit"), ahead=True,
                             next_group=data.draw(st.booleans(), label="next_group"))
            for t in got:
                assert sched.where[t] == w
                dispatched[t] += 1
            fifo[w].extend(got)
        if not any(fifo.values()):
            got_any = [t for v in workers for t in sched.take(v, 1, ahead=True)]
            assert got_any, "stuck: nothing held, nothing handed out"
            for t in got_any:
                dispatched[t] += 1
                fifo[str(sched.where[t])].append(t)
        held = [v for v in workers if fifo[v]]
        if held:
            w = pick(data, held, "runner")
            t = fifo[w].pop(0)
            popped[w].append(t)
            if sched.state[t].terminal:
                skip = sched.skips[t]
                assert skip.ahead and skip.prerequisite is not None
                assert ran_on.get(skip.prerequisite) == w or (
                    sched.skips.get(skip.prerequisite, skip).ahead)
                continue
            for p in graph.requires[t]:
                assert sched.state[p] is State.PASSED, (t, p)
            for p in graph.after[t]:
                assert sched.state[p].terminal, (t, p)
            outcome = data.draw(SPECULATED_OUTCOMES, label="outcome")
            assert sched.finished(t, outcome)
            ran_on[t] = w
            events[t] = outcome
        sched.validate()
    check_end(Run(graph, sched, dispatched, dict.fromkeys(range(n), 0), events), "skip")
    # Each group ran on one worker, contiguously (next_group or not).
    home: dict[int, str] = {}
    gid_of = group_of(sched)
    for w, tasks in popped.items():
        seen: list[int | None] = []
        for t in tasks:
            g = gid_of.get(t)
            if g is not None:
                assert home.setdefault(g, w) == w, f"group {g} ran on {home[g]} and {w}"
                assert g not in seen or seen[-1] == g, f"group {g} interrupted on {w}: {tasks}"
            seen.append(g)


# ---------------------------------------------------------------- handed out ahead


def test_ahead_holds_the_dependent_of_a_running_task() -> None:
    d = Driver({"a": "", "b": "a", "c": "b"}, workers=["w1", "w2"])
    assert d.take("w1") == ["a"]
    assert d.names(d.sched.ahead("w2")) == []  # nothing of w2's to wait behind
    assert d.names(d.sched.ahead("w1")) == ["b"]
    d.check()
    assert d.state("b") is State.RUNNING and d.sched.where[d.i("b")] == "w1"
    assert d.names(d.sched.ahead("w1")) == ["c"]  # behind b, which is held there
    d.check()
    assert d.finish("a") and d.finish("b") and d.finish("c")
    assert d.sched.done


def test_ahead_holds_nothing_while_a_task_is_ready() -> None:
    # x is ready and waits for a worker: holding b behind a could run b before x.
    d = Driver({"a": "", "b": "a", "x": ""}, workers=["w1"])
    assert d.take("w1") == ["a"]
    assert d.names(d.sched.ahead("w1")) == []
    assert d.finish("a")
    assert d.take("w1", 2) == ["b", "x"]


def test_ahead_waits_for_prerequisites_elsewhere() -> None:
    d = Driver({"a": "", "b": "", "c": "a b"}, workers=["w1", "w2"])
    assert d.take("w1") == ["a"]
    assert d.take("w2") == ["b"]
    assert d.names(d.sched.ahead("w1")) == []  # c also waits on b, on w2
    assert d.finish("b")
    assert d.names(d.sched.ahead("w1")) == ["c"]
    d.check()


def test_a_task_held_ahead_is_skipped_remotely_when_its_prerequisite_fails() -> None:
    d = Driver({"a": "", "b": "a", "c": "b"}, workers=["w1"])
    d.take("w1")
    assert d.names(d.sched.ahead("w1")) == ["b"]
    assert d.finish("a", "failed")
    skips = {d.names([s.task])[0]: s for s in d.sched.pop_skipped()}
    assert skips["b"].ahead, "w1 holds b: it skips b itself"
    assert not skips["c"].ahead
    assert skips["c"].reason == "prerequisite b was skipped: a failed"
    assert d.sched.done


def test_a_task_held_ahead_goes_back_to_waiting_with_its_worker() -> None:
    d = Driver({"a": "", "b": "a"}, workers=["w1", "w2"])
    d.take("w1")
    d.sched.ahead("w1")
    assert d.remove("w1") == ["a", "b"]
    assert d.state("a") is State.READY and d.state("b") is State.WAITING
    assert d.take("w2") == ["a"]


def test_ahead_needs_the_skip_policy() -> None:
    d = Driver({"a": ""}, workers=["w1"], on_failure="run")
    with pytest.raises(ValueError, match="on_failure='skip'"):
        d.sched.ahead("w1")


HELD_OUTCOMES = st.sampled_from(["passed"] * 6 + ["failed", "skipped"])
HELD_ACTIONS = ("take", "ahead", "run", "run")


@settings(max_examples=100, deadline=None)
@given(cases(), st.data())
def test_random_runs_with_tasks_held_ahead(case: Case, data: st.DataObject) -> None:
    """Workers run what they hold in order, as xdist workers do: every held
    task starts only after its prerequisites passed, or is skipped (remote)."""
    graph = case.graph()
    n = len(graph)
    sched = StateMachine(graph, Setup(on_failure="skip", resources=case.resources,
                      limits=case.limits, groups=case.groups))
    workers = [f"w{k}" for k in range(data.draw(st.integers(1, 3), label="workers"))]
    for w in workers:
        sched.add_worker(w)
    held: dict[str, list[int]] = {w: [] for w in workers}
    ran: set[int] = set()
    outcomes = HELD_OUTCOMES

    def run_head(w: str, outcome: str) -> None:
        t = held[w].pop(0)
        if sched.state[t] is State.SKIPPED:  # its prerequisite failed: the worker skips it
            assert sched.skips[t].ahead, f"{t} skipped while held, but not marked ahead"
            return
        for p in graph.requires[t]:
            assert sched.state[p] is State.PASSED, (t, p)
        for p in graph.after[t]:
            assert sched.state[p].terminal, (t, p)
        assert t not in ran, f"{t} ran twice"
        ran.add(t)
        assert sched.finished(t, outcome)

    for _ in range(30 * n + 30):
        if sched.done:
            break
        # A step among those that do something: a worker holding nothing takes, one
        # holding one task may hold another ahead, one holding any runs its head
        # (twice as likely).  What a step that did nothing would have drawn is saved.
        w, action = pick(data, [(v, a) for v in workers for a in HELD_ACTIONS
                                if (a == "take") == (not held[v])
                                and (a != "ahead" or len(held[v]) == 1)], "worker, action")
        if action == "take" and not held[w]:
            held[w] += sched.take(w, 1)
        elif action == "ahead" and len(held[w]) == 1:
            for t in sched.ahead(w, 1):
                for p in graph.requires[t]:
                    assert sched.state[p] is State.PASSED or sched.where.get(p) == w
                held[w].append(t)
        elif action == "run" and held[w]:
            run_head(w, data.draw(outcomes, label="outcome"))
        sched.validate()
    for _ in range(10 * n + 10):  # drain, all passing
        if sched.done:
            break
        for w in workers:
            if not held[w]:
                held[w] += sched.take(w, 1)
            if len(held[w]) == 1:
                held[w] += sched.ahead(w, 1)
            if held[w]:
                run_head(w, "passed")
            sched.validate()
    assert sched.done, "the run did not end"
    assert ran == {t for t in range(n) if sched.state[t] in (State.PASSED, State.FAILED)}


# ---------------------------------------------------------------- tests that run alone


def test_an_exclusive_task_waits_for_the_run_to_drain_and_runs_alone() -> None:
    graph = graph_of({"a": "", "x": "", "b": "", "c": ""})
    sched = StateMachine(graph, Setup(exclusive=[False, True, False, False], locality=False))
    for w in ("w1", "w2"):
        sched.add_worker(w)
    assert sched.take("w1") == [0]  # a
    # x is next by priority, but a runs: x is parked, and nothing else starts.
    assert sched.take("w2") == []
    sched.validate()
    assert sched.finished(0, "passed")
    assert sched.take("w2") == [1]  # nothing runs now: x alone
    assert sched.take("w1") == []
    sched.validate()
    assert sched.finished(1, "passed")
    assert sorted(sched.take("w1") + sched.take("w2")) == [2, 3]


def test_an_exclusive_task_is_never_handed_out_ahead_but_keeps_its_group() -> None:
    graph = graph_of({"a": "", "x": "a", "b": "x"})
    sched = StateMachine(graph, Setup(exclusive=[False, True, False], groups=["g", "g", "g"]))
    sched.add_worker("w")
    assert sched.take("w", ahead=True) == [0]
    assert sched.ahead("w", 3) == []  # x waits on a but runs alone: not held
    assert group_of(sched)[1] == group_of(sched)[0] == 0
    assert sched.finished(0, "passed")
    assert sched.take("w") == [1]
    sched.validate()


def test_a_group_in_progress_finishes_while_an_exclusive_task_waits() -> None:
    # g1, g2: one group (an edge); x: runs alone; w1 works through the group.
    graph = graph_of({"g1": "", "g2": "g1", "x": ""})
    sched = StateMachine(graph, Setup(exclusive=[False, False, True], groups=["g", "g", None]))
    for w in ("w1", "w2"):
        sched.add_worker(w)
    assert sched.take("w1") == [0]
    assert sched.take("w2") == []  # x is parked while g1 runs
    assert sched.finished(0, "passed")
    assert sched.take("w1") == [1]  # the bound worker goes on with its group
    assert sched.take("w2") == []
    assert sched.finished(1, "passed")
    assert sched.take("w2") == [2]
    sched.validate()
    assert sched.finished(2, "passed")
    assert sched.done


# ---------------------------------------------------------------- checked tasks


def test_checked_task_fails_unrun_when_a_checked_prerequisite_did_not_pass() -> None:
    """pytest-depends' fail action: decided at release, from every worker's outcome."""
    g = graph_of({"a": "", "c": "", "b": "", "d": "b", "e": "", "f": ""},
                 after={"b": "a c", "e": "b", "f": "b"})
    ix = g.index
    plain = StateMachine(g)
    sched = StateMachine(g.checking({ix["b"]: [ix["a"], ix["c"]], ix["e"]: [ix["b"]]}))
    for s in (plain, sched):
        s.add_worker("w1")
        assert [g.ids[t] for t in s.take("w1", 2)] == ["a", "c"]
    # A checked task is never held ahead: its worker may not know every outcome.
    assert [g.ids[t] for t in plain.ahead("w1")] == ["b"]
    assert sched.ahead("w1") == []
    sched.finished(ix["a"], "failed")
    sched.validate()
    assert sched.state[ix["b"]] is State.WAITING  # still waits on c
    assert sched.pop_skipped() == []
    sched.finished(ix["c"], "passed")
    sched.validate()
    decided = {g.ids[s.task]: s for s in sched.pop_skipped()}
    assert decided["b"].failed == (ix["a"],) and decided["e"].failed == (ix["b"],)
    assert decided["d"].failed == () and decided["d"].reason == "prerequisite b failed"
    assert sched.state[ix["b"]] is State.FAILED and sched.outcome[ix["b"]] == "failed"
    assert sched.state[ix["e"]] is State.FAILED and set(sched.fails) == {ix["b"], ix["e"]}
    assert sched.state[ix["d"]] is State.SKIPPED
    assert sched.state[ix["f"]] is State.READY  # ordering only, not checked


def test_checked_task_runs_when_its_checked_prerequisites_passed() -> None:
    g = graph_of({"a": "", "b": ""}, after={"b": "a"})
    sched = StateMachine(g.checking({1: [0]}))
    sched.add_worker("w")
    assert sched.take("w") == [0]
    sched.finished(0, "passed")
    assert sched.take("w") == [1] and sched.pop_skipped() == []
    sched.finished(1, "passed")
    sched.validate()
    assert sched.done


def test_checked_edges_are_the_graphs_and_follow_a_renumbering() -> None:
    g = graph_of({"a": "", "b": "", "c": ""}, after={"c": "a b"})
    checked = g.checking({2: [0]})
    assert g.checked == {} and checked.checked == {2: (0,)}
    assert checked.after == g.after and checked.ids == g.ids
    moved = checked.permuted([1, 0, 2])
    assert moved.ids == ("b", "a", "c") and moved.checked == {2: (1,)}
    sched = StateMachine(moved)
    sched.add_worker("w")
    assert sorted(sched.take("w", 2)) == [0, 1]
    sched.finished(0, "failed")  # b: not checked
    sched.finished(1, "failed")  # a: checked
    assert [(s.task, s.failed) for s in sched.pop_skipped()] == [(2, (1,))]



def test_a_tasks_history_says_what_released_held_and_skipped_it() -> None:
    g = graph_of({"a": "", "b": "a", "c": "b", "d": "", "e": "d"}, after={"d": "a"})
    sched = StateMachine(g, Setup(history=True))
    sched.add_worker("w1")
    sched.add_worker("w2")
    assert sched.take("w1") == [0]
    assert sched.ahead("w1") == [1]  # b: held behind a on w1
    sched.finished(0, "passed")
    assert sched.take("w2") == [3]
    sched.finished(3, "failed")
    sched.finished(1, "failed")
    sched.validate()

    def lines(task: str) -> list[str]:
        return [m.describe(lambda i: str(g.ids[i])) for m in sched.history(g.index[task])]

    assert lines("a") == ["ready at the start (no prerequisite)", "started on w1",
                          "passed on w1"]
    assert lines("b") == ["held on w1 for a", "failed on w1"]
    assert lines("c") == ["skipped because prerequisite b failed"]
    assert lines("d") == ["released by a", "started on w2", "failed on w2"]
    assert lines("e") == ["skipped because prerequisite d failed"]
    assert sched.history(1)[0].by == 0  # held for a


def test_a_grouped_task_kept_for_its_groups_worker_counts_the_starts_elsewhere() -> None:
    """b and c (group of a, b, c) become ready on a's end, on w1; w1 runs b
    while w2 starts two free tasks: c waited for w1 through both.  b started
    at once, and a, the group's first, waited for nothing."""
    g = graph_of({"a": "", "b": "a", "c": "a", "f1": "", "f2": ""})
    sched = StateMachine(g, Setup(groups=["g", "g", "g", None, None], history=True))
    sched.add_worker("w1")
    sched.add_worker("w2")
    sched.claim(0, "w1")  # a
    sched.finished(0, "passed")
    sched.claim(1, "w1")  # b
    assert sched.take("w2", 2) == [3, 4]  # the free ones: c is w1's
    sched.finished(1, "passed")
    assert sched.take("w1") == [2]
    sched.validate()
    (start_c,) = [m for m in sched.history(2) if m.cause == "started"]
    assert (start_c.worker, start_c.waited) == ("w1", 2)
    assert start_c.describe(str) == "started on w1 after 2 tests started on other workers"
    assert all(m.waited == 0 for i in (0, 1, 3, 4) for m in sched.history(i))


def test_a_task_put_back_and_failed_for_a_check_says_so() -> None:
    g = graph_of({"a": "", "b": ""}, after={"b": "a"}).checking({1: [0]})
    sched = StateMachine(g, Setup(history=True))
    sched.add_worker("w1")
    assert sched.take("w1") == [0]
    assert sched.remove_worker("w1") == [0]
    sched.add_worker("w2")
    assert sched.take("w2") == [0]
    sched.finished(0, "error")
    assert [(m.before, m.after, m.cause, m.worker) for m in sched.history(0)] == [
        (State.WAITING, State.READY, "free", None),
        (State.READY, State.RUNNING, "started", "w1"),
        (State.RUNNING, State.READY, "put back", "w1"),
        (State.READY, State.RUNNING, "started", "w2"),
        (State.RUNNING, State.FAILED, "ended", "w2"),
    ]
    (failed,) = sched.history(1)
    assert (failed.cause, failed.by) == ("failed check", 0)
    assert failed.describe(str) == "failed without running because prerequisite a had an error"
    assert [m.describe(str) for m in sched.history(0)][2] == "put back (w1 left)"
    assert [m.describe(str, None) for m in sched.history(0)][2:] == [
        "put back", "started", "had an error"]


def test_without_history_nothing_is_kept() -> None:
    sched = StateMachine(graph_of({"a": ""}))
    with pytest.raises(ValueError, match="keeps no history"):
        sched.history(0)


def test_every_move_is_checked_against_the_table_even_without_history(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A move the table does not list is refused whether or not a history is
    kept: here the table loses "a free task becomes ready"."""
    from pytest_dagorder.core import state_machine
    from pytest_dagorder.core.history import moves_allowed

    table = {k: v for k, v in state_machine.TRANSITIONS.items()
             if k != (State.WAITING, State.READY)}
    monkeypatch.setattr(state_machine, "_ALLOWED", moves_allowed(table))
    with pytest.raises(AssertionError, match="no transition waiting -> ready for 'free'"):
        StateMachine(graph_of({"a": ""}))


def test_one_function_writes_a_tasks_state() -> None:
    """Read from the source: the state list is written in one place (``_move``),
    so every move passes the table's check and is recorded with its cause."""
    import ast
    import inspect

    from pytest_dagorder.core import state_machine

    tree = ast.parse(inspect.getsource(state_machine))
    writers = sorted(
        func.name for func in ast.walk(tree) if isinstance(func, ast.FunctionDef)
        for node in ast.walk(func) if isinstance(node, ast.Assign)
        for target in node.targets if isinstance(target, ast.Subscript)
        and isinstance(target.value, (ast.Attribute, ast.Name))
        and getattr(target.value, "attr", getattr(target.value, "id", "")) in ("state", "states"))
    assert writers == ["_move"]
