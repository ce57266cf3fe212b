"""Every sentence a user reads about a skip, a stop or the run's summary.

Pure (no pytest), so the core, the drivers and the migration layer word a
decision alike: a test skipped by the controller, by a worker that held it,
or by the serial runner reads the same.  tests/test_wording.py pins each
text; change one there and here together.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import Final, NamedTuple

# How an outcome reads after a test's name ("test_a failed", "test_a was skipped").
PHRASES: Final[Mapping[str, str]] = {
    "failed": "failed",
    "error": "had an error",
    "skipped": "was skipped",
    "xfailed": "xfailed",
    "crashed": "crashed its worker",
    "deselected": "was deselected",
    "not run": "did not run",
    # DagExecutor: a future cancelled before it ran.
    "cancelled": "was cancelled",
}

#: The stop reason when nothing more specific is known.
STOPPED: Final = "run stopped"
#: Why a task of the standalone runner did not start after cancel().
CANCELLED: Final = "cancelled"
#: Added to a skip whose root cause is a prerequisite left out of the run.
DESELECTED_HINT: Final = "; add --dag-with-prerequisites to run it"
#: Title of the end-of-run summary section.
SUMMARY_TITLE: Final = "blocked by prerequisites (pytest-dagorder)"


def plural(n: int, word: str, many: str = "") -> str:
    """``1 test``, ``2 tests``, ``1,200 tests``; ``many``: an irregular plural
    (``dependencies``).  Every count a user reads goes through here."""
    return f"{n:,} {word if n == 1 else many or word + 's'}"



def prerequisite_ended(prereq: str, outcome: str) -> str:
    """A direct prerequisite that ran (or was never run) and did not pass."""
    return f"prerequisite {prereq} {PHRASES[outcome]}"


def prerequisite_skipped(prereq: str, root: str, root_outcome: str) -> str:
    """A prerequisite that was itself skipped because ``root`` did not pass."""
    return f"prerequisite {prereq} was skipped: {root} {PHRASES[root_outcome]}"


def prerequisite_skipped_for(prereq: str, reason: str) -> str:
    """A prerequisite skipped for a reason with no root test (a stop, a cancel)."""
    return f"prerequisite {prereq} was skipped: {reason}"


def prerequisite_module_skipped(module: str, reason: str) -> str:
    """A target inside a module that skipped itself at import (its tests never exist)."""
    return f"prerequisite module {module} was skipped: {reason}"


def target_uncollectable(target: str, module: str, error: str) -> str:
    """A target inside a file that raised or exited when imported (a declaration problem)."""
    return (f"target {target!r} is in {module}, which cannot be collected ({error}); "
            "fix that file or the target")


def stopped_after(task: str, outcome: str) -> str:
    """Policy ``stop``: why every test not yet started is skipped."""
    return f"run stopped after {task} {PHRASES[outcome]}"


def not_run_yet(prereq: str) -> str:
    """Serial run: another plugin moved a test before one of its prerequisites."""
    return f"prerequisite {prereq} has not run yet (tests were reordered)"


def blocked_line(nodeid: str, outcome: str, count: int) -> str:
    """Summary: one root cause and how many tests it blocked."""
    return f"{nodeid} {outcome}: blocked {plural(count, 'test')}"


def listed(nodeid: str) -> str:
    """Summary with ``-v``: one of the tests counted on the line above."""
    return f"  {nodeid}"


def not_started_line(reason: str, count: int) -> str:
    """Summary: tests a stop left unstarted."""
    return f"{reason}: {plural(count, 'test')} not started"


def some_of(names: Sequence[str], shown: int = 3) -> str:
    """Names in a message: all of a few, else the first ``shown`` and how many more."""
    if len(names) <= shown + 1:
        return ", ".join(names)
    return f"{', '.join(names[:shown])} and {len(names) - shown} more"


def collection_errors(count: int) -> str:
    """The session's end when declarations are broken, as pytest words it."""
    return f"{plural(count, 'error')} during collection"


