"""Every sentence a user reads about the graph's decisions: skips, stops, the
summary, the groups, the shards, published values.

Pure, and about the DAG only: it names no pytest option, no other plugin.
The sentences that do live with the layer that owns them
(``options/wording.py``: pytest's options and fixtures; ``declaring/foreign_wording.py``:
pytest-dependency's and pytest-depends' behaviour; ``drivers/distributed/wording.py``:
xdist), so the core, the drivers and the migration layer word a decision
alike: a test skipped by the controller, by a worker that held it, or by the
serial runner reads the same.  tests/test_wording.py pins each text; change
one there and here together.
"""

from __future__ import annotations

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


def plural(n: int, word: str, many: str = "") -> str:
    """``1 test``, ``2 tests``, ``1,200 tests``; ``many``: an irregular plural
    (``dependencies``).  Every count a user reads goes through here."""
    return f"{n:,} {word if n == 1 else many or word + 's'}"


def _because(cause: str) -> str:
    """What ended a test, after its outcome ("" if nothing was said)."""
    return f" ({cause})" if cause else ""


def prerequisite_ended(prereq: str, outcome: str, cause: str = "") -> str:
    """A direct prerequisite that ran (or was never run) and did not pass;
    ``cause``: what ended it, if known."""
    return f"prerequisite {prereq} {PHRASES[outcome]}{_because(cause)}"


def prerequisite_skipped(prereq: str, root: str, root_outcome: str, cause: str = "") -> str:
    """A prerequisite that was itself skipped because ``root`` did not pass."""
    return f"prerequisite {prereq} was skipped: {root} {PHRASES[root_outcome]}{_because(cause)}"


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


def worker_crashed(worker: str, test: str) -> str:
    """Why state a worker's tests left is gone: the worker crashed running ``test``."""
    return f"worker {worker} crashed running {test}"


def prerequisite_state_lost(prereq: str, cause: str) -> str:
    """A prerequisite that passed in a worker process that has crashed since."""
    return (f"prerequisite {prereq} passed on a worker that crashed since ({cause}): "
            "the process state it left died with it")


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



# -- a test's history (the state machine's transitions) ---------------------------


def move(cause: str, by: str | None, worker: str | None, detail: str | None,
         waited: int = 0) -> str:
    """One move of a test, by its cause (a key of the state machine's
    ``TRANSITIONS``): ``released by test_a``, ``held on gw0 for test_a``,
    ``started on gw1 after 3 tests started on other workers``, ``skipped
    because prerequisite test_a failed``; ``worker`` None: not named."""
    on = "" if worker is None else f" on {worker}"
    if cause == "free":
        return "ready at the start (no prerequisite)"
    if cause == "released":
        return f"released by {by}"
    if cause == "put back":
        return f"put back ({worker} left)" if worker is not None else "put back"
    if cause == "held":
        return f"held{on} for {by}" if by is not None else f"held{on}"
    if cause == "started":
        late = (f" after {plural(waited, 'test')} started on other workers" if waited
                else "")
        return f"started{on}{late}"
    if cause == "skipped":
        return f"skipped because {detail}"
    if cause == "failed check":
        return f"failed without running because {detail}"
    outcome = detail or "not run"
    return (outcome if outcome == "passed" else PHRASES.get(outcome, outcome)) + on


def history_line(test: str, moves: Sequence[str]) -> str:
    """--dag-explain: a test and its moves, oldest first."""
    return f"{test}: {'; '.join(moves)}"


#: --dag-explain, when no test was skipped, put back or kept waiting.
NOTHING_TO_EXPLAIN: Final = ("dagorder: no test was skipped, put back or kept waiting "
                             "for its group's worker")

# -- header lines ------------------------------------------------------------------


def serial_header(tests: int, edges: int, chain: int) -> str:
    return (f"dagorder: {plural(tests, 'test')}, "
            f"{plural(edges, 'dependency', 'dependencies')}, longest chain {chain} (serial)")


def limits_header(limits: Mapping[str, int], used: Sequence[str]) -> str:
    """The resource limits in force for the resources some test uses."""
    parts = [f"{name}={limits.get(name, 1)}" for name in used]
    return f"dagorder: resource limits {', '.join(parts)}"



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


def explain_group(first: str, members: Sequence[str], reasons: Sequence[str]) -> str:
    """--dag-explain: one group, why it formed and its tests, in the order they run
    (the serial order: one worker hands them out in it)."""
    why = "; ".join(reasons) or "edges between its tests"
    return (f"dagorder: group of {first} ({plural(len(members), 'test')}): {why}; "
            "they run in this order, on one worker:\n"
            + "\n".join(f"    {m}" for m in members))


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
    return (f"{test} publishes {key!r}: {where} is an int below {lowest}, which cannot "
            "be sent to another process; publish it as a str")


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


def result_no_key(reader: str, target: str, key: object, published: Sequence[str]) -> str:
    have = (f"published only {', '.join(map(repr, published))}" if published
            else "published nothing (or did not pass)")
    return f"{reader} reads {key!r} from {target}, which {have}"


def prerequisite_broken(prereq: str) -> str:
    """--continue-on-collection-errors: a prerequisite left out for its own declaration."""
    return (f"prerequisite {prereq} did not run: its declaration has an error "
            "(see the collection errors)")


def relative_to_rootdir(rootdir: str) -> str:
    """Added to an unknown target spelled as a node id: what its path is read against."""
    return f" (node ids are relative to the rootdir {rootdir})"


