"""The sentences a user reads that name pytest's side of a run: its options
(``--dag-*``, ``--lf``), its summary sections, the ``dag`` fixture, the stall
report, and the xdist run's header (made where every decision is, ``decide.py``).

Beside the glue that says them, so the core words nothing of pytest;
tests/test_wording.py pins each text.
"""

from __future__ import annotations

import os
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Final

from ..core.wording import plural, some_of


def result_timeout(reader: str, seconds: float) -> str:
    return (f"{reader}: the results of its prerequisites did not arrive from the xdist "
            f"controller within {seconds:g} s")


#: Added to a skip whose root cause is a prerequisite left out of the run.
DESELECTED_HINT: Final = "; add --dag-with-prerequisites to run it"


#: Title of the end-of-run summary section.
SUMMARY_TITLE: Final = "blocked by prerequisites (pytest-dagorder)"


def collection_errors(count: int) -> str:
    """The session's end when declarations are broken, as pytest words it."""
    return f"{plural(count, 'error')} during collection"


def unused_limits_warning(unused: Sequence[str]) -> str:
    """Names given a limit that no test uses: a typo, most likely (serially and under -n)."""
    return (f"dagorder: warning: no test uses {', '.join(map(repr, unused))} "
            "(check the name in --dag-limit / dag_limits)")


def held_together(fixtures: Sequence[str]) -> str:
    """The clause naming the fixture instances that hold tests of a group together
    (where they do, ``--dag-affinity=none`` is never advised: it would split them)."""
    verb = "holds" if len(fixtures) == 1 else "hold"
    return f"{some_of(list(fixtures))} {verb} tests of a group together"


def group_cost(cost: float, wall: float, grouped: float, plain: float,
               groups: Sequence[tuple[str, int, float]], fixtures: Sequence[str] = ()) -> str:
    """Affinity groups raised the lower bound by ``cost`` seconds of a ``wall``-second
    run; ``groups``: (:func:`group_name`, tests, seconds) of those on the critical path;
    ``fixtures``: the fixture instances that hold tests of a group together (then
    ``--dag-affinity=none``, which would split them, is not advised)."""
    named = "; ".join(f"{name} ({plural(size, 'test')}, {secs:.2f} s)"
                      for name, size, secs in groups[:3])
    more = f" and {len(groups) - 3} more" if len(groups) > 3 else ""
    line = (f"dagorder: affinity groups cost at least {cost:.2f} s of this {wall:.2f} s run "
            f"(no schedule beats {grouped:.2f} s with them, {plain:.2f} s without);\n"
            f"  on the critical path: {named}{more}.  --dag-find-missing learns which of "
            "their edges a dependent needs")
    if fixtures:
        return f"{line}; {held_together(fixtures)}"
    return (f"{line}; if these tests share no process state, --dag-affinity=none (or "
            "dag.publish for what they pass on) lifts it")


#: The share by which groups must raise the lower bound before the header
#: says how to learn which are needed (below it, a short header).
ADVICE_SHARE: Final = 0.10


def groups_header(groups: int, held: int, tests: int,
                  cost: tuple[float, float, float] | None, affinity: str = "state",
                  fixtures: Sequence[str] = ()) -> str:
    """What affinity groups keep together, in serial order; ``cost``: (cost, bound
    with them, without) by the recorded durations, if there are any.  Where
    they cost over :data:`ADVICE_SHARE`, the command that learns which are
    needed, and ``--dag-affinity=none`` unless ``fixtures`` (the fixture
    instances two tests of one group share) hold some together."""
    keep = "keeps" if groups == 1 else "keep"
    each = "" if groups == 1 else " each"
    why = ("every declared edge keeps its two tests in one process" if affinity == "state"
           else f"edges inside a {affinity} keep their tests in one process")
    line = (f"dagorder: {plural(groups, 'affinity group')} {keep} {held} of "
            f"{plural(tests, 'test')} on one worker{each}, in serial order ({why})")
    # Groups that cost nothing (rounded): no figure informs.
    if cost is None or round(cost[0], 2) == 0:
        return f"{line}; --dag-explain: each group"
    line += (f"; by the recorded durations they cost {cost[0]:.2f} s (no schedule beats "
             f"{cost[1]:.2f} s with them, {cost[2]:.2f} s without)")
    if cost[0] <= ADVICE_SHARE * cost[2]:
        return f"{line}; --dag-explain: each group"
    line += ("; --dag-find-missing learns which of them a dependent needs (a probe runs "
             "it in a fresh process)")
    if fixtures:
        return f"{line}; {held_together(fixtures)} (--dag-explain: each group)"
    return (f"{line}; if the tests share no process state, --dag-affinity=none lifts this "
            "(--dag-explain: each group)")