# -- pytest-dependency's runtime depends() -----------------------------------------


def depends_not_passed(test: str, name: str, how: str) -> str:
    return f"{test} depends on {name}, which did not pass{how}"


def depends_no_test(test: str, name: str, scope: str) -> str:
    return (f"{test} depends on {name}, which names no test of this run marked "
            f"with @pytest.mark.dependency in its {scope} scope")


def depends_other_process(test: str, name: str, affinity: str) -> str:
    return (f"{test} depends on {name}, which did not run in this worker process "
            f"before it: a runtime depends() sees only tests of {test}'s own "
            f"affinity group (--dag-affinity={affinity}) that an edge runs first; declare the "
            "dependency with @pytest.mark.dependency(depends=[...]) to have it scheduled")


def depends_not_run_yet(test: str, name: str) -> str:
    return (f"{test} depends on {name}, which has not run yet: a runtime depends() "
            "does not order tests; declare the dependency with "
            "@pytest.mark.dependency(depends=[...]) to have it run first")


#: How a skip for a name that names no test ends; the summary finds the names by it.
UNKNOWN_TAIL = ", which names no test of this run"


def foreign_unknown(test: str, names: list[str], scope: str = "", hint: str = "") -> str:
    """pytest-dependency / pytest-depends: a name that matches nothing skips the dependent."""
    where = f" (scope {scope!r})" if scope and scope != "module" else ""
    return f"{test} depends on {', '.join(map(repr, names))}{UNKNOWN_TAIL}{where}{hint}"


def foreign_itself(test: str, names: list[str]) -> str:
    """pytest-dependency: a test that names itself is skipped (it has no outcome yet)."""
    return (f"{test} depends on {', '.join(map(repr, names))}, itself: pytest-dependency "
            "skips such a test, as it has no outcome before it runs (remove the name)")


def foreign_letters(test: str, depends: str, *, ignore_unknown: bool = False) -> str:
    """pytest-dependency: ``depends='test_a'``, a string it reads letter by letter."""
    then = ("with --ignore-unknown-dependency no letter counts, so the test runs "
            "without prerequisites" if ignore_unknown else
            f"no test is named {depends[0]!r}, so it skips the test")
    return (f"{test} has depends={depends!r}, a string: pytest-dependency reads it letter "
            f"by letter and {then} (write depends=[{depends!r}])")


def foreign_cycle(test: str, target: str, cycle: list[str]) -> str:
    """pytest-dependency: a test whose prerequisite comes later on a cycle is skipped."""
    return (f"{test} depends on {target}, which comes after it on a dependency cycle "
            f"({' -> '.join(cycle)}): pytest-dependency skips such a test (remove one of "
            "these dependencies)")


def foreign_failed(test: str, failed: list[str]) -> str:
    """pytest-depends' ``--failed-dependency-action=fail``: its own message."""
    return f"{test} depends on {', '.join(failed)}"


def unknown_names_line(names: list[str]) -> str:
    """Summary: the names that matched nothing, so a typo is not lost among the skips."""
    return (f"dagorder: tests were skipped for names that match no test: "
            f"{', '.join(map(repr, names))}")


def depends_unmarked(test: str, names: str) -> str:
    return (f"{test} depends on {names}, which is not marked with "
            "@pytest.mark.dependency (mark it, or set automark_dependency = true)")


# -- header lines ------------------------------------------------------------------


def serial_header(tests: int, edges: int, chain: int) -> str:
    return (f"dagorder: {plural(tests, 'test')}, "
            f"{plural(edges, 'dependency', 'dependencies')}, longest chain {chain} (serial)")


def limits_header(limits: Mapping[str, int], used: Sequence[str]) -> str:
    """The resource limits in force for the resources some test uses."""
    parts = [f"{name}={limits.get(name, 1)}" for name in used]
    return f"dagorder: resource limits {', '.join(parts)}"


