"""Test durations recorded in pytest's cache, for critical-path priorities.

A run with the DAG scheduler records how long each test it ran took (setup,
call and teardown together) under one cache key; the next run under xdist
orders ready tests by the longest remaining path in *seconds* instead of in
tests.  That is what shortens the makespan of uneven suites: with counts
only, a chain of two slow tests ranks below a chain of three quick ones.

Everything here degrades to "nothing known": no cache (``-p
no:cacheprovider``), a cache entry that is not what we wrote, or
``--dag-durations=none``.  Tests without a record get the mean of the
known ones (see :class:`~pytest_dagorder.core.graph.Graph`).

CI jobs start without the cache, so ``--dag-durations=PATH`` names a JSON
file the repository keeps instead (node id -> seconds: pytest-split's
``.test_durations`` format, read as is; relative to the rootdir).  It is
read in place of the cache and written back only with
``--dag-store-durations``, merged with what it holds when the run ends,
keys sorted, measured values rounded and the file's own layout kept, so
that a re-run changes few lines.  A missing file is a first run; an
unreadable one, or records that are not durations, cost a one-line warning
each, never the run, unless the run would write the file: a file not read
whole is never written (a usage error before any test runs).
"""

from __future__ import annotations

import codecs
import functools
import hashlib
import json
import os
from collections.abc import Container, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from ..core.wording import plural
from ..options.settings import settings_of
from ..shims.pytest_internals import LASTFAILED_KEY

CACHE_KEY = "dagorder/durations"
#: Decimal places written to a durations file (0.1 ms: finer is noise).
PLACES = 4
_LOADED = pytest.StashKey["Read"]()


def load(config: pytest.Config) -> dict[str, float]:
    """Recorded seconds per node id; empty if there are none or they are not to be used."""
    if settings_of(config).ignore_durations:
        return {}
    path = settings_of(config).durations_path
    if path is not None:
        return dict(_read_once(config, path).records)
    cache = getattr(config, "cache", None)
    if cache is None:
        return {}
    return _sound(cache.get(CACHE_KEY, None))


def _read_once(config: pytest.Config, path: Path) -> Read:
    """The durations file as this process first read it (one reading, one verdict)."""
    if _LOADED not in config.stash:
        config.stash[_LOADED] = read_file(path)
    return config.stash[_LOADED]


@dataclass(frozen=True)
class Layout:
    """How a durations file is written, so that a rewrite keeps it (and its diffs small).

    pytest-split writes an object with four spaces and no final newline; an
    older pytest-split wrote a list of ``[node id, seconds]`` pairs.
    """

    indent: int | str = 2
    newline: bool = True
    bom: bool = False
    pairs: bool = False

    def dump(self, record: Mapping[str, float]) -> str:
        body: object = [[k, v] for k, v in record.items()] if self.pairs else record
        text = json.dumps(body, indent=self.indent, sort_keys=not self.pairs)
        return ("\ufeff" if self.bom else "") + text + ("\n" if self.newline else "")


@dataclass(frozen=True)
class Read:
    """What reading a durations file gave.

    ``problem``: why the file as a whole could not be read (None: read, or
    missing); ``dropped``: the keys of entries that are not a duration.
    """

    records: dict[str, float] = field(default_factory=dict)
    problem: str | None = None
    dropped: tuple[str, ...] = ()
    layout: Layout = Layout()
    exists: bool = False
    #: The entries the file holds (read or dropped).
    entries: int = 0

    @property
    def whole(self) -> bool:
        """Every entry was read: writing the file back loses nothing."""
        return self.problem is None and not self.dropped


