"""The scheduler core: a synchronous state machine over a validated :class:`Graph`.

Pure: no pytest, no threads, no clocks.  A driver (the serial plugin, the
distributed controller, the thread-pool executor) feeds it events - a worker came or
went, tasks were taken by a worker, a task finished with an outcome, a stop
was requested - and reads its decisions: which tasks a worker should run
next (:meth:`StateMachine.take`) and which tasks became skipped, with why
(:meth:`StateMachine.pop_skipped`).

This module holds the state machine: task states, the counters, skip
propagation, stops and :meth:`~StateMachine.validate`.  Where and in which
order READY tasks run (ready queues, affinity groups, resource limits,
exclusive tests) is :mod:`.placement`'s business, behind the small
:class:`~.placement.Placement` protocol: the state machine tells it what
became READY, started, ended and terminal, and asks it for a worker's next
task.  Placement never changes a state, so the invariants below are this
module's alone.

Invariants
----------

*Dispatch exactly once.*  Every task holds a counter of prerequisites that
have not yet released it.  The counter reaching zero is the one and only
claim that moves a task from WAITING to READY; completions are accepted only
for tasks that are not yet terminal, so a duplicate or stale event can
neither decrement twice nor drive a counter below zero.  A task leaves READY
only through :meth:`take` / :meth:`claim` (to RUNNING) or by being skipped.
Placement may keep entries of a task that started or ended elsewhere; it
checks each entry against the state when it pops it, so a stale entry is
dropped, never run.  A task put back by :meth:`remove_worker` returns to
READY and is released to placement afresh.

The one exception is the hand-out ahead (``take(..., ahead=True)``
and :meth:`~StateMachine.ahead`): a WAITING task of a bound group, or a free
one, whose every open prerequisite is RUNNING on one worker goes straight
to RUNNING there.  It is still handed out
once (only a WAITING task qualifies, and it leaves WAITING), its counter
still counts down as the prerequisites pass (its release then finds it
RUNNING and does nothing), and if one of them fails it is skipped like any
dependent, marked ``ahead`` because the worker holding it reports it.
Put back by :meth:`remove_worker`, it returns to WAITING.

*Terminal exactly once.*  PASSED, FAILED (any non-pass outcome) and SKIPPED
are terminal and never left.  Reaching a terminal state releases the task's
out-edges exactly once: a failure skips its requires-pass dependents (policy
``skip``), and every terminal state - skipped included - counts down the
ordering-only edges, so nothing downstream of a skip waits forever.

*The run is over* exactly when every task is terminal (:attr:`done`).  If
nothing is running and nothing is ready while tasks remain, the graph could
not progress; that cannot happen for a validated DAG (placement parks a
task only behind a running one, and an affinity group whose outside
prerequisites form a cycle between groups is dissolved), and
:meth:`validate` checks it.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Final, Literal, final, get_args

from . import wording
from .errors import name_of
from .graph import Graph
from .hand_out_ahead import HandOutAhead
from .history import TRANSITIONS, History, Transition, moves_allowed
from .module_runs import ModuleRuns
from .placement import (
    AffinityGroups,
    Exclusive,
    Fences,
    Placement,
    Rank,
    ReadyQueues,
    ResourceLimits,
)
from .states import FAILURE_POLICIES, TERMINAL, FailurePolicy, State, Worker, check

__all__ = [
    "FAILURE_POLICIES",
    "OUTCOMES",
    "TRANSITIONS",
    "FailurePolicy",
    "Outcome",
    "Setup",
    "Skip",
    "State",
    "StateMachine",
    "Transition",
    "Worker",
    "as_outcome",
    "blocked_skip",
]

#: Outcomes a driver may report.  Only "passed" lets requires-pass dependents run.
Outcome = Literal[
    "passed", "failed", "error", "skipped", "xfailed", "crashed", "deselected", "not run"
]
OUTCOMES: Final[frozenset[str]] = frozenset(get_args(Outcome))


_AS_OUTCOME: Final[Mapping[str, Outcome]] = {word: word for word in get_args(Outcome)}


def as_outcome(word: str) -> Outcome:
    """``word`` as an :data:`Outcome`, for drivers that read words from reports.

    Raises ValueError naming the accepted words if it is none of them.
    """
    outcome = _AS_OUTCOME.get(word)
    if outcome is None:
        raise ValueError(f"unknown outcome {word!r}; expected one of {sorted(OUTCOMES)}")
    return outcome


@dataclass(frozen=True, slots=True)
class Skip:
    """A decision: ``task`` will not run.

    ``prerequisite`` is the direct prerequisite that did not pass and ``root``
    the task whose own outcome (``root_outcome``) started it; both are None
    for a stop or a cancellation.  ``ahead``: the task had been handed out
    ahead, so the worker holding it skips it itself (with this same
    reason, see :func:`blocked_skip`); the driver must not report it twice.
    ``failed``: not a skip but a failure without running (a checked task, see
    :attr:`.Graph.checked`): the checked prerequisites that did not pass, for
    the driver to word.  ``cause``: for a skip with no root, the stop or
    cancellation that started it, as its own reason worded it (the summary
    groups by it; a reason is never parsed back).  ``root_cause``: what the
    driver said ended ``root`` (see :meth:`StateMachine.finished`), "" if nothing.
    """

    task: int
    reason: str
    prerequisite: int | None
    root: int | None
    root_outcome: str | None
    ahead: bool = False
    failed: tuple[int, ...] = ()
    cause: str = ""
    root_cause: str = ""


def blocked_skip(
    task: int,
    prereq: int,
    prereq_outcome: str | None,
    upstream: Skip | None,
    name: Callable[[int], str],
    cause: str = "",
) -> Skip:
    """Why ``task`` is skipped because ``prereq`` did not pass.

    ``upstream`` is the skip decision of ``prereq`` itself, if it was
    skipped rather than run; ``cause``: what ended ``prereq`` (see
    :meth:`StateMachine.finished`).  A pure function, shared by the core and
    by a worker that gates tasks sent ahead, so both word it alike.
    """
    p = name(prereq)
    if upstream is not None:
        if upstream.root is None:
            return Skip(task, wording.prerequisite_skipped_for(p, upstream.reason), prereq,
                        None, None, cause=upstream.cause or upstream.reason)
        root, outcome = upstream.root, upstream.root_outcome
        assert outcome is not None
        reason = wording.prerequisite_skipped(p, name(root), outcome, upstream.root_cause)
        return Skip(task, reason, prereq, root, outcome, root_cause=upstream.root_cause)
    outcome = prereq_outcome or "not run"
    return Skip(task, wording.prerequisite_ended(p, outcome, cause), prereq, prereq, outcome,
                root_cause=cause)


_WAITING, _READY, _RUNNING = State.WAITING, State.READY, State.RUNNING
_PASSED, _FAILED, _SKIPPED = State.PASSED, State.FAILED, State.SKIPPED
#: :data:`TRANSITIONS` as every move's check reads it.
_ALLOWED: Final = moves_allowed(TRANSITIONS)
#: What a waiting task's prerequisite may be under the policies that skip or stop.
_NOT_FAILED: Final = frozenset((_WAITING, _READY, _RUNNING, _PASSED))


def _or_checked(checked: Mapping[int, Sequence[int]],
                inner: Callable[[int], bool] | None) -> Callable[[int], bool]:
    """``inner`` (tasks never held ahead), extended by the checked tasks."""
    if inner is None:
        return checked.__contains__
    return lambda t: t in checked or inner(t)


@dataclass(frozen=True, slots=True)
class Setup:
    """How a run is scheduled beyond its graph: decided once, before the machine is made.

    A driver fills it from its own settings (the plugin from its options,
    the executor from its tasks) and hands it over whole.  The per-task
    sequences are indexed like the graph; None: no task has any.

    ``on_failure``: what a task that did not pass does to its dependents.
    ``history``: keep every task's moves and their causes
    (:meth:`StateMachine.history`), for a driver that explains a run.
    ``priority``: per task, its rank (the larger first; None: the critical
    path of the graph).  ``locality``: a task released on a worker prefers
    it (False: priority order alone, see :class:`~.placement.ReadyQueues`).
    ``groups``: per task, its affinity group's label
    (:class:`~.placement.AffinityGroups`); ``resources`` and ``limits``:
    per task the resources it uses, and how many tasks may use each at once
    (:class:`~.placement.ResourceLimits`); ``exclusive``: per task, whether
    it runs alone.  ``modules``: per task, its module; ``module_fixtures``:
    per task, whether it uses a fixture of module scope or wider; with
    both, a worker keeps each module's tests in one stretch where the graph
    allows (see :mod:`.module_runs`).  ``fences``: positions before which
    serial order is kept in hand-out (see :class:`~.placement.Fences`): a
    task at or past one is handed out only once every task before it has
    been (pytest-order's ``order(-1)`` test, fenced at its own position,
    goes after every other test has gone).  ``unfenced``: tasks no fence
    holds (evidence freed them; they still count in their stretch).
    """

    on_failure: FailurePolicy = "skip"
    history: bool = False
    priority: Sequence[float] | None = None
    locality: bool = True
    groups: Sequence[Hashable | None] | None = None
    resources: Sequence[Sequence[str]] | None = None
    limits: Mapping[str, int] | None = None
    exclusive: Sequence[bool] | None = None
    modules: Sequence[Hashable | None] | None = None
    module_fixtures: Sequence[bool] | None = None
    fences: Sequence[int] = ()
    unfenced: Sequence[int] = ()


@dataclass(slots=True)
class PlacementChain:
    """What :func:`placement_chain` assembled: the outermost policy and the parts
    the state machine asks directly."""

    placement: Placement
    groups: AffinityGroups | None
    runs: ModuleRuns | None
    #: Tasks never handed out ahead (None: no such task).
    constrained: Callable[[int], bool] | None
    fences: Fences | None = None


def placement_chain(
    graph: Graph,
    rank: list[Rank],
    state: list[State],
    running_on: dict[Worker, set[int]],
    setup: Setup,
) -> PlacementChain:
    """The ready queues, each other policy wrapping the one before, outermost last.

    ``rank``, ``state`` and ``running_on`` are the state machine's own lists,
    shared (placement reads them, never writes a state).
    """
    n = len(graph)
    exclusive, modules, module_fixtures = setup.exclusive, setup.modules, setup.module_fixtures
    resources, limits, fences = setup.resources, setup.limits, setup.fences
    alone = list(exclusive) if exclusive is not None and any(exclusive) else None
    if alone is not None and len(alone) != n:
        raise ValueError(f"exclusive has {len(alone)} entries for {n} tasks")
    runs: ModuleRuns | None = None
    if modules is not None and module_fixtures is not None and any(module_fixtures):
        if len(modules) != n or len(module_fixtures) != n:
            raise ValueError(f"modules and module_fixtures need {n} entries each")
        runs = ModuleRuns(modules, module_fixtures, lambda w: bool(running_on.get(w)))
        of = runs.module
        runs.chained = {of[i] for i in range(n) if of[i] >= 0 and any(
            of[p] == of[i] for p in (*graph.requires[i], *graph.after[i]))}
    fenced = Fences.of(fences, n, setup.unfenced) if fences else None
    queues = ReadyQueues(rank, state, locality=setup.locality, runs=runs, fences=fenced)
    placement: Placement = queues
    affinity: AffinityGroups | None = None
    if setup.groups is not None:
        affinity = AffinityGroups(queues, graph, setup.groups, rank, state, running_on)
        placement = affinity
    limited: ResourceLimits | None = None
    if resources or limits:
        limited = ResourceLimits(placement, resources, limits, state, n)
        placement = limited
    constrained: Callable[[int], bool] | None = (
        None if limited is None else limited.constrained)
    if alone is not None:
        placement = Exclusive(placement, alone, state, affinity)
        constrained = (placement.constrained if limited is None
                       else lambda t, a=alone, c=limited.constrained: a[t] or c(t))
    if graph.checked:
        # Held ahead, a checked task's worker may not know every checked outcome.
        constrained = _or_checked(graph.checked, constrained)
    return PlacementChain(placement, affinity, runs, constrained, fenced)


@final
class StateMachine:
    """The scheduler's state machine over ``graph`` (see the module docstring).

    Over 20 methods, in one class on purpose: the events and queries the
    drivers call (each small), and the moves behind them, which share the
    task lists and counters whose invariants :meth:`validate` checks; the
    parts with state of their own are apart (placement, :class:`History`,
    :class:`~.hand_out_ahead.HandOutAhead`).
    """

    def __init__(self, graph: Graph, setup: Setup = Setup(), *,
                 name: Callable[[int], str] | None = None) -> None:
        """``setup``: everything decided about the run beyond its graph (see
        :class:`Setup`); ``name``: how reasons name a task (default: its id).

        The graph's checked edges (:attr:`.Graph.checked`, pytest-depends'
        ``--failed-dependency-action=fail``) are settled at release: a task
        whose checked prerequisite did not pass fails without running, a
        decision in :meth:`pop_skipped` with ``failed`` set, the task FAILED.
        Such a task is never handed out ahead (its worker may not know those
        outcomes).
        """
        on_failure = setup.on_failure
        if on_failure not in FAILURE_POLICIES:
            raise ValueError(f"on_failure must be 'skip', 'stop' or 'run', not {on_failure!r}")
        n = len(graph)
        self.graph: Final = graph
        self.on_failure: Final = on_failure
        self._name = name or (lambda i: name_of(graph.ids[i]))
        crit = graph.critical_path() if setup.priority is None else setup.priority
        self._rank: list[Rank] = [(-crit[i], i) for i in range(n)]
        self.state: list[State] = [State.WAITING] * n
        self.outcome: list[Outcome | None] = [None] * n
        self.skips: dict[int, Skip] = {}
        #: What ended a task that did not pass, as its driver said (see finished).
        self.causes: dict[int, str] = {}
        self.where: dict[int, Worker] = {}  # running task -> worker
        self._pending = [len(graph.requires[i]) + len(graph.after[i]) for i in range(n)]
        self._terminal_count = 0
        #: Every task terminal: the run is over (see the module docstring).  A
        #: plain attribute, set where a task becomes terminal: a driver asks on
        #: every turn of its event loop.
        self.done = n == 0
        self._sent_ahead: set[int] = set()  # handed out ahead (see take())
        self._ready_count = 0
        self._new_skips: list[Skip] = []
        self._stopped: str | None = None
        self._checks: Mapping[int, Sequence[int]] = graph.checked
        #: Checked tasks that failed without running, by task (see the graph's ``checked``).
        self.fails: dict[int, Skip] = {}
        #: Passed tasks of an affinity group, by the worker they ran on (see :meth:`lost`).
        self._passed_on: dict[int, Worker] = {}
        self._workers: dict[Worker, None] = {}
        self._running_on: dict[Worker, set[int]] = {}
        self._history = (History(lambda i: None if self._groups is None else self._groups.of[i])
                         if setup.history else None)
        chain = placement_chain(graph, self._rank, self.state, self._running_on, setup)
        self._wire(chain)
        for i in range(n):
            if not self._pending[i]:
                self._make_ready(i, "free")

    def _wire(self, chain: PlacementChain) -> None:
        """Take the placement policies ``chain`` assembled, and the hand-out ahead over them."""
        self._placement = chain.placement
        self._groups = chain.groups
        #: Which module each worker is in (None: no module keeps fixtures).
        self.runs = chain.runs
        self._ahead = HandOutAhead(
            self.graph, self._rank, self.state, self.where, self._running_on,
            None if self._groups is None else self._groups.of,
            chain.constrained,
            self.runs,
            () if self._groups is None else self._groups.groups,
        )
        self._ahead.fences = chain.fences

    # ------------------------------------------------------------------ groups

    @property
    def groups(self) -> list[list[int]]:
        """The affinity groups in force (after any dissolution), as task lists."""
        return [] if self._groups is None else [list(g.members) for g in self._groups.groups]

    # ------------------------------------------------------------------ events

    def add_worker(self, worker: Worker) -> None:
        if worker in self._workers:
            raise ValueError(f"worker {worker!r} was already added")
        self._workers[worker] = None
        self._running_on[worker] = set()
        self._placement.worker_added(worker)

    def remove_worker(self, worker: Worker) -> list[int]:
        """Forget a worker; tasks still running there go back to READY.

        A driver that knows one of them crashed the worker reports it with
        :meth:`finished` (outcome "crashed") before calling this.  Returns the
        tasks that were put back, in index order.
        """
        if worker not in self._workers:
            raise KeyError(worker)
        del self._workers[worker]
        back = sorted(self._running_on.pop(worker))
        for i in back:
            del self.where[i]
            self._placement.ended(i)
            self._sent_ahead.discard(i)
            if self._pending[i]:
                # Handed out ahead, its prerequisites still open.
                self._move(i, State.WAITING, "put back", worker=worker)
            else:
                self._make_ready(i, "put back", worker)
        self._placement.worker_removed(worker)
        if self._stopped is not None:
            # take() admits nothing after a stop: a task put back would never run.
            self.stop(self._stopped)
        return back

    def lost(self, worker: Worker, cause: str) -> list[int]:
        """``worker`` crashed (``cause`` says how): the process state its passed
        tasks left died with it.

        A task not started yet that waits on such a task of its own affinity
        group (the group says it may read that state) is skipped with a reason
        naming the crash, rather than run elsewhere without the state; its
        dependents follow.  Returns the tasks skipped now.
        """
        groups = self._groups
        first = len(self._new_skips)
        if groups is None:
            return []
        g = self.graph
        for p in sorted(t for t, w in self._passed_on.items() if w == worker):
            group = groups.of[p]
            for d in (*g.dependents[p], *g.followers[p]):
                if self.state[d] in (State.WAITING, State.READY) and groups.of[d] is group:
                    reason = wording.prerequisite_state_lost(self._name(p), cause)
                    self._skip(d, Skip(d, reason, p, None, None, cause=cause), None)
        return [skip.task for skip in self._new_skips[first:]]

    def claim(self, task: int, worker: Worker) -> None:
        """Start a specific READY task on ``worker`` (a driver that fixes the order)."""
        if self.state[task] is not State.READY:
            raise ValueError(
                f"task {self._name(task)} is {self.state[task].value}, not ready; "
                "only a ready task can be started"
            )
        self._start(task, worker)

    def take(self, worker: Worker, limit: int = 1, *, ahead: bool = False,
             next_group: bool = False, shorter: float | None = None) -> list[int]:
        """Up to ``limit`` READY tasks for ``worker``, now RUNNING there.

        With ``ahead`` (policy ``skip`` only), a worker bound to a group
        also gets group tasks whose only open prerequisites are running on
        that same worker: it runs them in the order given, so it knows those
        outcomes first and must skip such a task itself when one did not
        pass (see :class:`Skip`.ahead).  This saves a round trip per test
        along a chain.

        With ``next_group``, a worker that already runs or holds every open
        task of its group, and has no more tasks in hand than any other
        worker, may take its next group (or free tasks) now, to run after
        them, instead of once the group's last task ended.  For
        a driver that keeps a batch of short tasks in flight: a round trip
        less at every group's end.  Not for long tasks: whatever it takes
        then waits behind them, while another worker could start it.

        With ``shorter`` (seconds), taking stops at the first free task the
        graph's durations say takes that long or longer: it stays READY, in
        its turn.  For a driver that tops a worker up behind short tasks: a
        long task held there delays what those short ones release (their
        dependent, often the most urgent task of the run) by its whole
        duration, where leaving it costs the worker one round trip.  A
        group's task is taken whatever it takes (the worker may be bound to
        the group by then).
        """
        if ahead and self.on_failure != "skip":
            raise ValueError("hand-out ahead needs on_failure='skip'")
        if next_group:
            self._let_go_if_first_free(worker)
        if ahead and self._groups is not None and self._groups.spans(worker):
            return self._take_by_module(worker, limit)
        out: list[int] = []
        while True:
            if self._take_free(worker, limit, out, ahead, shorter):
                return out
            if not ahead or len(out) >= limit or self._stopped is not None:
                return out
            gid = self.bound_group(worker)
            if gid is None or self._groups is None or not self._groups.unstarted(gid):
                return out
            # The group's next members in serial order, held up to the first
            # READY one, which the placement then hands out in its turn.
            held = self._ahead.group_tasks(worker, gid, limit - len(out),
                                           lambda d: self._hold(d, worker))
            if not held:
                return out
            out += held

    def _let_go_if_first_free(self, worker: Worker) -> None:
        """``take``'s ``next_group``: let ``worker`` go from its group if it holds
        no more tasks than any other worker (near the end, the last groups go
        to whoever is done soonest)."""
        if self._groups is None or worker not in self._running_on:
            return
        mine = len(self._running_on[worker])
        if all(len(tasks) >= mine for tasks in self._running_on.values()):
            self._groups.let_go(worker)

    def _take_free(self, worker: Worker, limit: int, out: list[int], ahead: bool,
                   shorter: float | None) -> bool:
        """``take``'s tasks in the placement's order, appended to ``out`` up to
        ``limit``; whether ``take`` is done (a task left for later, or the
        worker bound just now to a group of several modules, taken by module)."""
        while len(out) < limit and self._stopped is None:
            if worker not in self._workers:
                raise KeyError(worker)
            i = self._placement.next_for(worker)
            if i is None:
                return False
            if self._leaves_early(worker, i) or self._too_long(i, shorter):
                # Back to the queues; the worker asks again once those ended.
                self._placement.released((i,), None)
                return True
            self._start(i, worker)
            out.append(i)
            if ahead and self._groups is not None and self._groups.spans(worker):
                out += self._take_by_module(worker, limit - len(out))
                return True
        return False

    def _too_long(self, task: int, shorter: float | None) -> bool:
        """Whether free ``task`` takes ``shorter`` seconds or more (see :meth:`take`)."""
        return (shorter is not None and self.graph.durations[task] >= shorter
                and (self._groups is None or self._groups.of[task] is None))

    def _leaves_early(self, worker: Worker, task: int) -> bool:
        """Whether starting ``task`` next would take ``worker`` out of the module
        it holds while a test of that module waits only on what it runs
        (in a batch: that test becomes ready there once those end)."""
        runs = self.runs
        if runs is None:
            return False
        held = runs.holding(worker)
        return (held in runs.chained and runs.module[task] != held
                and self._ahead.waits_here(worker, held))

    def _take_by_module(self, worker: Worker, limit: int) -> list[int]:
        """:meth:`take` with ``ahead`` for a worker bound to a group of several
        modules: what it may run or hold of its current module first (ready
        tasks, then those held behind them), and only then the next module."""
        groups = self._groups
        assert groups is not None
        if worker not in self._workers:
            raise KeyError(worker)
        next_for = self._placement.next_for
        out: list[int] = []
        while len(out) < limit and self._stopped is None:
            gid = self.bound_group(worker)
            if gid is None:
                break
            with groups.staying():
                n = len(out)
                while len(out) < limit and (i := next_for(worker)) is not None:
                    self._start(i, worker)
                    out.append(i)
            if len(out) < limit and groups.unstarted(gid):
                out += self._ahead.group_tasks(worker, gid, limit - len(out),
                                               lambda d: self._hold(d, worker), same_module=True)
            if len(out) > n:
                continue
            # Nothing more of this module now: the next module's first task.
            i = next_for(worker)
            if i is None:
                break
            self._start(i, worker)
            out.append(i)
        return out

    def ahead(self, worker: Worker, limit: int = 1) -> list[int]:
        """Up to ``limit`` tasks for ``worker`` to hold behind what it runs now.

        Only tasks that could not start anywhere before the worker's running
        tasks end (policy ``skip`` only): a bound worker's own group tasks
        (:meth:`take` with ``ahead``), else the free task that waits only
        on tasks running there, and only while no task is ready (a task held
        behind a running one must not go before one that was ready first;
        holding whenever the held task was at least as urgent as every ready
        one made random DAGs slower).  The worker starts it
        the moment its prerequisite ends, without a round trip, and skips it
        itself if that prerequisite did not pass (see :class:`Skip`.ahead).
        """
        if self.on_failure != "skip":
            raise ValueError("tasks handed out ahead need on_failure='skip'")
        if worker not in self._workers:
            raise KeyError(worker)
        if self.bound_group(worker) is not None:
            return self.take(worker, limit, ahead=True)
        out: list[int] = []
        if self._stopped is not None or self._placement.ready_for(worker):
            return out
        while len(out) < limit:
            d = self._ahead.successor(worker)
            if d is None:
                break
            self._hold(d, worker)
            out.append(d)
        return out

    def finished(self, task: int, outcome: Outcome, cause: str = "") -> bool:
        """Record a task's outcome.  Returns False (and changes nothing) if it was terminal.

        Any non-terminal task may be finished, not only a running one: a
        driver reports tasks that will never run this way ("deselected").
        Drivers pass words read from reports: an unknown one raises ValueError.
        ``cause``: a short plain text of what ended a task that did not pass
        (an error's first line, a time limit), named in its dependents' reasons.
        """
        if outcome not in OUTCOMES:
            as_outcome(outcome)  # raises, naming the accepted words
        if self.state[task] in TERMINAL:
            return False
        worker = self.where.pop(task, None)
        if worker is not None:
            self._running_on[worker].discard(task)
            self._placement.ended(task)
        self.outcome[task] = outcome
        if cause:
            self.causes[task] = cause
        if (worker is not None and outcome == "passed" and self._groups is not None
                and self._groups.of[task] is not None):
            self._passed_on[task] = worker
        self._set_terminal(task, State.PASSED if outcome == "passed" else State.FAILED, worker)
        if outcome != "passed" and self.on_failure == "stop":
            self.stop(wording.stopped_after(self._name(task), outcome))
        return True

    def stop(self, reason: str = wording.STOPPED) -> list[int]:
        """Admit nothing new: every task not yet started is skipped with ``reason``.

        Running tasks are left to finish.  Returns the tasks skipped now.
        """
        if self._stopped is None:
            self._stopped = reason
        first = len(self._new_skips)
        for i in range(len(self.state)):
            if self.state[i] in (State.WAITING, State.READY):
                self._skip(i, Skip(i, reason, None, None, None, cause=reason), None)
        # Dependents skipped along the way count too.
        return [skip.task for skip in self._new_skips[first:]]

    def pop_skipped(self) -> list[Skip]:
        """Skip decisions made since the last call, in the order they were made."""
        out, self._new_skips = self._new_skips, []
        return out

    @property
    def skips_pending(self) -> bool:
        """Whether :meth:`pop_skipped` has anything (a driver asks after every report)."""
        return bool(self._new_skips)

    # ------------------------------------------------------------------ queries

    @property
    def stopped(self) -> str | None:
        return self._stopped

    @property
    def ready_count(self) -> int:
        """Tasks in READY (including those of groups not yet startable)."""
        return self._ready_count

    @property
    def running(self) -> int:
        return len(self.where)

    def has_ready(self) -> bool:
        """Whether some task could be handed out now (ignoring resource limits)."""
        return self._placement.has_ready()

    def bound_group(self, worker: Worker) -> int | None:
        return None if self._groups is None else self._groups.bound_group(worker)

    def reason(self, task: int) -> str | None:
        skip = self.skips.get(task)
        return None if skip is None else skip.reason

    @property
    def keeps_history(self) -> bool:
        """Whether the machine was made with ``Setup(history=True)``."""
        return self._history is not None

    def history(self, task: int) -> list[Transition]:
        """``task``'s moves so far, oldest first, each with its cause.

        Kept only when the machine was made with ``Setup(history=True)`` (else
        ValueError).  :meth:`Transition.describe` words one for people.
        """
        if self._history is None:
            raise ValueError("this state machine keeps no history (Setup(history=True) keeps it)")
        return self._history.of(task)

    # ------------------------------------------------------------------ transitions

    def _move(self, i: int, after: State, cause: str, *, by: int | None = None,
              worker: Worker | None = None, detail: str | None = None) -> None:
        """The one place a task's state changes: the move is checked against
        :data:`TRANSITIONS` (an unlisted one raises AssertionError), the ready
        and terminal counters follow it, and, with a history, it is recorded
        with its cause (``by``, ``worker``, ``detail``: see :class:`Transition`)."""
        before = self.state[i]
        if (before._name_, after._name_, cause) not in _ALLOWED:
            check(False, f"task {i}: no transition {before.value} -> {after.value} for {cause!r}")
        if self._history is not None:
            self._history.record(i, before, after, cause, by, worker, detail)
        self.state[i] = after
        if before is _READY:
            self._ready_count -= 1
        if after is _READY:
            self._ready_count += 1
        elif after is not _WAITING and after is not _RUNNING:
            self._terminal_count += 1

    def _held_for(self, task: int) -> int | None:
        """The first prerequisite ``task`` still waits on (it is held for its end)."""
        g, state = self.graph, self.state
        return next((p for p in (*g.requires[task], *g.after[task]) if not state[p].terminal),
                    None)

    def _make_ready(self, i: int, cause: str, worker: Worker | None = None) -> None:
        """WAITING (or put back) -> READY, with no origin to be near."""
        self._move(i, State.READY, cause, worker=worker)
        self._placement.released((i,), None)

    def _start(self, i: int, worker: Worker) -> None:
        """READY -> RUNNING on ``worker``."""
        if worker not in self._workers:
            raise KeyError(worker)
        self._placement.started(i, worker)  # may refuse (raise) before anything changed
        self._move(i, State.RUNNING, "started", worker=worker)
        self.where[i] = worker
        self._running_on[worker].add(i)

    def _hold(self, d: int, worker: Worker) -> None:
        """WAITING -> RUNNING on ``worker``, ahead of its prerequisites' end."""
        self._placement.started(d, worker)
        self._move(d, State.RUNNING, "held",
                   by=self._held_for(d) if self._history is not None else None, worker=worker)
        self.where[d] = worker
        self._running_on[worker].add(d)
        self._sent_ahead.add(d)

    def _set_terminal(self, task: int, state: State, origin: Worker | None) -> None:
        """Make ``task`` terminal and settle everything that waited on it.

        Tasks that become READY here are released to placement together,
        with ``origin`` (the worker the completion came from).  Iterative,
        so a long chain of skips cannot exhaust the stack.
        """
        states, terminal = self.state, TERMINAL
        work = [(task, state)]
        while work:
            i, st = work.pop()
            if states[i] in terminal:
                continue
            self._end(i, st, origin if i == task else None)
            released = self._settle(i, st, work)
            # A task held ahead is RUNNING already: its release changes nothing.
            ready = [d for d in released if states[d] is _WAITING]
            if self._checks and ready:
                ready = [d for d in ready if not self._fails_check(d, work)]
            if ready:
                for d in ready:
                    self._move(d, _READY, "released", by=i)
                self._placement.released(ready, origin)
        self.done = self._terminal_count == len(states)

    def _end(self, i: int, st: State, origin: Worker | None) -> None:
        """Task ``i`` moves to terminal ``st``, with its cause; held on a worker
        and skipped, it leaves that worker first."""
        if i in self._sent_ahead:
            self._sent_ahead.discard(i)
            if st is _SKIPPED:  # skipped while held by a worker
                w = self.where.pop(i)
                self._running_on[w].discard(i)
                self._placement.ended(i)
        if st is _SKIPPED:
            skip = self.skips[i]
            self._move(i, st, "skipped", by=skip.prerequisite, detail=skip.reason)
        elif st is _FAILED and i in self.fails:
            fail = self.fails[i]
            self._move(i, st, "failed check", by=fail.prerequisite, detail=fail.reason)
        else:
            self._move(i, st, "ended", worker=origin, detail=self.outcome[i])
        self._placement.settled(i)

    def _settle(self, i: int, st: State, work: list[tuple[int, State]]) -> list[int]:
        """What terminal ``i`` (now ``st``) does to its dependents: each counts
        down, or is skipped (queued in ``work``); returns those with nothing
        left to wait on."""
        g, states, pending, terminal = self.graph, self.state, self._pending, TERMINAL
        passed = self.on_failure == "run" or st is _PASSED
        released: list[int] = []
        for d in g.dependents[i]:
            if states[d] in terminal:
                continue
            if passed:
                pending[d] -= 1
                if not pending[d]:
                    released.append(d)
            else:
                # After a stop, every task not started is skipped for the stop's reason.
                skip = (self._blocked(d, i) if self._stopped is None
                        else Skip(d, self._stopped, None, None, None, cause=self._stopped))
                self._record_skip(skip)
                work.append((d, _SKIPPED))
        for d in g.followers[i]:
            if states[d] in terminal:
                continue
            pending[d] -= 1
            if not pending[d]:
                released.append(d)
        return released

    def _fails_check(self, task: int, work: list[tuple[int, State]]) -> bool:
        """Whether released ``task`` fails for a checked prerequisite (queued in ``work``)."""
        bad = tuple(p for p in self._checks.get(task, ())
                    if self.outcome[p] not in ("passed", "deselected"))
        if not bad:
            return False
        first = bad[0]
        cause = self.causes.get(first, "")
        decision = Skip(task, wording.prerequisite_ended(
            self._name(first), self.outcome[first] or "not run", cause), first, first,
            self.outcome[first], failed=bad, root_cause=cause)
        self.fails[task] = decision
        self.outcome[task] = "failed"
        self._new_skips.append(decision)
        work.append((task, State.FAILED))
        return True

    def _blocked(self, task: int, prereq: int) -> Skip:
        """Why ``task`` is skipped because ``prereq`` did not pass."""
        skip = blocked_skip(task, prereq, self.outcome[prereq], self.skips.get(prereq),
                            self._name, self.causes.get(prereq, ""))
        if task in self._sent_ahead:
            skip = replace(skip, ahead=True)
        return skip

    def _record_skip(self, skip: Skip) -> None:
        self.skips[skip.task] = skip
        self.outcome[skip.task] = "skipped"
        self._new_skips.append(skip)

    def _skip(self, i: int, skip: Skip, origin: Worker | None) -> None:
        self._record_skip(skip)
        self._set_terminal(i, State.SKIPPED, origin)

    # ------------------------------------------------------------------ checking

    def _validate_held_ahead(self, i: int) -> None:
        """:meth:`validate` of task ``i``, handed out ahead: each prerequisite ended,
        or runs on its worker (a ``requires`` one passed or runs)."""
        g, state, where = self.graph, self.state, self.where
        w = where.get(i)
        for p in (*g.requires[i], *g.after[i]):
            ps = state[p]
            check(ps in TERMINAL or (ps is State.RUNNING and where.get(p) == w),
                  "task {}, handed out ahead, waits on {}, not running on its worker", i, p)
            if p in g.requires[i]:
                check(ps in (State.PASSED, State.RUNNING),
                      "task {} held ahead although {} did not pass", i, p)

    def validate(self) -> None:
        """Check every invariant; raise AssertionError naming the first broken one.

        Costs O(V + E): meant for tests, after every event.  Placement checks
        its own (resource limits, group bindings).  The per-task checks word
        their message only when one fails (see :func:`check`).
        """
        g = self.graph
        n = len(g)
        state, pending, where, ahead = self.state, self._pending, self.where, self._sent_ahead
        run_policy = self.on_failure == "run"
        terminal = sum(1 for s in state if s in TERMINAL)
        ready = state.count(State.READY)
        check(ready == self._ready_count, "ready count drifted")
        check(terminal == self._terminal_count, "terminal count drifted")
        check(self.done == (terminal == n), "done disagrees with the states")
        for i in range(n):
            st = state[i]
            expected = 0
            for p in g.requires[i]:
                ps = state[p]
                if ps is State.PASSED or (run_policy and ps in TERMINAL):
                    continue
                expected += 1
            expected += sum(1 for p in g.after[i] if state[p] not in TERMINAL)
            if st not in TERMINAL:
                check(pending[i] == expected, "task {}: pending {} != {}", i, pending[i],
                      expected)
                check(pending[i] >= 0, "task {}: negative pending", i)
            if st is State.RUNNING and i in ahead:
                self._validate_held_ahead(i)
            elif st is State.READY or st is State.RUNNING:
                check(expected == 0, "task {} is {} with prerequisites left", i, st.value)
            if st is not State.RUNNING:
                check(i not in ahead, "task {} is {} but marked ahead", i, st.value)
            if st is State.RUNNING:
                check(i in where, "running task {} has no worker", i)
            else:
                check(i not in where, "task {} is {} but placed on a worker", i, st.value)
            if st is State.SKIPPED:
                check(i in self.skips, "skipped task {} has no reason", i)
            if st is State.WAITING and not run_policy:
                for p in g.requires[i]:
                    check(state[p] in _NOT_FAILED, "task {} waits on {} which did not pass",
                          i, p)
        for w, tasks in self._running_on.items():
            for i in tasks:
                check(where.get(i) == w, "task {} misplaced", i)
        self._placement.validate()
        if self._stopped is not None:
            waiting = [i for i in range(n) if self.state[i] in (State.WAITING, State.READY)]
            check(not waiting, f"tasks {waiting} not skipped after the stop")
        if not self.done and not self.where and self._workers:
            live = self.has_ready() or self._placement.has_parked()
            check(live, "run cannot progress: nothing running, nothing ready")