def unused_limits_warning(unused: Sequence[str]) -> str:
    """Names given a limit that no test uses: a typo, most likely (serially and under -n)."""
    return (f"dagorder: warning: no test uses {', '.join(map(repr, unused))} "
            "(check the name in --dag-limit / dag_limits)")


def exclusive_header(tests: int) -> str:
    return (f"dagorder: {plural(tests, 'test')} run alone (dag_exclusive): nothing else "
            "runs meanwhile")


def runtime_depends_header(modules: int) -> str:
    return (f"dagorder: runtime depends() in {plural(modules, 'module')}: "
            "each runs on one worker, in collection order")


def module_returns_header(modules: Sequence[str]) -> str:
    """The declarations order a test of another module inside each of ``modules``."""
    shown = ", ".join(modules[:3]) + (", ..." if len(modules) > 3 else "")
    return (f"dagorder: {plural(len(modules), 'module')} ({shown}) cannot run in one "
            "stretch: a dependency path leaves each and comes back, so a worker sets "
            "its module fixtures up again")


def module_returns(modules: Sequence[str]) -> str:
    """After the run: workers came back to ``modules`` after leaving them."""
    shown = ", ".join(modules[:3]) + (", ..." if len(modules) > 3 else "")
    return (f"dagorder: a worker came back to {plural(len(modules), 'module')} ({shown}) "
            "after leaving it, so its module fixtures were set up again there: a test "
            "of it became ready late (it waited on another module's) while the other "
            "workers were busy")


def kept_whole_header(dist: str, scopes: int, names: Sequence[str] = ()) -> str:
    """``scopes`` files (loadfile), classes and modules (loadscope) or documents run
    whole; ``names``: the documents' files."""
    if dist == "loadfile":
        what = plural(scopes, "file")
    elif dist == "loadscope":
        what = f"{plural(scopes, 'scope')} (classes, modules)"
    else:
        what = f"{plural(scopes, 'document')} (files of non-Python test items)"
    shown = f": {', '.join(names[:5])}" if names else ""
    more = f" and {len(names) - 5} more" if len(names) > 5 else ""
    return f"dagorder: {what}: each runs on one worker, in collection order{shown}{more}"


def group_name(first: str, label: str | None) -> str:
    """A group as its users know it: by the ``label`` that formed it (an
    ``xdist_group``, a document), else by its first test."""
    return f"the group of {first}" if label is None else label


def group_cost(cost: float, wall: float, grouped: float, plain: float,
               groups: Sequence[tuple[str, int, float]]) -> str:
    """Affinity groups raised the lower bound by ``cost`` seconds of a ``wall``-second
    run; ``groups``: (:func:`group_name`, tests, seconds) of those on the critical path."""
    named = "; ".join(f"{name} ({plural(size, 'test')}, {secs:.2f} s)"
                      for name, size, secs in groups[:3])
    more = f" and {len(groups) - 3} more" if len(groups) > 3 else ""
    return (f"dagorder: affinity groups cost at least {cost:.2f} s of this {wall:.2f} s run "
            f"(no schedule beats {grouped:.2f} s with them, {plain:.2f} s without);\n"
            f"  on the critical path: {named}{more}.  If these tests share no process "
            "state, --dag-affinity=none (or dag.publish for what they pass on) lifts it")


def groups_header(groups: int, held: int, tests: int,
                  cost: tuple[float, float, float] | None) -> str:
    """What affinity groups keep together; ``cost``: (cost, bound with them, without)
    by the recorded durations, if there are any."""
    weighed = ("" if cost is None else
               f"; by the recorded durations they cost {cost[0]:.2f} s (no schedule "
               f"beats {cost[1]:.2f} s with them, {cost[2]:.2f} s without)")
    keep = "keeps" if groups == 1 else "keep"
    return (f"dagorder: {plural(groups, 'affinity group')} {keep} {held} of "
            f"{plural(tests, 'test')} "
            f"on one worker each (a dependent may read what its prerequisites left in the "
            f"process){weighed}; if the tests share no process state, --dag-affinity=none "
            "lifts this (--dag-explain: why each group formed)")


