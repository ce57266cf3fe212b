"""Test durations recorded in pytest's cache, for critical-path priorities.

A run with the DAG scheduler records how long each test it ran took (setup,
call and teardown together) under one cache key; the next run under xdist
orders ready tests by the longest remaining path in *seconds* instead of in
tests.  That is what shortens the makespan of uneven suites: with counts
only, a chain of two slow tests ranks below a chain of three quick ones.

Everything here degrades to "nothing known": no cache (``-p
no:cacheprovider``), a cache entry that is not what we wrote, or
``--dag-ignore-durations``.  Tests without a record get the mean of the
known ones (see :class:`~pytest_dagorder.core.graph.Graph`).

CI jobs start without the cache, so ``--dag-durations=PATH`` names a JSON
file the repository keeps instead (node id -> seconds: pytest-split's
``.test_durations`` format, read as is).  It is read in place of the cache
and written back only with ``--dag-store-durations``, merged with what it
had, keys sorted and values rounded so that a re-run changes few lines.  A
missing file is a first run; an unreadable one costs a one-line warning,
never the run.
"""

from __future__ import annotations

import json
import os
from collections.abc import Container, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

import pytest

from .settings import settings_of

CACHE_KEY = "dagorder/durations"
#: Decimal places written to a durations file (0.1 ms: finer is noise).
PLACES = 4
_LOADED = pytest.StashKey[dict[str, float]]()


def load(config: pytest.Config) -> dict[str, float]:
    """Recorded seconds per node id; empty if there are none or they are not to be used."""
    if settings_of(config).ignore_durations:
        return {}
    path = settings_of(config).durations_path
    if path is not None:
        if _LOADED not in config.stash:  # read once per process: one warning at most
            record, problem = read_file(path)
            if problem is not None:
                _warn(config, problem)
            config.stash[_LOADED] = record
        loaded: dict[str, float] = config.stash[_LOADED]
        return dict(loaded)
    cache = getattr(config, "cache", None)
    if cache is None:
        return {}
    return _sound(cache.get(CACHE_KEY, None))


def read_file(path: Path) -> tuple[dict[str, float], str | None]:
    """(the usable records in ``path``, why it could not be read or None).

    Missing: nothing recorded yet, no problem.  Entries that are not a
    duration (a hand edit) are left out silently, as in the cache.
    """
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return {}, None
    except (OSError, UnicodeDecodeError) as exc:
        return {}, _unreadable(path, exc.strerror if isinstance(exc, OSError) and exc.strerror
                               else type(exc).__name__)
    try:
        raw = json.loads(text)
    except ValueError as exc:
        return {}, _unreadable(path, f"not JSON ({exc.args[0] if exc.args else exc})")
    if not isinstance(raw, dict):
        return {}, _unreadable(path, "not a JSON object of node id -> seconds")
    return _sound(raw), None


def _unreadable(path: Path, why: str) -> str:
    return (f"dagorder: warning: durations file {str(path)!r} ignored: {why}; "
            "this run goes on without recorded durations")


def _warn(config: pytest.Config, line: str) -> None:
    """One line on the terminal (a worker's would be lost; its controller says it).

    Not a Python warning: ``-W error`` or ``filterwarnings = error`` would
    turn it into a failed run, which a stale file in CI must never cause.
    """
    if hasattr(config, "workerinput"):
        return
    terminal = config.pluginmanager.get_plugin("terminalreporter")
    if terminal is not None:
        terminal.ensure_newline()
        terminal.write_line(line, yellow=True)


@dataclass(frozen=True)
class Suite:
    """The tests that exist, as far as a run that collected all it was pointed at knows.

    A test is known to be gone when it lies under one of the run's arguments
    (``scopes``: paths relative to the rootdir, ``""`` for all of it) and was
    not collected; a test elsewhere may exist.
    """

    ids: frozenset[str]
    scopes: tuple[str, ...]

    def __contains__(self, nodeid: object) -> bool:
        if nodeid in self.ids or not isinstance(nodeid, str):
            return nodeid in self.ids
        path = nodeid.split("::", 1)[0]
        return not any(s == "" or path == s or path.startswith(s + "/") for s in self.scopes)


def suite_of(config: pytest.Config, nodeids: Iterable[str]) -> Suite:
    """The :class:`Suite` of a whole run (see ``Plan.whole``) that collected ``nodeids``."""
    root = config.rootpath.resolve()
    scopes = []
    for arg in config.args:
        path = (config.invocation_params.dir / str(arg).split("::", 1)[0]).resolve()
        if path.is_relative_to(root):
            rel = path.relative_to(root).as_posix()
            scopes.append("" if rel == "." else rel)
    return Suite(frozenset(nodeids), tuple(scopes))


def merged(old: Mapping[str, float], measured: Mapping[str, float],
           suite: Container[str] | None) -> dict[str, float]:
    """What a durations file holds after a run: ``old`` updated with ``measured``.

    ``suite``: every test that exists, when this run collected the whole suite;
    other records are then dropped (tests that no longer exist).  None keeps
    them all (a part of the suite ran: the others may well exist).
    """
    out = {k: v for k, v in old.items() if suite is None or k in suite}
    out.update(measured)
    return {k: round(out[k], PLACES) for k in sorted(out)}


def write_file(path: Path, record: Mapping[str, float]) -> str | None:
    """Write ``record`` (as :func:`merged` made it) to ``path``; why not, if it failed.

    One entry per line, so that a re-run's diff shows only the tests whose
    duration changed; written to a temporary file and renamed, so that a job
    killed halfway leaves the old file whole.
    """
    text = json.dumps(record, indent=2, sort_keys=True) + "\n"
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp.write_text(text, encoding="utf-8")
        os.replace(tmp, path)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        return (f"dagorder: warning: durations file {str(path)!r} not written: "
                f"{exc.strerror or type(exc).__name__}")
    return None


def store(config: pytest.Config, measured: Mapping[str, float],
          suite: Container[str] | None) -> None:
    """``--dag-store-durations``: merge this run's durations into the named file."""
    settings = settings_of(config)
    path = settings.durations_path
    if path is None or not settings.store_durations or hasattr(config, "workerinput"):
        return
    old, _ = read_file(path)  # an unreadable file was warned about at load; rewritten whole
    problem = write_file(path, merged(old, measured, suite))
    if problem is not None:
        _warn(config, problem)


def save(config: pytest.Config, measured: Mapping[str, float],
         suite: Container[str] | None = None) -> None:
    """Merge ``measured`` into the record (tests not run this time keep theirs).

    The cache is always written; the durations file with ``--dag-store-durations``
    (``suite``: see :func:`merged`).
    """
    store(config, measured, suite)
    cache = getattr(config, "cache", None)
    if cache is None or not measured:
        return
    record = _sound(cache.get(CACHE_KEY, None))
    # Rounded to 0.1 ms: finer is noise, and the file stays small for big suites.
    record.update((k, round(v, 4)) for k, v in measured.items())
    cache.set(CACHE_KEY, record)


def _sound(raw: object) -> dict[str, float]:
    """The usable part of a cache entry: a hand-edited one must not break the run."""
    if not isinstance(raw, dict):
        return {}
    # Exact types (JSON gives no subclasses; bool is not a duration), and a
    # range test that NaN, infinity and an int too big for a float fail: no
    # call per entry but float().
    return {
        k: float(v)
        for k, v in raw.items()
        if type(k) is str and type(v) in _NUMBERS and 0 <= v < _LONGEST
    }


_NUMBERS = (int, float)
_LONGEST = 1e12  # seconds: longer is no test's duration