#: --dag-explain in a serial run: one process, nothing to keep together.
EXPLAIN_SERIAL = ("dagorder: serial run: every test runs in this process, in dependency "
                  "order; affinity groups form only under -n")


def explain_free(edges: Sequence[tuple[str, str]], affinity: str) -> str:
    """--dag-explain: the edges whose tests may run on different workers."""
    if not edges:
        return "dagorder: no dependency left free: every edge keeps its tests together"
    if affinity == "none":
        why = "--dag-affinity=none: the tests share nothing"
    elif affinity != "state":
        why = f"--dag-affinity={affinity} keeps only edges inside a {affinity}"
    else:
        why = ("the user stated a test shares nothing (dag_shares_nothing), or evidence "
               "showed the dependent passes in a fresh process")
    count = plural(len(edges), "dependency", "dependencies")
    return (f"dagorder: {count} left free "
            f"({why}):\n" + "\n".join(f"    {p} -> {d}" for p, d in edges))


#: The title of the report section naming a prerequisite that ran on another worker.
ELSEWHERE_TITLE = "dagorder"


def ran_elsewhere(prerequisites: Sequence[tuple[str, str]], here: str, affinity: str) -> str:
    """A failed test whose prerequisites (node id, worker; nearest first) ran in
    other worker processes, and the remedy, which the test cannot already follow."""
    if affinity == "none":
        remedy = ("if it reads what they left in the process, drop --dag-affinity=none "
                  "(the default keeps every declared edge's tests on one worker)")
    elif affinity != "state":
        remedy = (f"if it reads what they left in the process, --dag-affinity=state "
                  f"(the default) keeps every declared edge's tests on one worker, "
                  f"{affinity} only those inside a {affinity}")
    else:
        remedy = ("the default keeps every declared edge's tests on one worker, so an edge "
                  "between them was lifted by a dag_shares_nothing mark or by evidence "
                  "(--dag-explain lists the edges left free); if it reads what they left "
                  "in the process, take that mark off, or learn the evidence again "
                  "(--dag-find-missing)")
    ran = "; ".join(f"{nid} ran on worker {worker}" for nid, worker in prerequisites)
    named = "prerequisite" if len(prerequisites) == 1 else "prerequisites"
    return f"{named} {ran}, this test on {here}: {remedy}"


def pulled_back_line(pulled: int, tests: int) -> str:
    """--dag-with-prerequisites brought back tests that "collected N items" does not count."""
    return (f"dagorder: {plural(pulled, 'prerequisite')} pulled back into the run "
            f"(--dag-with-prerequisites): {plural(tests, 'test')} in all")


def shard_failures_rerun(k: int, n: int) -> str:
    """``--lf``, part after part: the failures the loop began with were in parts that ran."""
    return (f"dagorder: shard {k}/{n}: no failure of this part to re-run (--lf): the "
            "failures recorded when this loop over the parts began were in the parts that "
            "ran since; nothing to run, so the part passes")


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


def _span(seconds: float) -> str:
    whole = int(seconds)
    if whole < 60:
        return f"{seconds:.1f} s"
    minutes, rest = divmod(whole, 60)
    return f"{minutes} min {rest} s"


def stall_head(seconds: float) -> str:
    """First line of the stall report (ini dag_stall_report)."""
    return (f"pytest-dagorder: no test has reported for {_span(seconds)}; still waiting "
            "(said again only after another test reports and the run goes quiet again; "
            "-o dag_stall_report=0 turns it off)")


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
    """The watching thread writes the stacks, leaving its own out."""
    return f"stack of {worker} (every thread but the watch's, most recent call first):"


def stall_no_stack(worker: str, why: str) -> str:
    return f"{worker}: no stack: {why}"