#: --dag-explain in a serial run: one process, nothing to keep together.
EXPLAIN_SERIAL = ("dagorder: serial run: every test runs in this process, in dependency "
                  "order; affinity groups form only under -n")


def explain_group(first: str, members: Sequence[str], reasons: Sequence[str]) -> str:
    """--dag-explain: one group, its tests and why it formed."""
    why = "; ".join(reasons) or "edges between its tests"
    return (f"dagorder: group of {first} ({plural(len(members), 'test')}): {why}\n"
            + "\n".join(f"    {m}" for m in members))


def explain_free(edges: Sequence[tuple[str, str]], affinity: str) -> str:
    """--dag-explain: the edges whose tests may run on different workers."""
    if not edges:
        return "dagorder: no dependency left free: every edge keeps its tests together"
    if affinity == "none":
        why = "--dag-affinity=none: the tests share nothing"
    elif affinity != "state":
        why = f"--dag-affinity={affinity} keeps only edges inside a {affinity}"
    else:
        why = ("no module, shared session or package fixture or written state links "
               "them, or the user stated they share none")
    count = plural(len(edges), "dependency", "dependencies")
    return (f"dagorder: {count} left free "
            f"({why}):\n" + "\n".join(f"    {p} -> {d}" for p, d in edges))


#: The title of the report section naming a prerequisite that ran on another worker.
ELSEWHERE_TITLE = "dagorder"


def ran_elsewhere(prerequisite: str, worker: str, here: str, affinity: str) -> str:
    """A failed test whose prerequisite ran in another worker process, and the remedy."""
    if affinity == "none":
        remedy = ("if it reads what that test left in the process, drop --dag-affinity=none "
                  "(the default keeps such tests on one worker)")
    elif affinity != "state":
        remedy = (f"if it reads what that test left in the process, --dag-affinity=state "
                  f"(the default) keeps more together than {affinity}")
    else:
        remedy = ("if it reads what that test left in the process, have both request one "
                  "session fixture holding it, or pass it with dag.publish")
    return (f"prerequisite {prerequisite} ran on worker {worker}, this test on {here}: "
            f"{remedy}")


def pulled_back_line(pulled: int, tests: int) -> str:
    """--dag-with-prerequisites brought back tests that "collected N items" does not count."""
    return (f"dagorder: {plural(pulled, 'prerequisite')} pulled back into the run "
            f"(--dag-with-prerequisites): {plural(tests, 'test')} in all")


# -- shards and durations files -------------------------------------------------


class Oversized(NamedTuple):
    """A component heavier than a fair share: named by its first node id."""

    first: str
    tests: int
    seconds: float | None


def about(seconds: float) -> str:
    """A recorded total as people read it: ``3 min 12 s``, ``1 h 4 min``, ``0.4 s``."""
    if seconds < 0.1:
        return "under 0.1 s"
    if seconds < 10:
        return f"{seconds:.1f} s"
    whole = round(seconds)
    h, rest = divmod(whole, 3600)
    m, s = divmod(rest, 60)
    if h:
        return f"{h} h {m} min"
    return f"{m} min {s} s" if m else f"{s} s"