def read_file(path: Path) -> Read:
    """Read a durations file: a JSON object of node id -> seconds (or a list of pairs).

    Missing: nothing recorded yet, no problem.  A UTF-8 byte order mark is
    accepted (and kept on rewrite).
    """
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return Read()
    except OSError as exc:
        return Read(problem=exc.strerror or type(exc).__name__, exists=True)
    bom = data.startswith(codecs.BOM_UTF8)
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError:
        return Read(problem="not UTF-8 text", exists=True)
    twice: list[str] = []
    try:
        raw = json.loads(text, object_pairs_hook=functools.partial(_unique, twice))
    except ValueError as exc:
        return Read(problem=f"not JSON ({exc.args[0] if exc.args else exc})", exists=True)
    pairs = isinstance(raw, list)
    if pairs and all(isinstance(e, list) and len(e) == 2 and type(e[0]) is str for e in raw):
        twice += _repeated([e[0] for e in raw])
        raw = dict(raw)
    elif not isinstance(raw, dict):
        return Read(problem="not a JSON object of node id -> seconds", exists=True)
    if twice:  # json keeps the last: a rewrite would lose the others
        return Read(problem=f"node id {twice[0]!r} is recorded twice", exists=True)
    records = _sound(raw)
    dropped = tuple(str(k) for k in raw if k not in records)
    return Read(records, None, dropped, _layout(text, bom, pairs), True, len(raw))