#: Why a stall report shows no worker stack.
STALL_NOT_LOCAL: Final = "the worker is not on this machine"


STALL_NO_DUMP: Final = ("the worker wrote no stack since its test started (a test that "
                        "holds the interpreter in a C loop leaves its watch no turn)")


def shard_spec_invalid(spec: str) -> str:
    """``--dag-shard`` was not ``K/N`` with ``1 <= K <= N``."""
    return (f"--dag-shard {spec!r} is not valid; write K/N with N a whole number of at "
            "least 1 and K from 1 to N, e.g. --dag-shard 2/4")


#: Title of the summary section ``--dag-explain`` adds: each test's moves.
EXPLAINED_TITLE: Final = "why tests waited or did not run (pytest-dagorder --dag-explain)"
def story_title(test: str) -> str:
    """Title of the summary section ``--dag-explain=TEST_ID`` adds."""
    return f"the story of {test} (pytest-dagorder --dag-explain)"


def explain_not_a_test(value: str) -> str:
    """--dag-explain given a value that is no node id."""
    return (f"--dag-explain={value!r} is not a test id; name one test as path::name, "
            "or give --dag-explain alone to explain the whole run")


def explain_unknown(test: str, close: Sequence[str]) -> str:
    """--dag-explain=TEST_ID naming no collected test; ``close``: ids like it."""
    near = f"; did you mean {' or '.join(map(repr, close))}?" if close else ""
    return (f"--dag-explain={test!r} names no selected test{near} "
            "(pytest --collect-only -q lists the node ids)")


#: After a grouped test's start that other workers' starts went before.
FOR_ITS_GROUP: Final = " (kept for its affinity group's worker)"
def edges_file_line(path: str, found: bool, edges: int, resources: int, stale: int) -> str:
    """What the edges file (``--dag-edges``) added to the run, for its header."""
    if not found:
        return f"dagorder: no edges file at {path} yet (--dag-find-missing writes one)"
    note = (f"dagorder: {edges} edge{'s' * (edges != 1)} and {resources} "
            f"resource{'s' * (resources != 1)} from {os.path.basename(path)}")
    if stale:
        note += f" ({stale} entr{'ies' if stale != 1 else 'y'} naming tests not collected here)"
    return note


def xdist_header(tests: int, edges: int, chain: int, affinity: str, groups: int,
                 recorded: int, nodes: int) -> str:
    """``recorded`` of the graph's ``nodes`` have a recorded duration (0: ranked by counts)."""
    ranked = (f"recorded durations of {recorded}/{plural(nodes, 'test')}" if recorded
              else "test counts")
    return (f"dagorder: {plural(tests, 'test')}, "
            f"{plural(edges, 'dependency', 'dependencies')}, longest chain {chain}; "
            f"xdist scheduling, affinity {affinity} ({plural(groups, 'group')}); "
            f"critical path by {ranked}")


def exclusive_header(tests: int) -> str:
    """The tests marked ``dag_exclusive``: nothing else runs beside them."""
    return (f"dagorder: {plural(tests, 'test')} run alone (dag_exclusive): nothing else "
            "runs meanwhile")


#: A rootdir and its ini file (None: none).
RootAndIni = tuple[Path, Path | None]


def path_value_taken(option: str, value: str,
                     moved: tuple[RootAndIni, RootAndIni] | None) -> str:
    """``option value`` (space form) whose value pytest took for a test path:
    among the test paths (``moved`` None), or where it looked for the rootdir
    (``moved``: the rootdir and ini file found, and those meant)."""
    if moved is None:
        where = "collects it as a test path"
    else:
        (root, ini), (meant_root, meant_ini) = moved
        where = (f"looked for the rootdir there: rootdir {root} instead of {meant_root}, "
                 f"ini file {ini or 'none'} instead of {meant_ini or 'none'}")
    return (f"{option} {value}: pytest takes a value in this form for a test path too, and "
            f"{where}; write {option}={value}")


def strict_problem(what: str) -> str:
    """ini dag_strict: what the original plugin would skip or warn through, as an error."""
    return (f"{what} (dag_strict: an error here; the original plugin would skip or warn "
            "and go on)")


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