def shard_header(k: int, n: int, tests: int, of: int, seconds: float | None,
                 big: Oversized | None, *, selected_elsewhere: bool = False) -> str:
    """``seconds``: the part's recorded total (None: nothing recorded, split by count).

    ``selected_elsewhere``: the part has tests, but none of the selected ones.
    """
    if tests == 0 and of > 0 and selected_elsewhere:
        return (f"dagorder: shard {k}/{n}: 0 of {plural(of, 'selected test')}: they all lie in "
                "other parts; nothing to run, so the part passes")
    if tests == 0 and of > 0:
        return (f"dagorder: shard {k}/{n}: 0 of {plural(of, 'test')}: fewer groups of tests that "
                "must stay together than parts; nothing to run, so the part passes")
    line = f"dagorder: shard {k}/{n}: {tests:,} of {plural(of, 'test')}, " + (
        f"{'' if seconds < 0.1 else 'about '}{about(seconds)} recorded" if seconds is not None
        else "no durations recorded (split by test count)")
    if big is not None:
        size = (f"{'' if big.seconds < 0.1 else 'about '}{about(big.seconds)}"
                if big.seconds is not None else "more")
        line += (f"; the largest component ({plural(big.tests, 'test')} tied to "
                 f"{big.first}) alone takes {size}, over a fair share: no part can be shorter")
    return line


def shard_failures_rerun(k: int, n: int) -> str:
    """``--lf``, part after part: the failures the loop began with were in parts that ran."""
    return (f"dagorder: shard {k}/{n}: no failure of this part to re-run (--lf): the "
            "failures recorded when this loop over the parts began were in the parts that "
            "ran since; nothing to run, so the part passes")


# -- dag.publish / dag.result ------------------------------------------------------

#: What may be published, as the errors list it.
PUBLISHABLE: Final = ("str, bytes, int, float, complex, bool, None, or lists, tuples, dicts "
                      "and sets of those")


def _bytes(n: int) -> str:
    """A limit, in the largest unit it is a whole number of."""
    for unit, size in (("MiB", 1024 * 1024), ("KiB", 1024)):
        if n % size == 0:
            return f"{n // size} {unit}"
    return f"{n:,} bytes"


def publish_bad_key(test: str, key: object) -> str:
    return f"{test} publishes {key!r}: a key must be a non-empty str"


def publish_twice(test: str, key: str) -> str:
    return f"{test} publishes {key!r} twice; publish each key once per test"


def publish_bad_type(test: str, key: str, where: str, type_name: str) -> str:
    """``where`` is the spot inside the value (``value['a'][2]``)."""
    return (f"{test} publishes {key!r}: {where} is a {type_name}, which cannot be sent to "
            f"another process; publish {PUBLISHABLE}")


def publish_int_range(test: str, key: str, where: str, lowest: int) -> str:
    return (f"{test} publishes {key!r}: {where} is an int below {lowest}, which execnet "
            "cannot send; publish it as a str")


def publish_not_utf8(test: str, key: str, where: str) -> str:
    return (f"{test} publishes {key!r}: {where} is a str that cannot be encoded as UTF-8 "
            "(a lone surrogate); publish bytes instead")


def publish_cycle(test: str, key: str, where: str) -> str:
    return f"{test} publishes {key!r}: {where} contains itself; publish a tree of values"


def publish_too_deep(test: str, key: str, depth: int) -> str:
    return f"{test} publishes {key!r}: the value is nested more than {depth} levels deep"


def publish_value_too_big(test: str, key: str, size: int, limit: int) -> str:
    return (f"{test} publishes {key!r}: {size:,} bytes, over the limit of {_bytes(limit)} "
            "per value; publish an id or a file path instead")


def publish_test_too_big(test: str, key: str, total: int, limit: int) -> str:
    return (f"{test} publishes {key!r}: its values would total {total:,} bytes, over the "
            f"limit of {_bytes(limit)} per test; publish ids or file paths instead")


def result_unknown(reader: str, target: str) -> str:
    return (f"{reader} reads dag.result({target!r}): it names no test of this run; name a "
            "test it depends on (a test name, Class::test, a node id or the function)")


def result_ambiguous(reader: str, target: str, names: Sequence[str]) -> str:
    return (f"{reader} reads dag.result({target!r}), which matches {len(names)} tests "
            f"({some_of(list(names))}); pick one instance, e.g. dag.result({names[0]!r})")