def _unique(twice: list[str], pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    twice += _repeated([k for k, _ in pairs])
    return dict(pairs)


def _repeated(keys: list[str]) -> list[str]:
    seen: set[str] = set()
    out = []
    for k in keys:
        if k in seen:
            out.append(k)
        seen.add(k)
    return out


def _layout(text: str, bom: bool, pairs: bool) -> Layout:
    """The file's indentation (its first indented line's), final newline, mark and shape."""
    # A file all on one line gets one entry a line (the default indentation):
    # the diffs of a re-run stay small.
    indent: int | str = 2
    for line in text.splitlines()[1:]:
        stripped = line.lstrip(" \t")
        if stripped and stripped != line:
            lead = line[:len(line) - len(stripped)]
            indent = len(lead) if lead == " " * len(lead) else lead
            break
    return Layout(indent, text.endswith("\n") or "\n" not in text.strip(), bom, pairs)


def problems(config: pytest.Config) -> list[str]:
    """The warning lines about the durations a run reads, for the terminal (the
    same in a serial run and on an xdist controller)."""
    settings = settings_of(config)
    path = settings.durations_path
    if settings.ignore_durations:
        return []
    out = []
    # Of a file not read whole, the lines below say it already.
    if (settings.shard is not None and settings.shard[1] > 1
            and not split_basis(config).durations
            and (path is None or _read_once(config, path).whole)):
        where = (f"durations file {str(path)!r} " + (
            "holds none" if _read_once(config, path).exists else "does not exist")
            if path is not None else "pytest's cache holds none")
        out.append(f"dagorder: warning: --dag-shard {settings.shard[0]}/{settings.shard[1]} "
                   f"without recorded durations ({where}): the parts are balanced by test "
                   "count; record them with --dag-durations=PATH --dag-store-durations")
    if path is None:
        return out
    read = _read_once(config, path)
    if not read.exists:
        out.append(f"dagorder: no durations file at {path} yet " + (
            "(this run writes it)" if settings.store_durations
            else "(--dag-store-durations writes one)"))
    if read.problem is not None:
        out.append(f"dagorder: warning: durations file {str(path)!r} ignored: {read.problem}; "
                   "this run goes on without recorded durations")
    if read.dropped:
        out.append(wording_dropped(path, read))
    return out


def wording_dropped(path: Path, read: Read) -> str:
    shown = ", ".join(repr(k) for k in read.dropped[:SHOWN])
    more = f" and {len(read.dropped) - SHOWN:,} more" if len(read.dropped) > SHOWN else ""
    return (f"dagorder: warning: durations file {str(path)!r}: {len(read.dropped):,} of "
            f"{plural(read.entries, 'record')} ignored, not a duration in seconds (a number from 0 "
            f"up): {shown}{more}")


#: Node ids a warning about dropped records names before "and N more".
SHOWN = 3


def refuse_unread(config: pytest.Config) -> None:
    """``--dag-store-durations`` on a file not read whole: a usage error, before any test runs.

    Writing it back would drop what could not be read (a file of 500 records
    with one typo would keep one).
    """
    settings = settings_of(config)
    path = settings.durations_path
    if path is None or not settings.store_durations:
        return
    if not path.parent.is_dir():
        # Never made: a typo in the path would write outside the project.
        missing = path.parent
        while not missing.parent.is_dir() and missing.parent != missing:
            missing = missing.parent
        raise pytest.UsageError(
            f"--dag-store-durations cannot write durations file {str(path)!r}: directory "
            f"{str(missing)!r} does not exist; create it, or name a file in an existing one")
    read = _read_once(config, path)
    if read.whole:
        return
    why = read.problem if read.problem is not None else (
        f"{len(read.dropped):,} of {plural(read.entries, 'record')} are not a duration in seconds "
        f"(a number from 0 up): {', '.join(repr(k) for k in read.dropped[:SHOWN])}"
        + (" ..." if len(read.dropped) > SHOWN else ""))
    raise pytest.UsageError(
        f"--dag-store-durations would overwrite durations file {str(path)!r}, which it "
        f"cannot read whole: {why}; fix the file (or move it away to start a new one) "
        "and run again")


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


def announce(config: pytest.Config, lines: Iterable[str]) -> None:
    """Write warning lines (see :func:`_warn`)."""
    for line in lines:
        _warn(config, line)


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
    # Only what was measured is rounded: a record kept is written as it was read.
    out.update((k, round(v, PLACES)) for k, v in measured.items())
    return {k: out[k] for k in sorted(out)}


def write_file(path: Path, record: Mapping[str, float], layout: Layout = Layout()) -> str | None:
    """Write ``record`` (as :func:`merged` made it) to ``path``; why not, if it failed.

    One entry per line (in ``layout``, the file's own), so that a re-run's
    diff shows only the tests whose duration changed; written to a temporary
    file in the same directory and renamed over, so that a job killed halfway
    leaves the old file whole.
    """
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        tmp.write_bytes(layout.dump(record).encode("utf-8"))
        os.replace(tmp, path)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        return (f"dagorder: warning: durations file {str(path)!r} not written: "
                f"{exc.strerror or type(exc).__name__}")
    return None


def store(config: pytest.Config, measured: Mapping[str, float],
          suite: Container[str] | None) -> None:
    """``--dag-store-durations``: merge this run's durations into the named file.

    The file is read again now (another run may have written it since this
    one started) and written only if every record in it is read: a file
    that could not be read at the start stopped the run before any test
    (:func:`refuse_unread`); one spoilt since is left as it is, with a warning.
    """
    settings = settings_of(config)
    path = settings.durations_path
    if path is None or not settings.store_durations or hasattr(config, "workerinput"):
        return
    now = read_file(path)
    if not now.whole:
        why = now.problem if now.problem is not None else (
            f"{plural(len(now.dropped), 'record')} "
            f"{'is' if len(now.dropped) == 1 else 'are'} not a duration in seconds")
        _warn(config, f"dagorder: warning: durations file {str(path)!r} not written: it "
                      f"changed during the run and cannot be read whole now ({why})")
        return
    layout = now.layout if now.exists else Layout()
    record = merged(now.records, measured, suite)
    problem = write_file(path, record, layout)
    if problem is not None:
        _warn(config, problem)
        return
    terminal = config.pluginmanager.get_plugin("terminalreporter")
    if terminal is not None:
        terminal.ensure_newline()
        terminal.write_line(f"dagorder: durations of {plural(len(measured), 'test')} written to "
                            f"{path} ({plural(len(record), 'record')} in the file)")
    if settings.shard is not None:
        _split_file_written(config, path)


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


# -- the durations a split is cut by ------------------------------------------------
#
# A loop over the parts in one checkout (``for k in 1 2 3; do pytest
# --dag-shard $k/3; done``) writes durations after every part: to the cache,
# and with --dag-store-durations to the file.  Cut from those, part 2 would
# come from another split than part 1.  So the durations a split uses are
# kept in the cache, with the parts that ran since they were taken, until
# all N parts ran; then the next part takes the current ones.  A file that
# changed otherwise than by a run of this loop (a commit, a checkout) starts
# a new loop at once.  Every process of a run reads the same entry (the
# workers after the controller wrote it at configure).

SPLIT_KEY = "dagorder/split"


def _split_key(parts: int) -> str:
    """One entry per number of parts: loops of different N in one checkout
    (``--dag-shard 1/2``, then 1/3 .. 3/3, then 2/2) each keep their own split."""
    return f"{SPLIT_KEY}/{parts}"


@dataclass(frozen=True)
class SplitBasis:
    """What ``--dag-shard`` cuts by: the durations, and whether the loop began with
    failures recorded (see :func:`~pytest_dagorder.features.sharding.apply`)."""

    durations: dict[str, float]
    failures_at_start: bool = False


_BASIS = pytest.StashKey[SplitBasis]()


def _source(config: pytest.Config) -> str:
    settings = settings_of(config)
    if settings.ignore_durations:
        return "ignored"
    return str(settings.durations_path) if settings.durations_path is not None else "cache"


def _digest(path: Path | None) -> str:
    if path is None:
        return ""
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError:
        return ""


def failures_recorded(config: pytest.Config) -> bool:
    """Whether pytest's ``--lf`` set holds any test (the cache provider's own key)."""
    cache = getattr(config, "cache", None)
    return bool(cache is not None and cache.get(LASTFAILED_KEY, {}))


def _entry(config: pytest.Config, parts: int) -> dict[str, Any] | None:
    """The cache's split entry if it is for ``parts`` parts from this run's source."""
    cache = getattr(config, "cache", None)
    if cache is None:
        return None
    entry = cache.get(_split_key(parts), None)
    if (not isinstance(entry, dict) or entry.get("parts") != parts
            or entry.get("source") != _source(config)
            or not isinstance(entry.get("ran"), list)
            or not isinstance(entry.get("durations"), dict)):
        return None
    return entry


def split_basis(config: pytest.Config) -> SplitBasis:
    """The durations ``--dag-shard`` cuts by in this run (taken once per process)."""
    found = config.stash.get(_BASIS, None)
    if found is not None:
        return found
    k, n = settings_of(config).shard or (1, 1)
    entry = _entry(config, n)
    if hasattr(config, "workerinput"):  # the controller settled the entry at configure
        basis = (SplitBasis(_sound(entry["durations"]), bool(entry.get("lastfailed")))
                 if entry is not None else SplitBasis(load(config), failures_recorded(config)))
        config.stash[_BASIS] = basis
        return basis
    path = settings_of(config).durations_path
    digest = _digest(path)
    ran = {r for r in entry["ran"] if type(r) is int and 1 <= r <= n} if entry else set()
    if entry is not None and len(ran) < n and entry.get("file") == digest:
        basis = SplitBasis(_sound(entry["durations"]), bool(entry.get("lastfailed")))
        ran.add(k)
    else:
        basis = SplitBasis(load(config), failures_recorded(config))
        ran = {k}
    cache = getattr(config, "cache", None)
    if cache is not None:
        cache.set(_split_key(n), {"parts": n, "source": _source(config), "ran": sorted(ran),
                              "file": digest, "lastfailed": basis.failures_at_start,
                              "durations": basis.durations})
    config.stash[_BASIS] = basis
    return basis


def _split_file_written(config: pytest.Config, path: Path) -> None:
    """This loop wrote the file: its next part still cuts by the loop's durations."""
    shard = settings_of(config).shard
    cache = getattr(config, "cache", None)
    if shard is None or cache is None:
        return
    entry = _entry(config, shard[1])
    if entry is not None:
        cache.set(_split_key(shard[1]), {**entry, "file": _digest(path)})


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