def result_not_prerequisite(reader: str, target: str) -> str:
    return (f"{reader} reads the results of {target}, which is not one of its prerequisites: "
            f"it may still be running; declare @depends_on({target!r}) on {reader} "
            "(directly or through another prerequisite)")


def result_ordering_only(reader: str, target: str) -> str:
    """The target runs first only by ``run_after``: it has ended, but need not have passed."""
    return (f"{reader} reads the results of {target}, which runs before it only by "
            "run_after: it may have failed and published nothing, and run_after runs "
            f"{reader} anyway; declare @depends_on({target!r}) on {reader} to read its "
            "results")


def result_no_key(reader: str, target: str, key: object, published: Sequence[str]) -> str:
    have = (f"published only {', '.join(map(repr, published))}" if published
            else "published nothing (or did not pass)")
    return f"{reader} reads {key!r} from {target}, which {have}"


def result_not_requested(reader: str) -> str:
    return (f"{reader} got the dag fixture from request.getfixturevalue(); request it as an "
            "argument of the test (or of a fixture the test uses) so that its prerequisites' "
            "results are sent ahead of it")


def result_no_driver(reader: str) -> str:
    return (f"{reader} uses the dag fixture, but pytest-dagorder does not run this session "
            "(plugin disabled, or the worker was not started by its controller)")


def published_line(test: str, keys: Sequence[str]) -> str:
    """-v summary: which keys a test published (never the values)."""
    return f"{test}: {', '.join(keys)}"


#: Title of the -v section listing published keys.
PUBLISHED_TITLE: Final = "published results, keys only (pytest-dagorder)"


def lf_blocked_line(tests: int) -> str:
    """``--lf`` re-runs tests that did not fail last time: those a prerequisite blocked."""
    return (f"--lf: also {plural(tests, 'test')} skipped last time because a prerequisite "
            "did not pass")


def prerequisite_broken(prereq: str) -> str:
    """--continue-on-collection-errors: a prerequisite left out for its own declaration."""
    return (f"prerequisite {prereq} did not run: its declaration has an error "
            "(see the collection errors)")


def relative_to_rootdir(rootdir: str) -> str:
    """Added to an unknown target spelled as a node id: what its path is read against."""
    return f" (node ids are relative to the rootdir {rootdir})"


def _span(seconds: float) -> str:
    whole = int(seconds)
    if whole < 60:
        return f"{seconds:.1f} s"
    minutes, rest = divmod(whole, 60)
    return f"{minutes} min {rest} s"


def stall_head(seconds: float) -> str:
    """First line of the stall report (--dag-stall-report)."""
    return (f"pytest-dagorder: no test has reported for {_span(seconds)}; still waiting "
            "(this is said once; --dag-stall-report=0 turns it off)")


def stall_worker(worker: str, test: str | None, running: float | None,
                 since: float | None) -> str:
    """What one worker is doing at the stall report; ``since``: wall clock seconds."""
    if test is None:
        return f"{worker}: no test running (between tests or waiting for work)"
    if running is None or since is None:
        return f"{worker}: running {test}"
    clock = time.strftime("%H:%M:%S", time.localtime(since))
    return f"{worker}: running {test} since {clock} ({_span(running)})"


def stall_stack_head(worker: str) -> str:
    return f"stack of {worker} (faulthandler, every thread, most recent call first):"


def stall_no_stack(worker: str, why: str) -> str:
    return f"{worker}: no stack: {why}"


#: Why a stall report shows no worker stack.
STALL_FAULTHANDLER_TIMEOUT: Final = (
    "pytest's faulthandler_timeout owns faulthandler's timer; its dumps go to stderr")
STALL_NOT_LOCAL: Final = "the worker is not on this machine"
STALL_NO_DUMP: Final = ("the worker made no stack dump since its test started (a test or "
                        "plugin may have cancelled faulthandler's timer)")
