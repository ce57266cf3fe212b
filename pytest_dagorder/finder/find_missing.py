"""``--dag-find-missing``: find the prerequisites and shared resources a suite never declared.

The session collects and plans as usual, then runs no test in-process:
every question is a probe, a fresh pytest process that runs a chosen list
of node ids in serial order and reports each test's outcome (see
``probe_plugin.py``).  In turn:

1. the serial pass: the selection as one probe, which also records the
   paths each test touches.  A suite that does not pass serially is refused
   with the list of its failing tests: there is no order to restore.
2. screening: the tests in batches, each batch in reverse serial order, so
   that no test runs after the tests it could need; a test that fails there
   is searched.  A test whose declared prerequisites changed no process
   state (any test, where none wrote a path or reached a service) also runs
   alone in a fresh process right before its place there: the check of its
   declared edges (``_edges_pass``; the others' runs alone follow a serial
   prefix, beside the screening).  Where no test the serial pass ran so far
   wrote a path or reached a service, the probe slot it leaves free screens
   those tests while it runs (``_screen_beside``), each alone only.
3. the search (``core/missing.needed``): the tests of its serial prefix it
   needs, by bisection, as many probes at once as ``-n`` says.  The serial
   pass's record narrows it first: the tests that wrote a path the test
   touched, or changed the environment or a module-level value below the
   rootdir, are searched alone when the test passes after them (short
   probes); otherwise the whole prefix is.  A found set
   is then run in one process and the test in the next: if the test fails,
   it reads what they left in the process (a global, an environment
   variable) and must share their worker.  The serial pass settles it
   without a probe where it saw only files or only process state change.
4. conflicts: pairs of tests that touch one path (one of them writing) and
   that no edge orders are run at the same time on purpose, two processes
   held at a shared start line before the two tests; a pair where one fails
   is reported with a resource name.

Probes never touch the project: each runs in a copy of the rootdir (one per
probe slot, reset to the original before each probe) with its own
temporary directory, and writes no cache, durations or JUnit XML.  Test
files are never edited; what was found is printed as the declarations to
add, and written to the ``--dag-edges`` file when one is named.
"""

from __future__ import annotations

import concurrent.futures as cf
import contextlib
import importlib.util
import json
import marshal
import os
import queue
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import types
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

import pytest

from ..core.affinity import state_partition
from ..core.missing import (
    NotReproducible,
    SearchStopped,
    Touches,
    conflict_candidates,
    implied,
    needed,
    ordered,
    resource_name,
    writers,
)
from ..core.wording import plural
from ..declaring import edges_file, evidence
from ..migration.order import ordinal_of
from ..options.markers import RESOURCE
from ..options.settings import DRIVER_NAME, ENVIRONMENT, Settings, edges_path, settings_of
from ..shims.pytest_internals import fixture_files, wide_fixtures
from . import probe_plugin, work_folder

#: Folders a probe's copy of the rootdir leaves out (version control, virtual
#: environments, caches): large, and no test reads them.
SKIPPED_DIRS: Final = frozenset({
    ".git", ".hg", ".svn", ".tox", ".nox", ".venv", "venv", "node_modules", "__pycache__",
    ".pytest_cache", ".mypy_cache", ".ruff_cache", ".hypothesis"})
#: Batches per probe slot in the screening: small enough that a failure
#: shows in a short run, few enough that process start-up stays a minor cost.
BATCHES_PER_SLOT: Final = 2
#: Unless the batches with their tests' declared prerequisites run more than
#: this many tests per test screened: then one batch per slot.
SCREEN_WORK: Final = 1.5
#: The screening's batches are whole components of the declared graph (each
#: test run once) unless taking the targets in turn ends sooner than this many
#: times their estimated end: those batches repeat the shared prerequisites,
#: CPU the edge runs beside them and a shared machine's other jobs want.
SCREEN_SLACK: Final = 1.1
#: Seconds a test's run costs a batch beyond its serial duration (its protocol,
#: a child's fork), so that tests of a few milliseconds, whose measured
#: durations are mostly noise, are weighed by their count.
SCREEN_TEST_COST: Final = 0.01
#: Attempts at overlapping a candidate pair before it counts as compatible.
OVERLAP_ATTEMPTS: Final = 2
#: At most this many candidate pairs are overlapped (ranked, see
#: ``core/missing.conflict_candidates``), at most ``PAIRS_PER_PATH`` of one path
#: (a clash on a path makes every test that writes it carry the resource).
MAX_PAIRS: Final = 60
PAIRS_PER_PATH: Final = 2
#: A probe that runs longer than this many serial passes (plus a start-up
#: allowance) is stopped and counts as failed.  The serial pass itself has no
#: such limit (nothing measured it yet): it is stopped only when no test ended
#: for ``SERIAL_IDLE`` seconds, and that is reported as a timeout.
PROBE_TIMEOUT_FACTOR: Final = 3.0
PROBE_TIMEOUT_ALLOWANCE: Final = 30.0
SERIAL_IDLE: Final = 600.0
#: A test run alone in the edge pass may take this many times its serial
#: duration (plus the allowance) before it is stopped.
ALONE_FACTOR: Final = 5.0
PROGRESS_EVERY: Final = 2.0
#: Serial seconds of tests the screening beside the serial pass runs in one probe
#: (:meth:`MissingFinder._screen_beside`; a longer test runs alone in one): the
#: screening after the pass waits for the last one's slot, so short, and long
#: enough that a probe's start is a minor cost.
BESIDE_CHUNK: Final = 2.0
#: The screening beside the serial pass stops once its runs alone took this many
#: times the pass's seconds for the same tests: where each fresh process sets the
#: suite's application up again (slurk), those runs take more CPU from the pass
#: than they save after it; where a fresh process costs little (pynurbs), they go on.
BESIDE_COST: Final = 2.0
#: How long a probe waits for a busy slot before the slots :meth:`MissingFinder._widen`
#: held back start after all: a few start-ups' worth, so a suite of short probes
#: stays on one slot, while a probe that runs long (a test that waits in a probe,
#: till its time runs out) no longer holds every other search up behind it.
WIDEN_WAIT: Final = 3.0
#: The group of the tests the probes do not repeat (see ``Findings.unreproducible``).
OUTSIDE_GROUP: Final = "state outside the rootdir"
#: Tests named per list of the report (the rest are counted).
SHOWN: Final = 10
#: How often a probe's wait looks at the stop flag (Ctrl-C, the budget).
POLL: Final = 0.2
#: Attempts at removing a work folder whose processes were just killed (:func:`_remove`).
REMOVE_TRIES: Final = 10

_Write = Callable[[str], None]


class ProbeTimedOut(SearchStopped):
    """A probe of a search ran past its time: the test is left unsearched (reported)."""


#: The key a probe's results carry when the probe was stopped by its time.
KILLED: Final = "\0killed"


class ProbeError(Exception):
    """A probe process could not run the tests at all (its output's tail in ``args[0]``)."""


def _reached(start: int, next_of: Callable[[int], Iterable[int]]) -> set[int]:
    """Every test reached from ``start`` by ``next_of`` (a test's prerequisites,
    or its neighbours), transitively; ``start`` only if a path leads back to it."""
    seen: set[int] = set()
    stack = [start]
    while stack:
        for v in next_of(stack.pop()):
            if v not in seen:
                seen.add(v)
                stack.append(v)
    return seen

@dataclass(frozen=True, slots=True)
class Result:
    outcome: str
    touches: Touches
    #: The test changed the environment or a module-level value below the rootdir.
    state: bool = False
    seconds: float = 0.0
    #: The addresses the test connected to (``host:port``, a socket's path).
    services: frozenset[str] = frozenset()
    #: The tests its run-time ``depends()`` calls waited for (pytest-dependency).
    waits: tuple[str, ...] = ()
    #: Of ``state``: the environment or a value of a test module or ``conftest.py``
    #: (not only the suite's own package's lazy set-up); a record without it: ``state``.
    tests_state: bool = False


FAILED: Final = Result("failed", Touches())


class Sandbox:
    """A copy of the rootdir where probes run, put back as it was before each one."""

    def __init__(self, origin: Path, where: Path, *, made: bool = False,
                 seconds: float = 0.0) -> None:
        """``made``: the copy is there already (:func:`_copy_tree` made it, in
        ``seconds``)."""
        self.origin = origin
        # The copy's folder has the original's name: with an ``__init__.py`` in
        # the rootdir, pytest names the package after it (node ids of doctests).
        self.root = where / (origin.name or "root")
        self.tmp = where / ".dagorder-tmp"
        #: How long making the copy took (:func:`work_folder.memory_hint`).
        self.seconds = seconds
        if not made:
            began = time.monotonic()
            _copy_tree(origin, self.root)
            self.seconds = time.monotonic() - began
        self.files: dict[str, tuple[int, int]] = {}
        self.dirs: set[str] = set()
        for rel, st in self._walk():
            if st is None:
                self.dirs.add(rel)
            else:
                self.files[rel] = (st.st_size, st.st_mtime_ns)
        self.tmp.mkdir(exist_ok=made)
        #: The collected process that forks this sandbox's probes (None: not started).
        self.server: Server | None = None
        #: How the last probe's process ended where it ended abnormally (None
        #: where it ended as usual).
        self.ended: Ending | None = None

    def _walk(self, top: Path | None = None) -> list[tuple[str, os.stat_result | None]]:
        """What the copy's record holds of ``top`` (the copy; the original for
        :meth:`refresh`): each folder (None) and file (its ``lstat``) relative to
        it, folders before what they hold, less :data:`SKIPPED_DIRS` and (in the
        original: the copy has none) virtual environments, as :func:`_ignored`."""
        top = self.root if top is None else top
        out: list[tuple[str, os.stat_result | None]] = []
        for dirpath, dirnames, filenames in os.walk(top):
            dirnames[:] = [d for d in dirnames if d not in SKIPPED_DIRS and (
                top == self.root or not os.path.exists(os.path.join(dirpath, d, "pyvenv.cfg")))]
            base = os.path.relpath(dirpath, top)
            for d in dirnames:
                out.append((os.path.normpath(os.path.join(base, d)), None))
            for f in filenames:
                rel = os.path.normpath(os.path.join(base, f))
                out.append((rel, os.lstat(os.path.join(dirpath, f))))
        return out

    def copied(self) -> work_folder.Copied:
        """What making the copy took (its files and bytes as first recorded)."""
        return work_folder.Copied(self.seconds, len(self.files),
                                  sum(size for size, _ in self.files.values()))

    def drop(self, paths: Sequence[str]) -> None:
        """Leave these files (relative to the rootdir) out of the copy for good."""
        for rel in paths:
            (self.root / rel).unlink(missing_ok=True)
            self.files.pop(os.path.normpath(rel), None)

    def reset(self) -> None:
        seen: set[str] = set()
        for rel, st in self._walk():
            path = self.root / rel
            if st is None:
                if rel not in self.dirs and path.exists():
                    shutil.rmtree(path, ignore_errors=True)
                continue
            seen.add(rel)
            if (st.st_size, st.st_mtime_ns) != self.files.get(rel):
                path.unlink(missing_ok=True)
                if rel in self.files:
                    shutil.copy2(self.origin / rel, path, follow_symlinks=False)
        for rel in self.files.keys() - seen:
            (self.root / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(self.origin / rel, self.root / rel, follow_symlinks=False)
        shutil.rmtree(self.tmp, ignore_errors=True)
        self.tmp.mkdir()

    def refresh(self, *, apply: bool = True) -> bool:
        """The copy made anew where the original changed since it was made (a copy
        made as the command line was parsed, :func:`copy_early`: what the
        conftests and plugins wrote in the rootdir since then, as they started),
        its record with it, as if it were made now; whether anything changed
        (``apply=False``: only that, the copy left as it is)."""
        now: dict[str, os.stat_result] = {}
        changed = False
        for rel, found in self._walk(self.origin):
            if found is not None:
                now[rel] = found
            elif rel not in self.dirs:
                changed = True
                if apply:
                    (self.root / rel).mkdir(parents=True, exist_ok=True)
                    self.dirs.add(rel)
        for rel, st in now.items():
            if self.files.get(rel) != (st.st_size, st.st_mtime_ns):
                changed = True
                if apply:
                    (self.root / rel).unlink(missing_ok=True)
                    shutil.copy2(self.origin / rel, self.root / rel, follow_symlinks=False)
                    copied = os.lstat(self.root / rel)
                    self.files[rel] = (copied.st_size, copied.st_mtime_ns)
        for rel in self.files.keys() - now.keys():
            changed = True
            if apply:
                (self.root / rel).unlink(missing_ok=True)
                del self.files[rel]
        return changed


@dataclass
class EarlyCopy:
    """The work folder and the first probe slot's copy, made from the moment the
    command line is parsed (:func:`copy_early`): by a forked child that
    ``thread`` waits for, or by ``thread`` itself."""

    work: tempfile.TemporaryDirectory[str]
    thread: threading.Thread
    #: The copy, once made (empty: not made, or it failed: made again later).
    made: list[Sandbox]
    #: The finder took it over (it removes the folder); else :func:`_unused` does.
    taken: bool = False
    #: What the copy's probe server, started once the copy is made, was started
    #: with (None: none was; the server itself is the copy's ``Sandbox.server``).
    invocation: Invocation | None = None
    paths: list[str] | None = None
    started: float = 0.0


#: Where the copy made as the command line is parsed waits for the finder.
EARLY_COPY: Final = pytest.StashKey[EarlyCopy]()


def copy_early(config: pytest.Config, args: Sequence[str]) -> None:
    """Start copying the rootdir for the first probe slot before the conftests
    are imported (``pytest_load_initial_conftests``): the copy (on a small
    suite as long as that import: labgrid, docs/performance.md) then overlaps it
    instead of holding the first probe server's start; the server starts as soon
    as the copy is made, with the command line the session will give it
    (``args``: the paths it names), and the session keeps it only where that is
    so and the rootdir did not change meanwhile (:meth:`MissingFinder._adopt`).
    What they write in the rootdir meanwhile is copied when the session starts
    (:meth:`Sandbox.refresh`).  The folder is removed (its server stopped) when
    the command ends if the finder did not take it."""
    known = config.known_args_namespace
    if not FORKS or getattr(known, "collectonly", False) or getattr(known, "help", False):
        return
    work = tempfile.TemporaryDirectory(prefix="dagorder-find-")
    made: list[Sandbox] = []
    where = Path(work.name) / "slot0"
    environment = _start_environment(config)
    try:
        # As the session would start it (MissingFinder.pytest_sessionstart keeps it
        # only if so), from the options parsed so far: on a small suite the
        # server's start-up then overlaps this process's import of the conftests.
        invocation: Invocation | None = Invocation.early(config)
        paths = _early_paths(config, known, args or [])
    except Exception:  # an ini error: reported, and the server started, later
        invocation, paths = None, None
    # A process of its own where this one has no other thread (a fork copies
    # only the calling one): a thread that copies waits for the interpreter
    # lock at each file while the conftests' imports hold it (labgrid: the
    # copy ended after the collection, which then waited for it).
    began = time.monotonic()
    child = _copying_child(config.rootpath, where) if threading.active_count() == 1 else None

    def copy() -> None:
        try:
            if child is None:
                made.append(Sandbox(config.rootpath, where))
            elif _ended_well(child, where / ".dagorder-tmp"):
                made.append(Sandbox(config.rootpath, where, made=True,
                                    seconds=time.monotonic() - began))
        except Exception:  # copied again when needed, where the error is reported
            pass
        if not made:
            shutil.rmtree(where, ignore_errors=True)
        elif invocation is not None and paths:
            # Whatever stops it, the session starts one as usual (and reports why
            # if it cannot).
            with contextlib.suppress(Exception):
                early.started = time.monotonic()
                made[0].server = _start_server(invocation, environment, made[0], paths,
                                               EARLY_SERVER)

    early = EarlyCopy(work, threading.Thread(target=copy, name="dagorder-copy", daemon=True),
                      made, invocation=invocation, paths=paths)
    config.stash[EARLY_COPY] = early
    config.add_cleanup(lambda: _unused(early))
    early.thread.start()


#: The number of the early copy's server (:func:`copy_early`): the search's first process.
EARLY_SERVER: Final = 1


def _close_server(server: Server) -> None:
    """The server stopped and its pipes closed."""
    _kill(server.proc)
    for fd in (server.ask, server.answers):
        with contextlib.suppress(OSError):
            os.close(fd)


def _copy_tree(origin: Path, root: Path) -> None:
    """The rootdir's copy (what :func:`_ignored` leaves out, left out)."""
    shutil.copytree(origin, root, symlinks=True, ignore=_ignored, copy_function=_copy_file)


def _copying_child(origin: Path, where: Path) -> int:
    """A forked child that copies ``origin`` into ``where`` (as :class:`Sandbox`
    would) and makes its ``.dagorder-tmp`` last; its pid."""
    pid = os.fork()
    if pid:
        return pid
    code = 1
    try:
        _copy_tree(origin, where / (origin.name or "root"))
        (where / ".dagorder-tmp").mkdir()
        code = 0
    finally:  # never back into pytest, whatever the copy raised (a Ctrl-C too)
        os._exit(code)


def _ended_well(pid: int, last: Path) -> bool:
    """Wait for the copying child; True: it made its copy whole."""
    try:
        _, status = os.waitpid(pid, 0)
    except ChildProcessError:  # reaped by another wait: its last step tells
        return last.is_dir()
    return os.waitstatus_to_exitcode(status) == 0 and last.is_dir()


def _unused(early: EarlyCopy) -> None:
    """An early copy the finder did not take (the command ended before its session
    started, or its paths lie outside the rootdir): its server stopped, the
    copy removed once made."""
    if not early.taken:
        early.thread.join()
        for sandbox in early.made:
            if sandbox.server is not None:
                _close_server(sandbox.server)
                sandbox.server = None
        _remove(early.work)


def _ignored(dirpath: str, names: list[str]) -> list[str]:
    """What a probe's copy leaves out of ``dirpath``: the folders of
    :data:`SKIPPED_DIRS` and virtual environments, except a ``__pycache__``,
    whose plain byte code it keeps (:func:`_compiled`)."""
    if os.path.basename(dirpath) == "__pycache__":
        return [n for n in names if not _compiled(n)]
    return [n for n in names if (n in SKIPPED_DIRS and n != "__pycache__")
            or os.path.exists(os.path.join(dirpath, n, "pyvenv.cfg"))]


def _compiled(name: str) -> bool:
    """A ``__pycache__`` file this interpreter reads: the import system's
    (``mod.cpython-311.pyc``, ``mod.cpython-311.opt-1.pyc``) or this pytest's
    rewritten modules' (``mod.cpython-311-pytest-9.2.0.pyc``: test modules,
    conftests, plugins).  Copied with their sources' time stamps, they stay
    valid in the copy, whose probe servers then import the project without
    compiling or rewriting it again (labgrid, an installed plugin: a sizeable
    share of a server's start-up; see :func:`_copy_file` for the file name the
    code carries)."""
    tag = sys.implementation.cache_tag
    module, _, rest = name.partition(".")
    return bool(tag) and module != "" and (
        rest in (f"{tag}.pyc", f"{tag}-pytest-{pytest.__version__}.pyc")
        or (rest.startswith(f"{tag}.opt-") and rest.endswith(".pyc")))


def _copy_file(src: str, dst: str) -> str:
    """``shutil.copytree``'s copy of one file: ``shutil.copy2``, except for byte
    code (:func:`_compiled`), which may vanish as it is copied (the session
    writes it anew at the same time) and is then left out, compiled again in
    the copy if needed.  The code pytest rewrote carries the file name of the
    source it was compiled from (pytest's loader does not rename it, as the
    import system's does), so it is written with the copy's name, or left out
    where that name could differ from the one the copy's imports will see."""
    if os.path.basename(os.path.dirname(src)) != "__pycache__":
        return str(shutil.copy2(src, dst))
    try:
        if "-pytest-" not in os.path.basename(src):
            shutil.copy2(src, dst)
        elif os.path.realpath(dst) == os.path.abspath(dst):
            _renamed_code(src, dst)
    except (OSError, ValueError, EOFError, TypeError):  # vanished or unreadable
        with contextlib.suppress(OSError):
            os.unlink(dst)
    return dst


def _renamed_code(src: str, dst: str) -> None:
    """Rewritten byte code at ``src`` to ``dst``, every code object in it named
    after the copy's source; nothing when it was not compiled from the source
    beside ``src`` (then the copy compiles its own)."""
    def renamed(code: types.CodeType, name: str) -> types.CodeType:
        return code.replace(co_filename=name, co_consts=tuple(
            renamed(c, name) if isinstance(c, types.CodeType) else c
            for c in code.co_consts))

    module = os.path.basename(src).partition(".")[0] + ".py"
    data = Path(src).read_bytes()
    code = marshal.loads(data[16:])
    if (data[:4] != importlib.util.MAGIC_NUMBER or not isinstance(code, types.CodeType)
            or code.co_filename != os.path.join(os.path.dirname(os.path.dirname(src)), module)):
        return
    name = os.path.join(os.path.dirname(os.path.dirname(dst)), module)
    Path(dst).write_bytes(data[:16] + marshal.dumps(renamed(code, name)))


@dataclass
class Server:
    """A probe process that collected the selection and forks one child per probe
    (``probe_plugin._serve``): requests go to ``ask``, answers come on ``answers``."""

    proc: subprocess.Popen[bytes]
    ask: int
    answers: int
    log: Path
    #: Bytes of an answer read so far.
    pending: bytes = b""


#: Whether probes can be forked from a collected process (else each is a new one).
FORKS: Final = hasattr(os, "fork")


@dataclass(frozen=True)
class Invocation:
    """What a probe's command line takes from the session's: made from the
    configured session (:meth:`of`), or as the command line is first parsed
    (:meth:`early`), when the first probe server starts (:func:`copy_early`);
    that server is kept only where the two are equal."""

    root: Path
    inipath: Path | None
    xdist: bool
    cov: bool
    edges_path: Path | None
    forwarded: tuple[str, ...]
    collection: tuple[str, ...]
    where: Path

    @staticmethod
    def of(config: pytest.Config, edges: Path | None) -> Invocation:
        return Invocation._made(config, config.option, edges)

    @staticmethod
    def early(config: pytest.Config) -> Invocation:
        """From the options pytest parsed before the conftests (an ``addopts`` is in)."""
        known = config.known_args_namespace
        edges = edges_path(config, getattr(known, "dag_edges", None))
        return Invocation._made(config, known, edges)

    @staticmethod
    def _made(config: pytest.Config, option: object, edges: Path | None) -> Invocation:
        plugins = config.pluginmanager
        return Invocation(config.rootpath, config.inipath, plugins.has_plugin("xdist"),
                          plugins.has_plugin("_cov"), edges,
                          tuple(_forwarded(config.invocation_params.args)),
                          tuple(_collection_options(option)), config.invocation_params.dir)

    def command(self, sandbox: Sandbox, ids: list[str], basetemp: Path, *, workers: int = 0,
                edges: Path | None = None) -> tuple[list[str], Path]:
        """A probe's command line and folder in ``sandbox``, running ``ids``."""
        root = self.root
        args = [sys.executable, "-m", "pytest", "-p", probe_plugin.__name__,
                "-p", "no:cacheprovider", "-p", "no:randomly", "-q", "--no-header",
                "--rootdir", str(sandbox.root), f"--basetemp={basetemp}",
                "--dag-with-prerequisites", "-o", "console_output_style=classic"]
        if self.inipath is not None:
            args += ["-c", str(_inside(self.inipath, root, sandbox.root))]
        if self.xdist:
            args += ["-n", str(workers)]
        if self.cov:
            args += ["--no-cov"]
        if edges is not None:
            args += [f"--dag-edges={edges}"]
        elif self.edges_path is not None:
            args += [f"--dag-edges={_inside(self.edges_path, root, sandbox.root)}"]
        args += [*self.forwarded, *self.collection]
        args += [str(sandbox.root / nid) for nid in ids]
        cwd = _inside(self.where, root, sandbox.root)
        return args, cwd if cwd.is_dir() else sandbox.root


def _start_environment(config: pytest.Config) -> dict[str, str]:
    """The environment as the command started (``plugin.py`` keeps it before the
    conftests are imported), else as it is: a conftest may have started a
    service for this session and named it in the environment, and the probes
    must not share it."""
    return config.stash.get(ENVIRONMENT, {}) or dict(os.environ)


def _probe_environment(environment: dict[str, str], sandbox: Sandbox,
                       out: Path) -> dict[str, str]:
    """A probe's environment: the session's as it started (``environment``), its
    temporary folders in ``sandbox``, its records to ``out``."""
    env = {k: v for k, v in environment.items()
           if not k.startswith(("PYTEST_XDIST_", "DAGORDER_PROBE_"))
           and k not in ("PYTEST_CURRENT_TEST",)}
    env.update({probe_plugin.OUT: str(out), "TMPDIR": str(sandbox.tmp),
                "TEMP": str(sandbox.tmp), "TMP": str(sandbox.tmp)})
    return env


def _start_server(invocation: Invocation, environment: dict[str, str], sandbox: Sandbox,
                  ids: list[str], n: int) -> Server:
    """The probe server of ``sandbox`` (the ``n``-th process of the search),
    started: it collects ``ids`` (node ids or paths, relative to the rootdir)."""
    where = sandbox.tmp.parent
    dummy = where / f"server-{n}.jsonl"
    # Outside the sandbox's tmp (which each reset empties): numbered per test.
    args, cwd = invocation.command(sandbox, ids, where / f"basetemp-server-{n}")
    requests_r, requests_w = os.pipe()
    answers_r, answers_w = os.pipe()
    env = _probe_environment(environment, sandbox, dummy)
    env[probe_plugin.SERVE] = f"{requests_r} {answers_w}"
    log = where / f"server-{n}.log"
    try:
        with log.open("wb") as f:
            proc = subprocess.Popen(args, cwd=cwd, env=env, stdout=f, stderr=subprocess.STDOUT,
                                    stdin=subprocess.DEVNULL, start_new_session=True,
                                    pass_fds=(requests_r, answers_w))
    except BaseException:
        os.close(requests_w)
        os.close(answers_r)
        raise
    finally:
        os.close(requests_r)
        os.close(answers_w)
    return Server(proc, requests_w, answers_r, log)


@dataclass(frozen=True, slots=True)
class Held:
    """The ``-n 2`` check of the findings where no process can fork (elsewhere it is
    forked from a probe server: :meth:`MissingFinder._forked_check`), started
    with the search in a copy of its own and held before collecting
    (``probe_plugin.HOLD``) until ``go`` exists: its three process start-ups
    overlap the search instead of following it."""

    sandbox: Sandbox
    proc: subprocess.Popen[bytes]
    out: Path
    go: Path


@dataclass(frozen=True, slots=True)
class Ending:
    """How a probe's process ended before its tests did: its status, and the log
    whose end says more (None: no log to show)."""

    why: str
    log: Path | None = None

    def told(self) -> str:
        """``why``, and the end of the log."""
        return self.why + _tail(self.log)


@dataclass
class BesideBatch:
    """A screening batch of the usual kind (not alone-only) run beside the serial
    pass (:meth:`MissingFinder._screen_beside`): whole components of the
    declared graph the pass had finished, what it ran, and its records."""

    tests: list[int]
    order: list[str]  # its tests with their declared prerequisites, as run
    alone: list[int]  # those also run alone right before their place
    got: dict[str, Result] = field(default_factory=dict)  # the batch's own process
    found: dict[str, Result] = field(default_factory=dict)  # the runs alone


@dataclass
class Findings:
    """What the search found, by position in the serial order (so far: it is
    reported and written as it is when the budget or Ctrl-C ends the search)."""

    needs: dict[int, list[int]]
    same_process: set[int]
    conflicts: list[tuple[int, int, str]]
    unfinished: list[int]
    #: The phases that ended.
    phases: list[str] = field(default_factory=list)
    #: Evidence about the declared edges (the edge pass).
    verdicts: list[edges_file.Verdict] = field(default_factory=list)
    #: Candidate pairs not overlapped (the budget, the cap), and tests with
    #: declared prerequisites the edge pass did not reach.
    unpaired: list[tuple[int, int, str]] = field(default_factory=list)
    unchecked: list[str] = field(default_factory=list)
    #: Group name -> its tests: those sharing a fixture instance with a test of a
    #: conflict (the state lives in the fixture: its users stay on one worker).
    groups: dict[str, list[int]] = field(default_factory=dict)
    #: Evidence about pytest-order's fences, per test (where some test has an ordinal).
    fences: list[edges_file.FenceVerdict] = field(default_factory=list)
    #: Tests whose outcome under -n 2 with the findings still differed from serial.
    not_fixed: list[str] = field(default_factory=list)
    #: Candidate pairs past the cap (not overlapped).
    uncapped: int = 0
    #: Tests whose search stopped on a probe that ran past its time.
    timed_out: list[int] = field(default_factory=list)
    #: Conflicts that need no advice: the default keeps both tests on one worker
    #: (kept declared edges join them), or the suite already keeps them apart or
    #: together (a shared ``dag_resource`` or ``xdist_group``); with the reason.
    settled: dict[tuple[int, int, str], str] = field(default_factory=dict)
    #: (first user, last user, path) of a module or class fixture instance of the
    #: project that writes a path outside the session's temporary directory both
    #: at its set-up and at its teardown: its users stay on one worker.
    fixture_paths: list[tuple[int, int, str]] = field(default_factory=list)
    #: Groups of fixture users the check of the findings dropped (two instances
    #: of the fixture taking turns gave the serial outcomes): name -> its tests.
    dropped: dict[str, list[int]] = field(default_factory=dict)
    #: Tests the probes did not repeat: run again at their serial place in a fresh
    #: copy (the edge pass's serial run), or searched, they gave another outcome
    #: than the serial pass (state outside the copies: a database server, a path
    #: outside the rootdir): (position, outcome seen again; "" from the search).
    unreproducible: dict[int, str] = field(default_factory=dict)
    #: Where their state lives (see ``MissingFinder._outside_users``), and the other
    #: tests that touched it (they join their group).
    places: list[str] = field(default_factory=list)
    joined: list[int] = field(default_factory=list)


class MissingFinder:
    """Runs the search in place of the test loop (registered for ``--dag-find-missing``).

    Over 20 methods: the phases of the search (serial pass, screening, search,
    edge pass, conflicts, verification) and the probe steps they all use
    (sandboxes, probe servers, spawning a probe and reading its results) share
    one state under one lock: the findings, the sandbox pool, the live
    processes, the deadline and the stop event.
    """

    def __init__(self, config: pytest.Config) -> None:
        """Over 60 lines: the state the phases share, each attribute with what it holds."""
        self.config = config
        self.settings: Settings = settings_of(config)
        self.invocation = Invocation.of(config, self.settings.edges_path)
        # The probes are the parallel part: this process starts no xdist workers.
        if hasattr(config.option, "dist"):
            config.option.dist = "no"
            config.option.tx = []
            config.option.numprocesses = None
        self.slots = self.settings.find_workers
        self.lock = threading.Lock()
        self.probes_run = 0
        self.processes = 0
        self.left = 0
        self.deadline = float("inf")
        #: Until the serial pass measured the suite, a probe is bounded only by
        #: the budget and by its tests' progress (see ``_collect``).
        self.timeout = float("inf")
        self.stop = threading.Event()
        self.live: set[subprocess.Popen[bytes]] = set()
        #: A probe was stopped (its time ran out, or no test ended for too long).
        self.killed = False
        self.serial: dict[str, Result] = {}
        self.edges_run: cf.ThreadPoolExecutor | None = None
        #: The records of dependents run alone in the screening's batches, and in
        #: the edge runs' serial prefixes; each serial prefix run again in a fresh
        #: copy (its records) with the tests checked alone in it.
        self.screened: dict[str, Result] = {}
        self.edge_alone: dict[str, Result] = {}
        #: Each test run alone in a screening batch: its outcome in the batch's own
        #: process right after (its prerequisites ran before it there).
        self.together: dict[str, str] = {}
        #: The tests whose failure alone in the screening is their edges' verdict
        #: (:meth:`_settled`): no serial prefix runs for them.
        self.settled: set[str] = set()
        self.reruns: list[tuple[dict[str, Result], set[str]]] = []
        #: The records of each screening batch's run and of its runs alone, each in
        #: the order its tests ran (what ran before each test: the fence
        #: evidence, ``_fence_verdicts``).
        self.screen_runs: list[tuple[dict[str, Result], dict[str, Result]]] = []
        #: Each path two tests or more wrote in the serial pass, with its writers.
        self.writers: dict[str, list[int]] = {}
        self.found = Findings({}, set(), [], [])
        self.pool: queue.Queue[Sandbox] = queue.Queue()
        self.counter = 0
        self.workdir: Path | None = None
        self.sandboxes: list[Sandbox] = []
        self.ids: list[str] = []
        self.items: list[pytest.Item] = []
        self.order: dict[str, int] = {}
        self.declared: list[list[int]] = []
        #: Each test's prerequisites named by its run-time ``depends()`` calls in
        #: the serial pass: declared, though no collected graph shows them; every
        #: probe runs them with the test (``_with_declared``).
        self.runtime: list[list[int]] = []
        #: Each test's module and class fixture instances (``_wide_instances``),
        #: worked out once, when a phase first asks (:meth:`_wides`).
        self.wide: list[set[tuple[str, str, str]]] | None = None
        self.held: Held | None = None
        #: Starts the probe slots past the first during the serial pass (:meth:`_widen`).
        self.widening: threading.Thread | None = None
        self.adding = threading.Lock()  # held while slots start (:meth:`_add_slots`)
        #: Slots past the first started with the serial pass, before its pace says
        #: whether they are wanted (:meth:`_widen`): taken first by :meth:`_add_slots`;
        #: those stopped unused, whose servers' folders go as the others' do.
        self.spares: list[Sandbox] = []
        self.unused: list[Sandbox] = []
        self.serial_ended = threading.Event()
        #: Removes the probe servers' folders beside the ``-n 2`` check (:meth:`_retire_servers`).
        self.sweeper: threading.Thread | None = None
        #: The edge runs beside the serial pass (:meth:`_beside`): its thread, when it
        #: took a slot (None: not before the pass ended), its records, its stop flag.
        self.beside: threading.Thread | None = None
        self.beside_began: float | None = None
        self.beside_records: tuple[dict[str, Result], dict[str, Result]] | None = None
        self.beside_cancel = threading.Event()
        #: The screening beside the serial pass (:meth:`_screen_beside`): its thread,
        #: and each probe's tests with their records alone.
        self.screening_beside: threading.Thread | None = None
        self.screened_beside: list[tuple[list[int], dict[str, Result]]] = []
        self.beside_running: list[int] = []  # the tests of its probe running
        #: Its batches of the usual kind (where no alone-only one is left), done
        #: and running.
        self.batched_beside: list[BesideBatch] = []
        self.batch_running: BesideBatch | None = None
        #: The work folder and first probe slot made as the session starts
        #: (:meth:`pytest_sessionstart`), and when its server started.
        self.early: tuple[tempfile.TemporaryDirectory[str], threading.Thread, float] | None = None
        #: When the early copy's server started where it was kept (:meth:`_adopt`).
        self.first_began: float | None = None
        self.widen_from = 0.0
        self.environment = _start_environment(config)

    # -- the session -------------------------------------------------------------------

    def pytest_sessionstart(self, session: pytest.Session) -> None:
        """The first probe slot's copy and server, started as the session starts: the
        server's start-up and collection (labgrid's ``test_graphstrategy.py``: about
        1.2 s of CPU against 0.3 s of tests) overlap this process's own collection
        instead of following it.  It collects what this session was asked to (the
        same paths, in the copy) where those all lie below the rootdir; else the
        slot starts after the collection, with the node ids, as the others do."""
        config = self.config
        paths = _early_paths(config, config.option, config.args)
        if not FORKS or config.option.collectonly or paths is None:
            return
        copied = config.stash.get(EARLY_COPY, None)
        if copied is not None:
            copied.taken = True
        work = (copied.work if copied is not None
                else tempfile.TemporaryDirectory(prefix="dagorder-find-"))
        self.workdir = Path(work.name)

        def start() -> None:
            if copied is not None:
                copied.thread.join()
            if copied is not None and copied.made:
                sandbox = copied.made[0]
                self._adopt(copied, sandbox, paths)
            else:
                sandbox = Sandbox(config.rootpath, Path(work.name) / "slot0")
            with self.lock:
                self.sandboxes = [sandbox]
            self._server(sandbox, paths)

        thread = threading.Thread(target=start, name="dagorder-early", daemon=True)
        self.early = (work, thread, time.monotonic())
        thread.start()

    def _adopt(self, copied: EarlyCopy, sandbox: Sandbox, paths: list[str]) -> None:
        """The copy made as the command line was parsed, brought up to date
        (:meth:`Sandbox.refresh`); the server :func:`copy_early` started in it kept
        where it runs what this session would start there (the same command
        line, the copy unchanged since), else stopped (:meth:`_server` starts
        another)."""
        server = sandbox.server
        with self.lock:
            self.counter = max(self.counter, EARLY_SERVER)
            if server is not None:
                self.processes += 1
                self.live.add(server.proc)
        if server is not None and copied.invocation == self.invocation \
                and copied.paths == paths and not sandbox.refresh(apply=False):
            # Kept: the copy is what refreshing it would make (the rootdir is
            # walked once, not again to change nothing).
            self.first_began = copied.started
            return
        if server is not None:
            self._drop(sandbox)
        sandbox.refresh()

    def pytest_sessionfinish(self) -> None:
        """The early slot of a session whose test loop never ran (a collection error,
        no test selected, Ctrl-C while collecting): stopped, its folder removed."""
        early, self.early = self.early, None
        if early is not None:
            self._close_early(early[0], early[1])

    def pytest_unconfigure(self) -> None:
        """As :meth:`pytest_sessionfinish`, for a Ctrl-C during another plugin's
        ``pytest_sessionstart``: pytest then skips the session's finish, and the
        folder's own cleanup at exit would remove it under the copy still running."""
        self.pytest_sessionfinish()

    def _close_early(self, work: tempfile.TemporaryDirectory[str],
                     thread: threading.Thread) -> None:
        """The early slot stopped and its folder removed, once its start (a copy
        and a process start: bounded) ended; a Ctrl-C that cuts the wait for it
        waits again, else the removal would meet files the copy still writes."""
        try:
            thread.join()
        finally:
            thread.join()
            for sandbox in self.sandboxes:
                self._drop(sandbox)
            _remove(work)

    @contextlib.contextmanager
    def _work(self) -> Iterator[str]:
        """The work folder: the early one (:meth:`pytest_sessionstart`), else a new
        one; removed on the way out."""
        early, self.early = self.early, None
        if early is None:
            with tempfile.TemporaryDirectory(prefix="dagorder-find-") as fresh:
                yield fresh
            return
        folder, thread, began = early
        try:
            thread.join()
        except BaseException:
            self._close_early(folder, thread)
            raise
        try:
            # The slot's start-up counts from its server's start (_widen).
            self.widen_from = began if self.first_began is None else self.first_began
            yield folder.name
        finally:
            _remove(folder)

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtestloop(self, session: pytest.Session) -> object:
        if session.config.option.collectonly:
            return None
        tr = session.config.pluginmanager.get_plugin("terminalreporter")

        def write(line: str) -> None:
            if tr is not None:
                # At once: a CI log is a pipe, block-buffered, and the phases take
                # minutes; a line that shows only at the end is no progress.
                tr.write_line(line)
                tr.flush()

        items = list(session.items)
        if not items:
            return True
        target = self.settings.edges_path
        if target is not None and (why := _unwritable(target)):
            # Said before the search, not after it: hours of probes for nothing.
            write(f"dagorder: cannot write the edges file {target} ({why}); "
                  "name another with --dag-edges PATH")
            session.testsfailed = 1
            return True
        began = time.monotonic()
        budget = self.settings.find_budget
        if budget is not None:
            self.deadline = began + budget
        self.found = Findings({}, set(), [], [])
        stopped = ""
        with self._work() as work, self._stoppable():
            self.workdir = Path(work)
            try:
                done = self._find(session, items, write)
                if self.stop.is_set():  # Ctrl-C or SIGTERM: the phases wound down
                    stopped = "interrupted"
            except ProbeError as exc:
                write(f"dagorder: a probe could not run the tests:\n{exc.args[0]}")
                session.testsfailed = 1
                return True
            except KeyboardInterrupt:
                done, stopped = True, "interrupted"
            finally:
                self._kill_all()
                if self.edges_run is not None:
                    # Its probes are stopped: it ends at once, with the verdicts so far.
                    self.edges_run.shutdown(wait=True)
                self._swept()
        if not done:
            return True
        self._report(items, self.found, write, time.monotonic() - began, stopped)
        made = [*self.sandboxes, *self.unused, *self.spares]
        hint = work_folder.memory_hint(
            [sandbox.copied() for sandbox in made], self.workdir,
            _start_environment(self.config), work_folder.mounts(),
            work_folder.free_bytes(work_folder.SHARED_MEMORY)) if made else None
        if hint is not None:
            write(hint)
        if stopped == "interrupted":
            # Reported and written; the run still ends as pytest ends one Ctrl-C
            # stopped (exit status 2): a CI job's SIGTERM must not read as a pass.
            pytest.exit("dagorder: the learning pass was interrupted; what it found so far "
                        "is reported above", returncode=pytest.ExitCode.INTERRUPTED)
        return True

    @contextlib.contextmanager
    def _stoppable(self) -> Iterator[None]:
        """Ctrl-C (or a SIGTERM) sets the stop flag: every probe ends and every
        phase winds down as when the budget runs out, so the searches that ended
        are reported and written, and those left are listed.  A second one
        raises ``KeyboardInterrupt`` (the findings so far are still reported).  A
        signal the command started with ignored stays ignored, as in plain
        pytest (a background job of a shell that is not interactive)."""
        def stop(signum: int, frame: object) -> None:
            if self.stop.is_set():
                raise KeyboardInterrupt
            self.stop.set()

        if threading.current_thread() is not threading.main_thread():
            yield
            return
        before = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)
                  if signal.getsignal(sig) is not signal.SIG_IGN}
        for sig in before:
            signal.signal(sig, stop)
        try:
            yield
        finally:
            for sig, handler in before.items():
                signal.signal(sig, handler)

    def _stopped(self) -> bool:
        return self.stop.is_set() or time.monotonic() > self.deadline

    def _kill_all(self) -> None:
        self.stop.set()
        widening, self.widening = self.widening, None
        if widening is not None:  # it adds no slot once stopped
            widening.join()
        beside, self.beside = self.beside, None
        if beside is not None:  # its wait sees the stop flag within POLL
            beside.join()
        for sandbox in self.sandboxes:
            self._drop(sandbox)
        with self.lock:
            live = list(self.live)
        for proc in live:
            _kill(proc)

    def _find(self, session: pytest.Session, items: list[pytest.Item],
              write: _Write) -> bool:
        """The search, into ``self.found``; False: nothing to report (refused).

        Over 60 lines: the phases in the order the module's docstring numbers
        them, each a call and the progress line it writes; the edge pass runs
        beside screening, search and conflicts inside one ``try`` that always
        shuts it down, so those phases share this frame.
        """
        ids = [it.nodeid for it in items]
        one = self.settings.find_missing
        if one:
            if one not in ids:
                raise pytest.UsageError(
                    f"--dag-find-missing={one!r} names no selected test; give the node id "
                    "of a collected test (see pytest --collect-only -q)")
            ids = ids[:ids.index(one) + 1]
        declared = self._declared(len(ids))
        self.order = {nid: k for k, nid in enumerate(ids)}
        self.ids, self.declared = ids, declared
        self.items = items[:len(ids)]
        assert self.workdir is not None
        # The early slot (:meth:`pytest_sessionstart`) is the first.
        for sandbox in self.sandboxes:
            self.pool.put(sandbox)
        if FORKS and self.slots > 1:
            self._add_slots(1)
            began = self.widen_from if self.sandboxes else time.monotonic()
            self.widening = threading.Thread(target=self._widen, args=(began,),
                                             name="dagorder-slots", daemon=True)
            self.widening.start()
        else:
            self._add_slots(self.slots)
        if not one and not FORKS:
            # Forked from a probe server where it can be (:meth:`_check_n2`).
            self._hold_check(ids)
        write(f"dagorder: finding missing declarations of "
              f"{plural(len(ids) if not one else 1, 'test')} with up to "
              f"{plural(self.slots, 'probe process', 'probe processes')} at once")
        write("dagorder: serial pass: running the selection once, in one process")
        sharers = [] if one else self._fixture_sharers(ids)
        if not one and not sharers and FORKS and self.slots > 1:
            # The slot the pass leaves free screens what the pass has run (the
            # edge runs of the fixture sharers take it where there are some).
            self.beside = self.screening_beside = threading.Thread(
                target=self._screen_beside, args=(ids,), name="dagorder-beside", daemon=True)
            self.beside.start()
        serial, took = self._serial_pass(ids, sharers, write)
        self.timeout = _probe_timeout(took)
        self.found.phases.append("serial pass")
        if self.stop.is_set() and len(serial) < len(ids):
            raise KeyboardInterrupt
        if len(serial) < len(ids) and self.killed:
            running = ids[len(serial)]
            write(f"dagorder: the serial pass was stopped, a timeout: no test ended for "
                  f"{SERIAL_IDLE:.0f} s ({len(serial)} of {plural(len(ids), 'test')} had "
                  f"ended; running: {running}); deselect that test, or find its hang "
                  "(ini dag_stall_report in a plain run)")
            session.testsfailed = 1
            return False
        failing = [nid for nid in ids if serial.get(nid, FAILED).outcome
                   in ("failed", "xpassed")]
        if failing:
            write("dagorder: the selection does not pass serially, so there is no order to "
                  "restore; make these tests pass (or deselect them) first:")
            for nid in failing:
                write(f"    {nid}")
            session.testsfailed = len(failing)
            return False
        if self._drop_leftovers(serial, write) or self._outside(serial):
            # The runs beside the pass ran with those files, or beside a test
            # whose state lives outside the copies: not evidence.
            self.beside_cancel.set()
        self.serial = serial
        self.runtime = self._runtime(ids, serial)
        passed = [k for k, nid in enumerate(ids) if serial[nid].outcome == "passed"]
        targets = [len(ids) - 1] if one else [k for k in passed if k > 0]
        dependents = [] if one else self._dependents(ids)
        # Run alone in the screening's batches (one run answers both questions),
        # the others after their serial prefix in the edge runs, beside it.
        combined = self._combined(ids, serial, dependents, targets)
        early = [d for d in dependents if d not in set(combined)]
        beside = sharers if self.beside_began is not None else []
        edges_run = self.edges_run = cf.ThreadPoolExecutor(1)
        edges_jobs: list[cf.Future[None]] = []
        rest = [d for d in early if d not in set(beside)]
        if rest:
            edges_jobs.append(edges_run.submit(self._edge_runs, ids, serial, rest, rest[-1]))
        if beside:
            edges_jobs.append(edges_run.submit(self._beside_done, ids, serial, beside))
        verdicts_asked = False
        try:
            write(f"dagorder: serial pass: {len(passed)} passed in {took:.1f} s; "
                  f"screening {plural(len(targets), 'test')}"
                  + (f"; checking {plural(len(dependents), 'test')} with declared "
                     "prerequisites in a fresh process" if dependents else "")
                  + (f" ({len(combined)} alone after their screening batch)"
                     if combined else ""))
            suspects = self._screen_after(ids, serial, targets, combined) if not one else targets
            self._ended("screening")
            late = [d for d in combined if self.screened.get(ids[d], FAILED).outcome
                    != serial.get(ids[d], FAILED).outcome]
            late = self._settled(ids, serial, late)
            covered = early[-1] if early else -1
            if dependents and (late or (suspects and covered < dependents[-1])):
                # A test failed: the serial order again in a fresh copy, as far as
                # the last dependent (which tests the probes repeat) unless the
                # early runs went as far, and those that failed alone after their
                # batch, checked after their serial prefix.
                edges_jobs.append(edges_run.submit(
                    self._edge_runs, ids, serial, late,
                    dependents[-1] if covered < dependents[-1] else late[-1]))
            # Its verdicts go straight into the findings (written even if Ctrl-C
            # ends the search later).
            edges_jobs.append(edges_run.submit(self._edges_pass, ids, serial, dependents,
                                               write))
            verdicts_asked = True
            if suspects and dependents:
                # Its serial run says which tests the probes repeat: a search of one
                # they do not repeat bisects noise (every prefix fails).
                cf.wait(edges_jobs)
                again = self.found.unreproducible
                suspects = [t for t in suspects if t not in again]
            write(f"dagorder: {plural(len(suspects), 'test')} "
                  f"{'fails' if len(suspects) == 1 else 'fail'} without the tests before "
                  "them; searching")
            hints = {t: _hints(ids, serial, t, self._wides()) for t in suspects}
            needs, unfinished = self._search(ids, suspects, hints, write)
            self.found.unfinished += unfinished
            same = self._same_process(ids, needs, serial)
            needs = implied(needs, declared, keep=lambda t, p: t in same)
            self.found.needs, self.found.same_process = needs, same
            self._ended("search")
            touches = [serial[nid].touches if nid in serial else Touches() for nid in ids]
            edges = [list(declared[k]) + needs.get(k, []) for k in range(len(ids))]
            linked = ordered(edges)
            every = conflict_candidates(touches, linked, len(ids) ** 2, PAIRS_PER_PATH)
            if one:
                every = [p for p in every if len(ids) - 1 in p[:2]]
            pairs = every[:MAX_PAIRS]
            self.writers = writers(touches)
            write(f"dagorder: overlapping {plural(len(pairs), 'pair')} of tests that "
                  "write one path"
                  + (f" (the first {MAX_PAIRS} of {len(every)}, fewest writers of a path "
                     "first)" if len(every) > MAX_PAIRS else ""))
            self.found.conflicts, self.found.unpaired = self._conflicts(ids, pairs, needs,
                                                                        write)
            self.found.uncapped = len(every) - len(pairs)
            # A fixture instance that writes a fixed path when it is set up (its
            # first user) and again when torn down (its last): two instances, on
            # two workers, would collide there whether or not an overlap showed it.
            self.found.fixture_paths = _fixture_paths(self.items, self._wides(), touches)
            self.found.groups = _scoped(self.items, self._wides(),
                                        [*self.found.conflicts, *self.found.fixture_paths])
            self._ended("conflicts")
        finally:
            if not verdicts_asked and dependents and self.stop.is_set():
                # Ctrl-C in the screening: the verdicts of what was checked so far.
                edges_jobs.append(edges_run.submit(self._edges_pass, ids, serial,
                                                   dependents, write))
            # The edge pass ends with the rest (Ctrl-C, the budget: its probe is stopped).
            edges_run.shutdown(wait=True)
        for job in edges_jobs:
            if job.done() and job.exception() is not None:
                raise job.exception()  # type: ignore[misc]
        # A clash seen between tests the probes do not repeat is no evidence either.
        self.found.conflicts = [c for c in self.found.conflicts
                                if c[0] not in self.found.unreproducible
                                and c[1] not in self.found.unreproducible]
        if self.found.unreproducible:
            # Their state lives where no probe resets it (a database's rows, its
            # ids): what is known is that the serial order gives the serial
            # outcomes, so they keep it, on one worker, with every test that
            # touches a place of that state (a reader of the rows they insert
            # repeats its outcome, so no probe names it): one such test is
            # enough for a group.
            self.found.places, members = self._outside_users(serial)
            self.found.joined = [k for k in members if k not in self.found.unreproducible]
            if len(members) > 1:
                self.found.groups[OUTSIDE_GROUP] = members
        if not one and any(ordinal_of(it) is not None for it in self.items):
            self.found.fences = self._fence_verdicts(ids, serial, set(targets))
        self._minimal(items[:len(ids)])
        lifts = (any(v.separable for v in self.found.verdicts)
                 or any(v.free for v in self.found.fences))
        if ((self.found.needs or self.found.conflicts or self.found.groups or lifts)
                and not self._stopped()
                and not one):
            self._ended("conflicts")
            self._verify(ids, serial, write)
        return True

    def _add_slots(self, upto: int) -> None:
        """Probe slots up to ``upto``: each a copy of the rootdir in the pool, its
        server started at once (a start-up, the suite's conftests and its
        collection, can cost seconds: it runs beside whatever probe runs)."""
        # One caller at a time: :meth:`_widen` and :meth:`_free_slot` may both come.
        with self.adding:
            for _ in range(len(self.sandboxes), upto):
                spare = self.spares.pop(0) if self.spares else None
                sandbox = spare or self._new_slot()
                with self.lock:
                    if self.stop.is_set():
                        return
                    self.sandboxes.append(sandbox)
                    if spare is not None:  # counted as it joins (see _spare_slots)
                        self.processes += 1
                if spare is None:
                    self._server(sandbox)
                self.pool.put(sandbox)

    def _widen(self, began: float) -> None:
        """Let the slots past the first join once the serial pass will run its
        tests for longer than its process took to start (until its first test's
        record, less that test's time), by the tests it ran so far or by the
        pace of those after the first (a session's set-up) times the tests left;
        never, if the pass ends sooner.  A probe slot costs a start-up and a
        collection (labgrid's ``test_graphstrategy.py``: 1.2-1.5 s of CPU,
        against 0.3 s of tests, docs/performance.md): a suite whose tests take
        less is searched on one slot, a longer one gets the others while its
        pass still runs, on the core the pass leaves idle.  They start with the
        pass (:meth:`_spare_slots`), while its pace is not known yet: that
        takes the pass's own start-up and first test, and a slot that starts
        only then is not ready before the pass has run as long again, too late
        for the work beside it (ensembl-genomio: the edge runs of its fixture
        sharers then ended after the pass and held the screening up).  Those
        the pass's pace does not call for are stopped when it ends."""
        spares = threading.Thread(target=self._spare_slots, name="dagorder-spares",
                                  daemon=True)
        spares.start()
        try:
            if self._paced(began):
                # The spares made so far join (the one being made once it is), the
                # others start here.
                self._add_slots(self.slots)
        finally:
            spares.join()
            with self.adding:
                left, self.spares = self.spares, []
                self.unused += left
            for sandbox in left:
                self._drop(sandbox)

    def _spare_slots(self) -> None:
        """The slots past the first, copied and their servers started, kept aside
        (``self.spares``) for :meth:`_add_slots`; not counted among the search's
        processes unless they join.  None once the pass ended or was stopped, or
        once they joined (:meth:`_add_slots` starts those left)."""
        while True:
            with self.adding:  # one slot at a time: _add_slots may come between
                if len(self.sandboxes) + len(self.spares) >= self.slots \
                        or self.serial_ended.is_set() or self._stopped():
                    return
                sandbox = self._new_slot()
                self._server(sandbox, counted=False)
                self.spares.append(sandbox)

    def _new_slot(self) -> Sandbox:
        """A probe slot's copy in a folder of its own (a spare stopped unused keeps
        its folder until the search ends); under ``self.adding``."""
        assert self.workdir is not None
        made = len(self.sandboxes) + len(self.spares) + len(self.unused)
        return Sandbox(self.config.rootpath, self.workdir / f"slot{made}")

    def _paced(self, began: float) -> bool:
        """Whether the serial pass's pace called for the other slots before it
        ended (see :meth:`_widen`)."""
        where = self.sandboxes[0].tmp.parent
        first: float | None = None
        ran = 0.0  # the first test's seconds
        out: Path | None = None
        total = len(self.ids)
        while not self.serial_ended.wait(0.05):
            if self._stopped():
                return False
            now = time.monotonic()
            if first is None:
                with contextlib.suppress(OSError, ValueError, KeyError, TypeError):
                    for found in where.glob("probe-*.jsonl"):
                        line = found.read_text(encoding="utf-8").partition("\n")[0]
                        if line:
                            ran = max(0.0, float(json.loads(line)["seconds"]))
                            first, out = now, found
            if first is None or out is None:
                continue
            done = 0
            with contextlib.suppress(OSError):
                done = out.read_bytes().count(b"\n")
            if _worth_a_slot(first - began - ran, now - first, ran, done, total):
                return True
        return False

    def _outside_users(self, serial: dict[str, Result]) -> tuple[list[str], list[int]]:
        """The places outside the rootdir where the state of the tests the probes do
        not repeat lives (a server they connected to, a path outside the rootdir
        that a test wrote), and every test that touched one of them in the serial
        pass, with those tests, in serial order."""
        ids, again = self.ids, self.found.unreproducible
        mine = str(self.workdir) + os.sep if self.workdir is not None else None

        def outside(r: Result) -> set[str]:
            paths = {p for p in r.touches.reads | r.touches.writes if os.path.isabs(p)
                     and (mine is None or not p.startswith(mine))}
            return paths | r.services

        written = {p for r in serial.values() for p in r.touches.writes}
        places: set[str] = set()
        for k in again:
            r = serial.get(ids[k])
            if r is not None:
                places |= {p for p in outside(r) if p in r.services or p in written}
        members = set(again) | {k for k, nid in enumerate(ids)
                                if nid in serial and not places.isdisjoint(outside(serial[nid]))}
        return sorted(places), sorted(members)

    def _minimal(self, items: Sequence[pytest.Item]) -> None:
        """No advice the suite does not need: a conflict whose tests the default
        already keeps on one worker (declared edges no verdict lifts join them),
        or that the suite's own markers already keep apart or together, gets
        none; a group of fixture users the default keeps whole is not written."""
        found = self.found
        n = len(items)
        free = {(self.order[v.after], self.order[v.test]) for v in found.verdicts
                if v.separable and v.after in self.order and v.test in self.order}
        modules = [it.nodeid.split("::", 1)[0] for it in items]
        keeps = [any(scope in ("module", "package") for _, scope, _ in wide_fixtures(it) or ())
                 for it in items]
        roots = state_partition(modules, self.declared[:n], [[] for _ in range(n)],
                                lifted=free, keeps=keeps)[1]

        def marks(k: int) -> tuple[set[str], set[str]]:
            item = items[k]
            resources = {str(a) for m in item.iter_markers(RESOURCE) for a in m.args}
            labels = {str(m.args[0]) if m.args else str(m.kwargs.get("name", ""))
                      for m in item.iter_markers("xdist_group")}
            return resources, labels

        for conflict in found.conflicts:
            i, j, _ = conflict
            (res_i, lab_i), (res_j, lab_j) = marks(i), marks(j)
            if roots[i] is not None and roots[i] == roots[j]:
                found.settled[conflict] = ("the default keeps both on one worker (their "
                                           "declared edges join them)")
            elif res_i & res_j:
                found.settled[conflict] = (f"both carry dag_resource("
                                           f"{_quote(sorted(res_i & res_j)[0])}) already")
            elif lab_i & lab_j:
                found.settled[conflict] = (f"both carry xdist_group("
                                           f"{_quote(sorted(lab_i & lab_j)[0])}) already")
        for name, members in list(found.groups.items()):
            first = roots[members[0]]
            labels = [marks(k)[1] for k in members]
            if ((first is not None and all(roots[k] == first for k in members))
                    or set.intersection(*labels)):
                del found.groups[name]

    def _verify(self, ids: list[str], serial: dict[str, Result], write: _Write) -> None:
        """The findings checked before they are given.  First the groups no failing
        probe stands behind (a fixture writes a fixed path, no overlap clashed)
        are tried on their own (``_unneeded_groups``): one whose tests pass with
        two instances of the fixture taking turns is dropped.  Then the selection
        under ``-n 2`` with what is left, against the serial outcomes.  Where it
        differs, a dropped group with a test that differed is given back, and the
        declared edges the findings lift next to a test that differed are kept
        again (the fresh-process probe passed, the run did not: the run's
        evidence wins), and the check runs once more; what still differs is
        named, not fixed.  A finding a failing probe showed (a missing
        prerequisite, a clash) is not dropped on a run that passes without it:
        that run's schedule may only have missed the failing order."""
        self._unneeded_groups(ids, serial, write)
        self._retire_servers()
        write("dagorder: checking the findings: the selection under -n 2 with them")
        differ = self._check_n2(ids, serial)
        if self._stopped():
            # Its run was cut: the tests it did not reach are no difference.
            write("dagorder: the -n 2 check of the findings was cut short "
                  "(the budget or Ctrl-C): they are not checked")
            return
        back = self._give_back(differ) if differ else []
        lifted = list(self.found.verdicts)
        rekept = self._rekeep(differ, serial) if differ else []
        refenced = self._refenced(differ, write) if differ else []
        if back:
            write(f"dagorder: -n 2 gave other outcomes for {plural(len(differ), 'test')}; "
                  f"keeping the {plural(len(back), 'group')} of fixture users "
                  f"{', '.join(map(_quote, back))} after all")
        if rekept:
            write(f"dagorder: -n 2 gave other outcomes for {plural(len(differ), 'test')}; "
                  f"keeping {plural(len(rekept), 'declared edge')} evidence had lifted "
                  "next to them, and checking again")
        if back or rekept or refenced:
            first, differ = differ, self._check_n2(ids, serial)
            if self._stopped():
                write("dagorder: the second -n 2 check of the findings was cut short "
                      "(the budget or Ctrl-C): what it keeps again is kept, unchecked")
                return
            if not differ and rekept:
                self._lift_neighbours(ids, serial, lifted, set(first), write)
        if differ and any(v.free for v in self.found.fences):
            self._refenced([], write)
        self.found.not_fixed = differ
        if not differ:
            # Its run starts from what the probes left where that state lives (no
            # probe can reset a server): it cannot show that the group suffices.
            write("dagorder: with the findings, -n 2 gave the serial outcomes"
                  + (" (not compared: the tests the probes do not repeat, below"
                     + (f"; it ran against what the probes left at {self.found.places[0]}"
                        + (" and the other places below" if len(self.found.places) > 1
                           else "")
                        + ", not a fresh state: a run from a fresh one confirms the group"
                        if self.found.places else "") + ")"
                     if self.found.unreproducible else ""))

    def _retire_servers(self) -> None:
        """The probe servers are done once the ``-n 2`` checks start (each check is a
        run of its own, forked from the one server kept): stopped, and the
        folders their probes' tests left (the
        servers' basetemps: every ``tmp_path`` of every probe) removed by a thread
        beside the check, not after it (ensembl-genomio: 18.6 s of removal at the
        end of its pass, load 16).  Joined before the work folder goes
        (:meth:`_swept`); a probe asked for later starts a new server."""
        kept = False
        for sandbox in self.sandboxes:
            server = sandbox.server
            if not kept and server is not None and server.proc.poll() is None:
                kept = True  # the checks fork from it (its basetemp is the probes')
            else:
                self._drop(sandbox)
        # The spares stopped unused left theirs too (their servers collected).
        folders = [folder for sandbox in (*self.sandboxes, *self.unused)
                   for folder in sorted(sandbox.tmp.parent.glob("basetemp-server-*"))]
        if not folders:
            return

        def sweep() -> None:
            for folder in folders:
                shutil.rmtree(folder, ignore_errors=True)

        self.sweeper = threading.Thread(target=sweep, name="dagorder-sweep", daemon=True)
        self.sweeper.start()

    def _swept(self) -> None:
        """Wait for :meth:`_retire_servers`'s removal (the work folder goes next)."""
        sweeper, self.sweeper = self.sweeper, None
        if sweeper is not None:
            sweeper.join()

    def _lift_neighbours(self, ids: list[str], serial: dict[str, Result],
                         lifted: list[edges_file.Verdict], differed: set[str],
                         write: _Write) -> None:
        """The edges kept again only for sharing a module with a test that differed
        (their own dependent did not) lifted once more, as their fresh-process
        probe said, in one more ``-n 2`` run: kept lifted if it gives the serial
        outcomes, else kept as the run before (which gave them)."""
        before = {(v.test, v.after): v for v in lifted}
        trial = []
        for v in self.found.verdicts:
            was = before.get((v.test, v.after))
            again = was is not None and was.separable and not v.separable \
                and v.test not in differed
            trial.append(was if again and was is not None else v)
        changed = sum(a is not b for a, b in zip(trial, self.found.verdicts, strict=True))
        if not changed or self._stopped():
            return
        kept, self.found.verdicts = self.found.verdicts, trial
        if self._check_n2(ids, serial):
            self.found.verdicts = kept
            write(f"dagorder: lifting the {plural(changed, 'edge')} kept only for their "
                  "module again gave other outcomes: they stay kept")
            return
        write(f"dagorder: lifting the {plural(changed, 'edge')} kept only for their "
              "module again gave the serial outcomes: they stay lifted")

    def _unneeded_groups(self, ids: list[str], serial: dict[str, Result],
                         write: _Write) -> None:
        """Drop each group of fixture users that only a fixed path the fixture writes
        made (no overlap of its tests clashed) when two instances of the fixture
        taking turns leave every outcome as serially: its users in serial order,
        the first and the last in one process, the others in a second one (each
        tears down toward its own next test, as a worker does), so the second
        instance is set up and torn down while the first is alive and its last
        test runs after that.  Groups of two tests (no turn to take), of several
        fixture instances, or past the budget are kept unchecked."""
        if not FORKS:
            return
        clashed = {k for i, j, _ in self.found.conflicts for k in (i, j)}
        group_of = {k: name for name, members in self.found.groups.items() for k in members}
        for first, last, path in self.found.fixture_paths:
            name = group_of.get(first)
            if name is None or name in self.found.dropped or name != group_of.get(last):
                continue
            members = self.found.groups.get(name, [])
            shared = set.intersection(*(self._wides()[k] for k in members)) \
                if members else set()
            if len(members) < 3 or not shared or not clashed.isdisjoint(members):
                continue
            if self._stopped():
                return
            run = sorted({*members, *(p for k in members for p in self._found_before(k))})
            got: dict[str, Result] = {}
            sandbox = self.pool.get()
            try:
                sandbox.reset()
                got = self._run(sandbox, [ids[k] for k in run],
                                lane=[ids[k] for k in members[1:-1]], limit=self.timeout)
            finally:
                self.pool.put(sandbox)
            if KILLED in got or not all(
                    got.get(ids[k], FAILED).outcome == serial.get(ids[k], FAILED).outcome
                    for k in members):
                continue
            self.found.dropped[name] = self.found.groups.pop(name)
            write(f"dagorder: the fixture {ids[first]} and {ids[last]} share writes {path}, "
                  f"but its {len(members)} tests gave the serial outcomes with two instances "
                  "of it taking turns: no group needed")

    def _found_before(self, k: int) -> set[int]:
        """The missing prerequisites found for ``k``, transitively."""
        return _reached(k, lambda t: self.found.needs.get(t, ()))

    def _give_back(self, differ: list[str]) -> list[str]:
        """The dropped groups with a test that differed under ``-n 2``, kept again."""
        wrong = {self.order[nid] for nid in differ if nid in self.order}
        back = [name for name, members in self.found.dropped.items()
                if not wrong.isdisjoint(members)]
        for name in back:
            self.found.groups[name] = self.found.dropped.pop(name)
        return back

    def _check_n2(self, ids: list[str], serial: dict[str, Result]) -> list[str]:
        """The tests whose outcome under ``-n 2`` with the findings differs from serial,
        less those no probe repeats (their outcome there says nothing of the findings)."""
        held, self.held = self.held, None
        sandbox = held.sandbox if held is not None else self._check_sandbox()
        try:
            if held is None:
                sandbox.reset()
            edges = sandbox.tmp.parent / "found-edges.json"
            edges.unlink(missing_ok=True)
            if self.settings.edges_path is not None and self.settings.edges_path.is_file():
                shutil.copyfile(self.settings.edges_path, edges)
            edges_file.write(edges, self._record(ids, self.found))
            server = sandbox.server if held is None else None
            if server is not None and server.proc.poll() is None:
                got = self._forked_check(sandbox, server, ids, edges)
            else:
                proc, out = self._started_check(sandbox, ids, edges, held)
                got = self._collect(proc, out, sandbox, limit=self.timeout)
        finally:
            if held is None:
                self.pool.put(sandbox)
        return [nid for k, nid in enumerate(ids) if got.get(nid, FAILED).outcome
                != serial.get(nid, FAILED).outcome and k not in self.found.unreproducible]

    def _check_sandbox(self) -> Sandbox:
        """A sandbox from the pool for a ``-n 2`` check: the one whose probe server
        lives (:meth:`_retire_servers` kept it) if any.  No probe runs by then:
        the others are in the pool."""
        taken = [self.pool.get()]
        try:
            while taken[-1].server is None and len(taken) < len(self.sandboxes):
                taken.append(self.pool.get_nowait())
        except queue.Empty:
            pass
        for other in taken[:-1]:
            self.pool.put(other)
        return taken[-1]

    def _forked_check(self, sandbox: Sandbox, server: Server, ids: list[str],
                      edges: Path) -> dict[str, Result]:
        """The ``-n 2`` run reading ``edges`` as a child of the sandbox's probe server,
        which collected this copy and ran no test: its controller and its two
        workers are forks of it (``probe_plugin._run_check``) instead of three
        pytest processes that import and collect again (labgrid: 1.2-1.7 s of
        CPU each, docs/performance.md)."""
        with self.lock:
            self.counter += 1
            n = self.counter
        out = sandbox.tmp.parent / f"probe-{n}.jsonl"
        out.unlink(missing_ok=True)
        run = self._with_declared(ids)
        args, cwd = self._command(sandbox, run, out,
                                  sandbox.tmp / f"basetemp-{n}", workers=2, edges=edges)
        check = {"args": args[3:], "cwd": str(cwd), "env": self._environment(sandbox, out),
                 "log": str(out.with_suffix(".log")), "where": str(sandbox.tmp.parent),
                 "expect": run, "root": str(sandbox.root)}
        killed = self._ask(sandbox, server, [{"check": check}], self.timeout)
        results = self._read(out, sandbox)
        if sandbox.ended is not None and not results and not killed:
            # Its pytest stopped before any test (as _collect's probes): the
            # check's failure, not a difference the findings made.
            raise ProbeError(
                f"the -n 2 check of the findings ended before its tests ran "
                f"({sandbox.ended.why}){_tail(out.with_suffix('.log'))}")
        if killed and not self._stopped():
            results[KILLED] = FAILED
        return results

    def _hold_check(self, ids: list[str]) -> None:
        """Start the ``-n 2`` check now, held until its findings are written."""
        assert self.workdir is not None
        sandbox = Sandbox(self.config.rootpath, self.workdir / "check")
        go = sandbox.tmp.parent / "go"
        proc, out = self._spawn(sandbox, ids, workers=2,
                                edges=sandbox.tmp.parent / "found-edges.json", hold=go)
        self.held = Held(sandbox, proc, out, go)

    def _started_check(self, sandbox: Sandbox, ids: list[str], edges: Path,
                       held: Held | None) -> tuple[subprocess.Popen[bytes], Path]:
        """The ``-n 2`` run reading ``edges``: the held one let go, else a new one."""
        if held is not None and held.proc.poll() is None:
            held.go.touch()
            return held.proc, held.out
        if held is not None:  # it ended by itself while held: a new one, in a reset copy
            sandbox.reset()
        return self._spawn(sandbox, ids, workers=2, edges=edges)

    def _rekeep(self, differ: list[str], serial: dict[str, Result]) -> list[edges_file.Verdict]:
        """Turn back to "one process" each separable verdict whose dependent
        differed, or shares a module with a test that differed (a module's
        fixtures are shared by its tests, edges or not); the verdicts changed."""
        modules = {nid.split("::", 1)[0] for nid in differ}
        wrong = set(differ)
        changed: list[edges_file.Verdict] = []
        out: list[edges_file.Verdict] = []
        for v in self.found.verdicts:
            if v.separable and (v.test in wrong or v.test.split("::", 1)[0] in modules
                                or v.after.split("::", 1)[0] in modules):
                want = serial.get(v.test, FAILED).outcome
                v = edges_file.Verdict(
                    v.test, v.after, False,
                    f"{v.test} passed in a fresh process after its prerequisites ran in "
                    f"another, but -n 2 with this edge lifted gave other outcomes "
                    f"(serially: {want})", v.fingerprint)
                changed.append(v)
            out.append(v)
        self.found.verdicts = out
        return changed

    def _fence_verdicts(self, ids: list[str], serial: dict[str, Result],
                        screened: set[int]) -> list[edges_file.FenceVerdict]:
        """Per test, whether pytest-order's fences need hold it (``decide.fences``).

        A fence keeps a test from being handed out before every test sorted
        before it.  Free is a test that (1) passed in every screening run and
        run alone it ran in, and in one of them no test sorted before it but
        its declared prerequisites (transitively) could have left it anything:
        in a screening batch's run none ran before it (a batch-mate's
        prerequisites may have: the order of the run's records says), or, run
        alone in a fresh process, none of those whose files were in place
        wrote a path in the serial pass (:meth:`_alone_clean`); (2) changed no
        process state in the serial pass (an earlier test on its worker could
        read it once it runs first); (3) wrote no path a test sorted before it
        touched in the serial pass (nor does an earlier test then find it
        changed).  Everything else keeps its fences.
        """
        prints = evidence.Fingerprints(self.config.rootpath)
        first: dict[str, int] = {}  # path -> the first test that touched it
        for k, nid in enumerate(ids):
            r = serial.get(nid)
            if r is not None:
                for path in sorted(r.touches.writes | r.touches.reads):
                    first.setdefault(path, k)
        clean, seen, failed = self._screened_clean(ids, serial)
        out: list[edges_file.FenceVerdict] = []
        for k, nid in enumerate(ids):
            r = serial.get(nid, FAILED)
            wrote = sorted(p for p in r.touches.writes if first.get(p, k) < k)
            if k not in screened:
                why = f"not screened (serially {r.outcome})" if k else "the first test"
            elif k not in seen and nid not in failed:
                why = "not screened (the budget or Ctrl-C cut the screening)"
            elif (nid in failed or k in self.found.needs or k in self.found.unreproducible
                  or k in self.found.timed_out):
                why = "did not pass in the screening without the tests sorted before it"
            elif k not in clean:
                why = ("in the screening, tests sorted before it that are not its "
                       "prerequisites ran first")
            elif r.state:
                why = ("changed the process's state (the environment or a module-level "
                       "value), which a test sorted before it could read")
            elif wrote:
                why = (f"wrote {wrote[0]}, which {ids[first[wrote[0]]]} sorted before "
                       "it touched")
            else:
                why = ""
            out.append(edges_file.FenceVerdict(nid, not why, why, prints.of((nid,))))
        return out

    def _screened_clean(self, ids: list[str], serial: dict[str, Result]) -> tuple[
            set[int], set[int], set[str]]:
        """For :meth:`_fence_verdicts`: the tests some screening run or run alone
        showed passing with nothing of a test sorted before them but their
        prerequisites; the tests the screening ran; those that did not pass in
        some run."""
        writing = {k for k, nid in enumerate(ids) if serial.get(nid, FAILED).touches.writes}
        failed = {nid for records in (self.screened, self.edge_alone)
                  for nid, r in records.items() if r.outcome != "passed"}
        clean: set[int] = set()
        seen: set[int] = set()
        for run, alone in self.screen_runs:
            ran: list[int] = []
            for nid, r in run.items():
                at = self.order.get(nid)
                if at is None:
                    continue
                if r.outcome != "passed":
                    failed.add(nid)
                elif at not in clean and not (
                        {p for p in ran if p < at} - self._prerequisites(at)):
                    clean.add(at)
                ran.append(at)
            seen.update(ran)
            clean |= self._alone_clean(run, alone, writing)
        # Run alone after its serial prefix (the edge pass): every test before it
        # left its files.
        for nid, r in self.edge_alone.items():
            at = self.order.get(nid)
            if at is not None and r.outcome == "passed" and not (
                    {w for w in writing if w < at} - self._prerequisites(at)):
                clean.add(at)
        return clean, seen, failed

    def _alone_clean(self, run: dict[str, Result], alone: dict[str, Result],
                     writing: set[int]) -> set[int]:
        """The tests of a screening batch that passed alone in a fresh process with
        no file of a test sorted before them but their prerequisites: in place
        were the files of the tests before their place in the batch's run and of
        the tests run alone before them in the same fresh process (some of
        ``alone``'s earlier records: all are counted), and none of those that are
        sorted before the test and not its prerequisites wrote a path in the
        serial pass (``writing``).  Its process held only tests that changed no
        process state (``probe_plugin._batch``)."""
        order = [k for nid in run if (k := self.order.get(nid)) is not None]
        where = {k: i for i, k in enumerate(order)}
        out: set[int] = set()
        before: list[int] = []
        for nid, r in alone.items():
            at = self.order.get(nid)
            if at is None:
                continue
            if r.outcome == "passed":
                files = {*order[:where.get(at, len(order))], *before}
                if not ({p for p in files if p < at and p in writing}
                        - self._prerequisites(at)):
                    out.add(at)
            before.append(at)
        return out

    def _refenced(self, differ: list[str], write: _Write) -> list[edges_file.FenceVerdict]:
        """Turn back to fenced each test the screening freed that differed under
        ``-n 2``, or shares a module with one that did (``differ`` empty: every
        test: -n 2 still differed, and a freed test may break another module's);
        the verdicts changed, said."""
        modules = {nid.split("::", 1)[0] for nid in differ}
        changed: list[edges_file.FenceVerdict] = []
        out: list[edges_file.FenceVerdict] = []
        for v in self.found.fences:
            if v.free and (not differ or v.test in differ
                           or v.test.split("::", 1)[0] in modules):
                v = edges_file.FenceVerdict(
                    v.test, False, "passed with none of the tests sorted before it, but "
                    "-n 2 with its fence lifted gave other outcomes", v.fingerprint)
                changed.append(v)
            out.append(v)
        self.found.fences = out
        if changed and differ:
            write(f"dagorder: -n 2 gave other outcomes for {plural(len(differ), 'test')}; "
                  f"keeping the fences of {plural(len(changed), 'test')} evidence had freed "
                  "next to them, and checking again")
        elif changed:
            write(f"dagorder: -n 2 still gave other outcomes; keeping the fences of the "
                  f"{plural(len(changed), 'test')} evidence had freed")
        return changed

    def _ended(self, phase: str) -> None:
        """``phase`` ran to its end (not if the budget or Ctrl-C cut it)."""
        if not self._stopped():
            self.found.phases.append(phase)

    def _dependents(self, ids: list[str]) -> list[int]:
        """The tests with a declared prerequisite in the selection."""
        n = len(ids)
        return [k for k in range(n) if any(p < n for p in self.declared[k])]

    def _combined(self, ids: list[str], serial: dict[str, Result], dependents: list[int],
                  targets: list[int]) -> list[int]:
        """The dependents the screening also runs alone (see ``_screen``): those
        whose prerequisites' process is unlikely to matter (none of them,
        transitively, changed the environment or a test module's or conftest's
        values in the serial pass, and it shares no module or class fixture
        instance with one).  A dependent that reads its prerequisites' process
        would fail there and be checked again after its serial prefix: the
        others go there at once.  A prerequisite that only set up the suite's
        package lazily (slurk: 9 tests, which sent 93 dependents to the
        prefixes) does not count: a fresh process sets it up again.  Where the
        serial pass saw no test write a path or reach a service
        (:meth:`_quiet`), a failure alone there is the verdict
        (:meth:`_settled`), so the state a prerequisite changed does not count
        either (bpypolyskel: each module's first test sets the module global
        its three others read; two of them pass alone)."""
        if not FORKS:
            return []
        wide = self._wides()
        quiet = self._quiet(serial)
        out = []
        for d in dependents:
            before = self._prerequisites(d)
            if (quiet or not any(serial.get(ids[p], FAILED).tests_state for p in before)) \
                    and all(wide[d].isdisjoint(wide[p]) for p in before):
                out.append(d)
        return out

    @staticmethod
    def _quiet(serial: dict[str, Result]) -> bool:
        """No test of the serial pass wrote a path or connected to a service: a
        probe then finds the copy's own files and no state left outside it,
        whichever tests ran before (the files of a serial prefix are the copy's)."""
        return not any(r.touches.writes or r.services for r in serial.values())

    def _settled(self, ids: list[str], serial: dict[str, Result],
                 late: list[int]) -> list[int]:
        """Of ``late`` (screened alone, not as serially), those still to check
        after their serial prefix; the others' run alone is their edges'
        verdict (``self.settled``): the serial pass was :meth:`_quiet`, so their
        prefix would have left them the files their run alone found, and each
        gave its serial outcome in the batch's process right after, its
        prerequisites run before it there: only that process was missing."""
        if not late or not self._quiet(serial):
            return late
        left = []
        for d in late:
            nid = ids[d]
            wanted = serial.get(nid, FAILED).outcome
            if self.screened.get(nid, FAILED).outcome != "timeout" \
                    and self.together.get(nid) == wanted:
                self.settled.add(nid)
            else:
                left.append(d)
        return left

    def _edge_runs(self, ids: list[str], serial: dict[str, Result], checked: list[int],
                   upto: int) -> None:
        """The serial order up to ``upto`` again in a fresh copy (which tests the probes
        repeat), each test of ``checked`` alone in a fresh process right before its
        place in it (the files of the tests before it in place): one probe per
        probe slot, each a serial prefix; their records go to ``self.edge_alone``
        and ``self.reruns``."""
        serial_longest = max((serial.get(ids[k], FAILED).seconds for k in checked), default=0.0)

        def check(chunk: list[int], last: int) -> None:
            # The serial run only up to the chunk's last test: its tests are checked.
            found: dict[str, Result] = {}
            again = self._probe_alone(ids, serial, ids[:last + 1], chunk, serial_longest, found)
            again.pop(KILLED, None)
            with self.lock:
                self.edge_alone.update(found)
                self.reruns.append((again, set(found)))

        # Split in runs of the serial order, one per probe slot: each is a serial
        # prefix with its tests alone, so the slots the screening frees share it.
        # The last reaches ``upto``: the fresh copy's evidence covers as much.
        count = max(1, min(self.slots, len(checked)))
        size = max(1, -(-len(checked) // count))
        chunks = [checked[k:k + size] for k in range(0, len(checked), size)] or [[]]
        ends = [c[-1] if c else upto for c in chunks]
        ends[-1] = max(ends[-1], upto)
        with cf.ThreadPoolExecutor(len(chunks)) as ex:
            list(ex.map(check, chunks, ends))

    def _fixture_sharers(self, ids: list[str]) -> list[int]:
        """The dependents that share a module or class fixture instance with one of
        their prerequisites: never run alone in the screening (:meth:`_combined`),
        whatever the serial pass shows, so known before it."""
        if not FORKS or self.slots < 2:
            return []
        wide = self._wides()
        return [d for d in self._dependents(ids)
                if any(not wide[d].isdisjoint(wide[p]) for p in self._prerequisites(d))]

    def _serial_pass(self, ids: list[str], beside: list[int],
                     write: _Write) -> tuple[dict[str, Result], float]:
        """The serial pass, its records and seconds; the edge runs of ``beside`` on
        the second probe slot while it runs (:meth:`_beside`).  A pass with a
        failing test while they ran is run again without them: a clash outside
        the copies (a fixed port, a server's rows) must not read as the suite
        failing serially.  So is a pass whose process ended before its tests
        did: that is the probe's failure, not the suite's (once more, then
        :class:`ProbeError` says where it ended and why)."""
        if beside:
            self.beside = threading.Thread(target=self._beside, args=(ids, beside),
                                           name="dagorder-beside", daemon=True)
            self.beside.start()
        began = time.monotonic()
        serial, ended = self._pass_probe(ids)
        with self.lock:  # a slot taken from here on is not beside the pass
            self.serial_ended.set()
        if self.stop.is_set():
            return serial, time.monotonic() - began
        if ended is not None:
            write(f"dagorder: serial pass: its process ended after {len(serial)} of "
                  f"{plural(len(ids), 'test')} ({ended.why}); running it again")
        if ended is not None or (self.beside_began is not None and _fails(serial)):
            self.beside_cancel.set()
            if self.beside is not None:
                self.beside.join()
            began = time.monotonic()
            serial, ended = self._pass_probe(ids)
            if ended is not None and not self.stop.is_set():
                raise ProbeError(
                    f"the serial pass's process ended twice after {len(serial)} of "
                    f"{plural(len(ids), 'test')}, while {ids[min(len(serial), len(ids) - 1)]} "
                    f"ran: {ended.told()}")
        return serial, time.monotonic() - began

    def _pass_probe(self, ids: list[str]) -> tuple[dict[str, Result], Ending | None]:
        """One serial pass (as :meth:`_probe`): its records, and how its process
        ended where it ended before its last test's record (None: it did not)."""
        sandbox = self._free_slot()
        try:
            sandbox.reset()
            serial = self._run(sandbox, ids, trace=True, idle=SERIAL_IDLE)
        finally:
            self.pool.put(sandbox)
        # Stopped by its time (self.killed says it to _find): not an early end.
        killed = serial.pop(KILLED, None) is not None
        if len(serial) >= len(ids) or killed or self._stopped() or _fails(serial):
            # A failure is the suite's to report (under -x the pass ends there).
            return serial, None
        return serial, sandbox.ended or Ending("its process ended with status 0")

    def _beside(self, ids: list[str], checked: list[int]) -> None:
        """The edge runs of ``checked`` (as :meth:`_edge_runs`: the serial order up
        to the last of them in a fresh copy, each alone right before its place)
        as one probe on a slot the serial pass leaves free, while it runs; not
        at all if it ends first.  The pass's records do not exist yet: each test
        runs alone in a process of its own (no batch rules), and the probe is
        stopped once the pass measured the suite and it runs past what
        :meth:`_edge_runs` would allow, or when no test ended for longer than
        the slowest test's alone limit.  Its records wait in
        ``self.beside_records`` for :meth:`_beside_done`."""
        slot = self._beside_slot()
        if slot is None:
            return
        sandbox, began = slot
        out = self._out(sandbox)
        last = {"size": -1, "at": began}

        def late() -> bool:
            if self.beside_cancel.is_set():
                return True
            if not self.serial_ended.is_set() or not self.serial:
                return False
            now = time.monotonic()
            size = out.stat().st_size if out.exists() else 0
            if size != last["size"]:
                last["size"], last["at"] = size, now
            slowest = max(r.seconds for r in self.serial.values())
            return (now - began > 2 * self.timeout + PROBE_TIMEOUT_ALLOWANCE * len(checked)
                    or now - last["at"] > _alone_timeout(slowest))

        try:
            sandbox.reset()
            server = self._server(sandbox)
            found: dict[str, Result] = {}
            if server is None or self._ask(sandbox, server, [{
                    "ids": ids[:checked[-1] + 1], "out": str(out), "trace": False,
                    "alone": [ids[k] for k in checked], "alone_limit": SERIAL_IDLE,
                    "rules": None, "lane": []}], float("inf"), watch=late):
                return
            again = self._read(out, sandbox, found)
            if not self._stopped() and not self.beside_cancel.is_set():
                self.beside_records = (again, found)
        except (OSError, ValueError, ProbeError):
            if not self.stop.is_set():
                raise
        finally:
            self.pool.put(sandbox)

    def _beside_done(self, ids: list[str], serial: dict[str, Result],
                     checked: list[int]) -> None:
        """The records of :meth:`_beside` into the edge pass's, once it ended; its
        runs again after the serial pass where they are no evidence (stopped, or
        the pass showed state outside the copies)."""
        beside = self.beside
        if beside is not None:
            beside.join()
        records, self.beside_records = self.beside_records, None
        if records is None or self.beside_cancel.is_set():
            self._edge_runs(ids, serial, checked, checked[-1])
            return
        again, found = records
        with self.lock:
            self.edge_alone.update(found)
            self.reruns.append((again, set(found)))

    def _beside_slot(self) -> tuple[Sandbox, float] | None:
        """The probe slot the serial pass leaves free, once there is one, and when
        the work beside the pass began (``self.beside_began``); None if the pass
        ends (or the search is stopped) first: that work is then not started."""
        sandbox: Sandbox | None = None
        while sandbox is None:
            if self.serial_ended.is_set() or self._stopped():
                return None
            if len(self.sandboxes) < 2:  # the first is the pass's (:meth:`_widen`)
                self.serial_ended.wait(POLL)
                continue
            with contextlib.suppress(queue.Empty):
                sandbox = self.pool.get(timeout=POLL)
        with self.lock:
            if self.serial_ended.is_set():
                self.pool.put(sandbox)
                return None
            self.beside_began = began = time.monotonic()
        return sandbox, began

    def _screen_beside(self, ids: list[str]) -> None:
        """Screening on the probe slot the serial pass leaves free, while it runs:
        the tests the pass has run so far, :data:`BESIDE_CHUNK` serial seconds of
        them a probe.  While the pass wrote no path (:meth:`_quiet`), each is run
        alone only (as an alone-only batch of the screening runs them,
        :meth:`_alone_only`: a fresh process, the copy's files, several in one
        process where ``probe_plugin._batch`` allows); the tests that cannot be,
        or all once it wrote one, in batches of the usual kind made of whole
        components of the declared graph (:meth:`_beside_batch`; bpypolyskel:
        each module's tests read the module global its first test set).  It
        ends with the pass, or for good once the pass showed a test write
        outside the copies or reach a service (the runs would be no evidence).
        Its records wait in ``self.screened_beside`` and ``self.batched_beside``
        for :meth:`_screen_after`."""
        slot = self._beside_slot()
        if slot is None:
            return
        sandbox = slot[0]
        passing = self.sandboxes[0]
        roots = self._roots(len(ids))
        parts: dict[int, list[int]] = {}
        for k, root in enumerate(roots):
            parts.setdefault(root, []).append(k)
        by_end = sorted(parts.values(), key=lambda part: part[-1])
        taken: set[int] = set()  # in a probe of either kind: not in another
        at, next_part, alone_only = 1, 0, True  # the first test is no target
        size, moved = -1, time.monotonic()  # the pass's records, and when they last grew
        try:
            while not self.serial_ended.is_set() and not self._stopped():
                seen = _pass_records(self, passing)
                if self._outside(seen):
                    return
                if len(seen) != size:
                    size, moved = len(seen), time.monotonic()
                chunk: list[int] = []
                below = len(ids)
                if alone_only and self._quiet(seen):
                    # A chunk's worth of tests is waited for while the pass moves
                    # on; one that sits in a test holds the probe no longer.
                    chunk, at = self._beside_chunk(
                        ids, seen, at, taken, wait=time.monotonic() - moved < BESIDE_CHUNK)
                    below = at  # the tests from there on: alone-only probes first
                if chunk:
                    alone_only = self._beside_alone(ids, seen, sandbox, chunk)
                    continue
                tests, next_part = self._beside_batch(ids, seen, by_end, next_part, taken,
                                                      below)
                if tests:
                    self._beside_batched(ids, seen, sandbox, tests)
                else:
                    self.serial_ended.wait(POLL)
        except (OSError, ValueError, ProbeError):
            if not self.stop.is_set():
                raise
        finally:
            self.pool.put(sandbox)

    def _beside_alone(self, ids: list[str], seen: dict[str, Result], sandbox: Sandbox,
                      chunk: list[int]) -> bool:
        """One probe of :meth:`_screen_beside` that runs ``chunk`` alone only; False:
        the runs alone became too dear (:meth:`_beside_dear`), none is started
        after it."""
        with self.lock:  # the pass ends under it: a chunk is started before, or not
            if self.serial_ended.is_set():
                return False
            self.beside_running = chunk
        rules = self._batching(ids, seen, chunk)
        rules["only"] = True
        order = [ids[k] for k in reversed(chunk)]
        longest = max(seen[ids[k]].seconds for k in chunk)
        found: dict[str, Result] = {}
        sandbox.reset()
        self._run(sandbox, order, alone=order, into=found, alone_rules=rules,
                  alone_limit=_alone_timeout(longest))
        with self.lock:
            self.screened_beside.append((chunk, found))
            self.beside_running = []
            runs = list(self.screened_beside)
        return not self._beside_dear(ids, seen, runs)

    def _beside_batch(self, ids: list[str], seen: dict[str, Result], parts: list[list[int]],
                      start: int, taken: set[int], below: int) -> tuple[list[int], int]:
        """The tests of the next probe of the usual kind :meth:`_screen_beside` runs:
        whole components of the declared graph (``parts``, by their last test,
        from ``start`` on) the pass has run, before ``below``, up to
        :data:`BESIDE_CHUNK` serial seconds or one larger component, and where
        the next one starts.  Left
        to the screening after the pass: a component with a test that did not
        pass, that named prerequisites at run time, or that is in a probe
        already, and one whose batch runs a test after an earlier one outside
        its declared prerequisites (:meth:`_exposed`: the evidence of a whole
        component's batch that :meth:`_batches` takes, with nothing beside)."""
        tests: list[int] = []
        seconds = 0.0
        i = start
        while i < len(parts) and parts[i][-1] < below and ids[parts[i][-1]] in seen:
            part = parts[i]
            cost = sum(seen[ids[k]].seconds + SCREEN_TEST_COST for k in part)
            if tests and seconds + cost > BESIDE_CHUNK:
                break
            i += 1
            mine = [k for k in part if k > 0]  # the first test is no target
            if (not mine or not taken.isdisjoint(part)
                    or any(seen[ids[k]].outcome != "passed" or seen[ids[k]].waits for k in part)
                    or any(self._exposed(ids, [mine]).values())):
                continue
            tests += mine
            seconds += cost
        taken.update(tests)
        return sorted(tests), i

    def _beside_batched(self, ids: list[str], seen: dict[str, Result], sandbox: Sandbox,
                        tests: list[int]) -> None:
        """``tests`` run as the screening runs a batch of the usual kind (its
        process, and each dependent it would check alone by the pass so far,
        :meth:`_combined`, alone before its place); into ``self.batched_beside``.
        Its time limit is its tests' serial seconds', as the screening's is the
        pass's: a probe it stops is screened again after the pass."""
        mine = set(tests)
        dependents = [k for k in self._dependents(ids) if k in mine]
        checked = set(self._combined(ids, seen, dependents, tests))
        order = self._with_declared([ids[k] for k in reversed(tests)])
        batch = BesideBatch(tests, order, [k for k in reversed(tests) if k in checked])
        with self.lock:
            if self.serial_ended.is_set():
                return
            self.batch_running = batch
        took = sum(seen[nid].seconds for nid in order if nid in seen)
        longest = max((seen[ids[k]].seconds for k in batch.alone), default=0.0)
        sandbox.reset()
        batch.got = self._run(
            sandbox, order, alone=[ids[k] for k in batch.alone], into=batch.found,
            alone_rules=self._batching(ids, seen, batch.alone),
            alone_limit=_alone_timeout(longest),
            limit=2 * _probe_timeout(took)
            + PROBE_TIMEOUT_ALLOWANCE * len(batch.alone))
        with self.lock:
            self.batched_beside.append(batch)
            self.batch_running = None

    @staticmethod
    def _beside_dear(ids: list[str], seen: dict[str, Result],
                     runs: list[tuple[list[int], dict[str, Result]]]) -> bool:
        """Whether the runs alone beside the pass so far (``runs``: each probe's
        tests and records) took over :data:`BESIDE_COST` times the pass's seconds
        for their tests: then the screening after the pass runs the rest (its
        verdicts are the same either way)."""
        alone = sum(r.seconds for _, found in runs for r in found.values())
        passed = sum(seen[ids[k]].seconds + SCREEN_TEST_COST for chunk, _ in runs for k in chunk)
        return alone > BESIDE_COST * passed

    def _beside_chunk(self, ids: list[str], seen: dict[str, Result],
                      at: int, taken: set[int], *, wait: bool = False) -> tuple[list[int], int]:
        """The tests from ``at`` on that :meth:`_screen_beside` runs next (those of
        them the pass has run, up to :data:`BESIDE_CHUNK` serial seconds, or one
        longer test alone), and where the next chunk starts.  Left to the
        screening after the pass: a test that did not pass, that changed a test
        module's values or the environment (or a prerequisite of it did), that
        named prerequisites at run time, or that shares a module or class
        fixture instance with a test the probe runs; and a chunk with no
        declared prerequisite in it (no alone-only batch, :meth:`_alone_only`);
        a test of ``taken`` is in a probe already (the chunk's join it).
        ``wait``: none yet (and ``at`` again) while the pass has run less than a
        chunk's seconds of tests from ``at`` on."""
        wide = self._wides()
        chunk: list[int] = []
        used: set[tuple[str, str, str]] = set()
        seconds = 0.0
        start, span = at, 0.0  # span: the pass's seconds from ``start`` on, all its tests
        while at < len(ids) and ids[at] in seen:
            k, r = at, seen[ids[at]]
            if chunk and seconds + r.seconds > BESIDE_CHUNK:
                break
            at += 1
            span += r.seconds + SCREEN_TEST_COST
            run = {k, *self._prerequisites(k)}
            mine = set().union(*(wide[p] for p in run))
            if (r.outcome != "passed" or r.waits or k in taken
                    or any(seen.get(ids[p], FAILED).tests_state for p in run)
                    or sum(len(wide[p]) for p in run) != len(mine)
                    or not used.isdisjoint(mine)):
                continue
            chunk.append(k)
            used |= mine
            seconds += r.seconds + SCREEN_TEST_COST
        if not any(self._prerequisites(k) for k in chunk):
            return [], at
        if wait and at < len(ids) and ids[at] not in seen and span < BESIDE_CHUNK:
            # The pass has not run a chunk's worth yet: the probe waits for it (its
            # fresh processes cost most where they run few tests: slurk's first
            # chunk, of the 27 tests run so far, took two set-ups of its
            # application and read as too dear for the rest of the pass).  Counted
            # in all the pass's tests: the batches of whole components
            # (:meth:`_beside_batch`, up to ``at``) wait no longer than that.
            return [], start
        taken.update(chunk)
        return chunk, at

    def _screen_after(self, ids: list[str], serial: dict[str, Result], targets: list[int],
                      combined: list[int]) -> list[int]:
        """The screening after the pass (:meth:`_screen`: its suspects) of what the
        screening beside it (:meth:`_screen_beside`) did not cover.  The probe it
        still runs is not waited for where the pass shows it will count (its
        tests' outcomes aside): its tests are screened after the rest only if
        one of them misses its serial outcome (alone-only) or fails (a batch of
        the usual kind)."""
        with self.lock:
            runs, self.screened_beside = self.screened_beside, []
            batches, self.batched_beside = self.batched_beside, []
            running, batch = self.beside_running, self.batch_running
        cancelled = self.beside_cancel.is_set()
        usable = not cancelled and self._quiet(serial)
        ran = self._beside_kept(ids, serial, targets, combined, runs) if usable else set()
        if not cancelled:
            ran |= self._batches_kept(ids, targets, combined, batches)
        if not usable or not self._beside_counts(ids, running, targets, combined):
            running = []
        if batch is not None and (cancelled or not self._batch_counts(ids, batch, targets,
                                                                      combined)):
            batch = None
        waiting = set(running) | set(batch.tests if batch is not None else [])
        rest = [t for t in targets if t not in ran and t not in waiting]
        alone = [d for d in combined if d not in ran and d not in waiting]
        suspects = self._screen(ids, rest, alone=alone) if rest or alone else []
        thread, self.screening_beside = self.screening_beside, None
        if thread is not None:
            thread.join()
        with self.lock:
            runs, self.screened_beside = self.screened_beside, []
            batches, self.batched_beside = self.batched_beside, []
        if not waiting:  # the records of a probe that does not count stay out
            return suspects
        kept = self._beside_kept(ids, serial, targets, combined, runs) if running else set()
        if batch is not None:
            kept |= self._batches_kept(ids, targets, combined,
                                       [b for b in batches if b is batch])
        missed = waiting - kept
        if not missed:
            return suspects
        # (A budget that ran out lists them as left, as any batch it cuts.)
        again = self._screen(ids, sorted(missed.intersection(targets)),
                             alone=sorted(missed.intersection(combined)))
        return sorted({*suspects, *again})

    def _beside_counts(self, ids: list[str], chunk: list[int], targets: list[int],
                       combined: list[int]) -> bool:
        """Whether a probe of :meth:`_screen_beside` is what the screening would run
        (its tests' outcomes aside): its tests are screened, and checked alone
        where they have a declared prerequisite, and it is an alone-only batch
        (:meth:`_alone_only`)."""
        run = self._with_declared([ids[k] for k in reversed(chunk)])
        return bool(chunk) and set(targets).issuperset(chunk) \
            and self._alone_only(ids, chunk, run, set(combined))

    def _beside_kept(self, ids: list[str], serial: dict[str, Result], targets: list[int],
                     combined: list[int],
                     runs: list[tuple[list[int], dict[str, Result]]]) -> set[int]:
        """The tests of ``runs`` (probes of :meth:`_screen_beside`, run while the pass
        was :meth:`_quiet`) whose records are the screening's: those of each probe
        that counts (:meth:`_beside_counts`) and where every test gave its serial
        outcome alone (else the screening runs them again, as it does an
        alone-only batch's)."""
        kept: set[int] = set()
        for chunk, found in runs:
            if not self._beside_counts(ids, chunk, targets, combined) or any(
                    found.get(ids[k], FAILED).outcome != serial.get(ids[k], FAILED).outcome
                    for k in chunk):
                continue
            with self.lock:
                self.screened.update(found)
                self.screen_runs.append((found, found))
            kept.update(chunk)
        return kept

    def _batch_counts(self, ids: list[str], batch: BesideBatch, targets: list[int],
                      combined: list[int]) -> bool:
        """Whether a probe of the usual kind of :meth:`_screen_beside` is a batch the
        screening would run, by what the whole pass showed (its tests' outcomes
        aside): its tests are screened, it runs what :meth:`_with_declared` runs
        for them now (a run-time ``depends()`` of a later test joins no test to
        it), each with nothing earlier before it beyond its prerequisites
        (:meth:`_exposed`), and it checks alone the dependents the screening
        checks alone (:meth:`_combined`)."""
        tests = set(batch.tests)
        return (tests.issubset(targets)
                and batch.order == self._with_declared([ids[k] for k in reversed(batch.tests)])
                and not any(self._exposed(ids, [batch.tests]).values())
                and sorted(batch.alone) == sorted(tests.intersection(combined)))

    def _batches_kept(self, ids: list[str], targets: list[int], combined: list[int],
                      batches: list[BesideBatch]) -> set[int]:
        """The tests of ``batches`` (probes of the usual kind of :meth:`_screen_beside`)
        whose records are the screening's, as ``_screen`` takes a batch's: those of
        each batch that counts (:meth:`_batch_counts`), not stopped by its time,
        where every test passed in the batch's process or alone (else the
        screening runs them again: a suspect is searched from its own batch)."""
        kept: set[int] = set()
        for batch in batches:
            if KILLED in batch.got or not self._batch_counts(ids, batch, targets, combined) \
                    or any(batch.got.get(ids[k], FAILED).outcome != "passed"
                           and batch.found.get(ids[k], FAILED).outcome != "passed"
                           for k in batch.tests):
                continue
            with self.lock:
                self.screened.update(batch.found)
                self.together.update((nid, batch.got.get(nid, FAILED).outcome)
                                     for nid in batch.found)
                self.screen_runs.append((batch.got, batch.found))
            kept.update(batch.tests)
        return kept

    def _outside(self, serial: dict[str, Result]) -> bool:
        """A test of the serial pass connected to a server or wrote outside the
        rootdir (not in the probe's own temporary folders): a run beside it
        could change what it found, or it what the run found."""
        mine = str(self.workdir) + os.sep if self.workdir is not None else None
        return any(r.services or any(os.path.isabs(p) and (mine is None or not p.startswith(mine))
                                     for p in r.touches.writes) for r in serial.values())

    def _edges_pass(self, ids: list[str], serial: dict[str, Result], dependents: list[int],
                    write: _Write) -> None:
        """One verdict per declared edge, from its dependent's run alone in a fresh
        process after its prerequisites ran in another (the screening's, else the
        edge runs'): void where a run of the serial order in a fresh copy showed
        that the dependent or a prerequisite does not repeat its serial outcome,
        else separable or kept by the dependent's outcome.

        Over 60 lines: the tests the probes do not repeat, then one verdict per
        declared edge; both loops read the records gathered here.
        """
        if not dependents:
            return
        if not FORKS:
            write("dagorder: declared edges not checked: the check forks processes, "
                  "which this platform cannot")
            return
        with self.lock:
            alone = {**{nid: r for nid, r in self.screened.items()
                        if r.outcome == serial.get(nid, FAILED).outcome
                        or nid in self.settled},
                     **self.edge_alone}
            reruns = list(self.reruns)
        prints = evidence.Fingerprints(self.config.rootpath)
        verdicts: list[edges_file.Verdict] = []
        n = len(ids)
        left = 0
        # The serial order run again in a fresh copy: a test that does not repeat
        # its serial outcome there depends on state no probe starts from.  Not a
        # test checked alone here that then failed: its alone run, right before
        # its place in that copy, already did what it does to its files (a test
        # that reads a file and deletes it finds none the second time).
        for rerun, checked in reruns:
            for k, nid in enumerate(ids):
                seen = rerun.get(nid)
                if seen is not None and seen.outcome != serial.get(nid, FAILED).outcome \
                        and not (nid in checked and seen.outcome == "failed"):
                    self.found.unreproducible[k] = seen.outcome
        again = self.found.unreproducible
        for d in dependents:
            got = alone.get(ids[d])
            if got is None:
                left += 1
                continue
            moved = sorted(k for k in {d, *self._prerequisites(d)} if k in again)
            if moved:
                # Its probe ran after tests that did not repeat their serial outcome:
                # the evidence is void, the edges stay kept.
                first = moved[0]
                for p in sorted(q for q in set(self.declared[d]) if q < n):
                    verdicts.append(edges_file.Verdict(
                        ids[d], ids[p], False,
                        f"no evidence: {ids[first]} {again[first]} when the serial order "
                        f"ran again in a fresh copy (serially: "
                        f"{serial.get(ids[first], FAILED).outcome})",
                        prints.of((ids[p], ids[d]))))
                continue
            wanted = serial.get(ids[d], FAILED).outcome
            same = got.outcome == wanted
            probe = "" if same else (
                f"{ids[d]} {got.outcome} in a fresh process after its prerequisites ran "
                f"in another (serially: {wanted})")
            direct = sorted(q for q in set(self.declared[d]) if q < n)
            # A dependent that needs its process may need only some of its
            # prerequisites there: the others' edges are separable.
            needs = set(direct) if same or len(direct) < 2 else \
                self._needed_direct(ids, serial, d, direct)
            for p in direct:
                verdicts.append(edges_file.Verdict(
                    ids[d], ids[p], same or p not in needs, "" if same or p not in needs
                    else probe, prints.of((ids[p], ids[d]))))
        free = sum(v.separable for v in verdicts)
        write(f"dagorder: declared edges: {free:,} of {plural(len(verdicts), 'edge')} "
              "separable (the test passed in a fresh process after its prerequisites ran "
              "in another, or with only the others in its process)"
              + (f"; {plural(left, 'test')} not reached (stopped)" if left else ""))
        self.found.unchecked = [ids[d] for d in dependents if ids[d] not in alone]
        self.found.verdicts = verdicts

    def _needed_direct(self, ids: list[str], serial: dict[str, Result], d: int,
                       direct: list[int]) -> set[int]:
        """Which of ``d``'s direct prerequisites it needs in its process (it failed
        in a fresh one): each in turn is left out of the tests run in ``d``'s
        process (those declared edges join to it) while the serial prefix runs
        in two processes taking turns, the rest in the other, their files in
        place; one whose absence leaves every outcome as serially is not needed.
        Kept without a probe: one another path of declared edges joins to ``d``
        anyway, or that shares a module or class fixture instance with it (the
        state may live in the fixture, one instance per process)."""
        needs = set(direct)
        wide = self._wides()
        for p in direct:
            if self._stopped() or not wide[d].isdisjoint(wide[p]):
                continue
            lane = self._joined(d, {q for q in direct if q not in needs or q == p})
            if p in lane:
                continue
            got: dict[str, Result] = {}
            sandbox = self.pool.get()
            try:
                sandbox.reset()
                got = self._run(sandbox, ids[:d + 1], lane=[ids[k] for k in sorted(lane)],
                                limit=2 * self.timeout)
            finally:
                self.pool.put(sandbox)
            if all(got.get(nid, FAILED).outcome == serial.get(nid, FAILED).outcome
                   for nid in ids[:d + 1]):
                needs.discard(p)
        return needs

    def _joined(self, d: int, without: set[int]) -> set[int]:
        """The tests up to ``d`` that declared edges join to it (either way), less
        its edges to ``without``."""
        near: dict[int, list[int]] = {}
        for k in range(d + 1):
            for q in self.declared[k]:
                if q <= d and not (k == d and q in without):
                    near.setdefault(k, []).append(q)
                    near.setdefault(q, []).append(k)
        return {d} | _reached(d, lambda t: near.get(t, ()))

    def _batching(self, ids: list[str], serial: dict[str, Result],
                  chunk: list[int]) -> dict[str, object]:
        """What the probe needs to run several of ``chunk`` alone in one fresh
        process (``probe_plugin._batch``): their serial outcomes, their declared
        prerequisites among them (transitively), and those that changed the
        process's state in the serial pass."""
        members = set(chunk)
        prerequisites: dict[str, list[str]] = {}
        for d in chunk:
            seen = self._prerequisites(d)
            if seen & members:
                prerequisites[ids[d]] = [ids[p] for p in sorted(seen & members)]
        return {"expect": {ids[k]: serial.get(ids[k], FAILED).outcome for k in chunk},
                "prerequisites": prerequisites,
                "stateful": [ids[k] for k in chunk if serial.get(ids[k], FAILED).state]}

    def _drop_leftovers(self, serial: dict[str, Result], write: _Write) -> bool:
        """Files the tests write that an earlier run left in the project would let a
        test pass without the test that writes them: the copies leave out those
        git does not track (a tracked one is part of the project).  True: some
        were dropped (the probes before ran with them)."""
        root = self.config.rootpath
        present = sorted({p for r in serial.values() for p in r.touches.writes
                          if not os.path.isabs(p) and (root / p).is_file()})
        if not present:
            return False
        tracked = _tracked(root, present)
        if tracked is None:
            write(f"dagorder: {plural(len(present), 'file')} the tests write "
                  f"{'was' if len(present) == 1 else 'were'} in the project "
                  f"before the run (not a git checkout: kept), e.g. {present[0]}; a test "
                  "that needs them is found only once they are removed")
            return False
        left = [p for p in present if p not in tracked]
        if left:
            write(f"dagorder: {plural(len(left), 'file')} the tests write "
                  f"{'was' if len(left) == 1 else 'were'} left in the project "
                  f"by an earlier run (git does not track them), e.g. {left[0]}; the probes "
                  "run without them")
            for sandbox in self.sandboxes:
                sandbox.drop(left)
            if self.held is not None:
                self.held.sandbox.drop(left)
        return bool(left)

    def _declared(self, n: int) -> list[list[int]]:
        runner = self.config.pluginmanager.get_plugin(DRIVER_NAME)
        plan = getattr(runner, "plan", None)
        graph = getattr(plan, "graph", None)
        if graph is None:
            return [[] for _ in range(n)]
        return [[p for p in (*graph.requires[k], *graph.after[k]) if p < n] for k in range(n)]

    # -- the steps ---------------------------------------------------------------------

    def _screen(self, ids: list[str], targets: list[int], *, retried: bool = False,
                alone: Sequence[int] = (), together: bool = False) -> list[int]:
        """The tests of ``targets`` that fail in batches run in reverse serial order,
        each test after its declared prerequisites.  Those of ``alone`` also run
        alone in a fresh process right before their place (their prerequisites'
        files in place, their process not): passing there answers the screening
        and the check of their declared edges at once (``self.screened``), and
        a test that passes there is no suspect whatever its batch's process
        did (its own run alone wrote its files first).  A batch whose every test
        qualifies (:meth:`_alone_only`) runs its tests alone only, unless
        ``together``; those that did not give their serial outcome there are
        screened again in batches of the usual kind.

        Over 60 lines: the batches built here, their runs (``screen``, with runs
        alone or without) and the suspects read from both share the batch list.
        """
        serial = self.serial
        checked = set(alone)
        batches = self._batches(ids, targets, checked, together)
        # A dependent the screening does not screen (skipped serially: a skip
        # mark) joins a batch for its run alone only; else one such test would
        # cost the edge pass a serial prefix.
        screened = set(targets)
        extras = [k for k in alone if k not in screened]
        for i, k in enumerate(extras):
            batches[i % len(batches)] = sorted([*batches[i % len(batches)], k])
        longest = max((serial.get(ids[k], FAILED).seconds for k in checked), default=0.0)
        orders = [self._with_declared([ids[k] for k in reversed(b)]) for b in batches]
        only = [not together and self._alone_only(ids, b, order, checked)
                for b, order in zip(batches, orders, strict=True)]
        orders = [self._alone_order(ids, b, order) if o else order
                  for b, order, o in zip(batches, orders, only, strict=True)]

        def screen(batch: list[int], order: list[str],
                   alone_only: bool) -> dict[str, Result] | None:
            if self._stopped():
                return None
            mine = [k for k in reversed(batch) if k in checked]
            found: dict[str, Result] = {}
            if alone_only:
                # Each test once, alone: see _alone_only for why the batch's own run
                # of them would add no evidence.
                mine = [self.order[nid] for nid in order]
            if not mine:
                got = self._probe([ids[k] for k in reversed(batch)])
            else:
                slowest = max([longest] + [serial.get(ids[k], FAILED).seconds for k in mine])
                got = self._probe_alone(ids, serial, order, mine, slowest, found,
                                        only=alone_only)
                if alone_only:  # no run of the batch's own: its records are the runs alone
                    got = {**got, **found}
                    # A prerequisite's run here is not its check: its own batch has that.
                    members = {ids[k] for k in batch}
                    found = {nid: r for nid, r in found.items() if nid in members}
                with self.lock:
                    self.screened.update(found)
                    if not alone_only:
                        self.together.update((nid, got.get(nid, FAILED).outcome)
                                             for nid in found)
            with self.lock:
                self.screen_runs.append((got, found))
            if self._stopped() and any(ids[k] not in got for k in batch):
                return None  # cut by the budget or Ctrl-C: no outcome, not a failure
            return got

        with cf.ThreadPoolExecutor(self.slots) as ex:
            runs = list(ex.map(screen, batches, orders, only))
        # A batch the budget or Ctrl-C left unrun is not searched: listed as left.
        self.found.unfinished += sorted(k for b, run in zip(batches, runs, strict=True)
                                        if run is None for k in b if k in screened)
        # An alone-only batch where a test missed its serial outcome gives no
        # verdict: that test's failure could come from files the batch's tests left
        # from their own runs alone, and the tests after it found the files of a
        # run that was not the serial one.  Screened, and run alone, again as usual.
        redo = [k for b, run, o, order in zip(batches, runs, only, orders, strict=True)
                if o and run is not None and any(
                    run.get(nid, FAILED).outcome != serial.get(nid, FAILED).outcome
                    for nid in order) for k in b]
        failed = [k for b, run, o in zip(batches, runs, only, strict=True)
                  if run is not None and not o
                  for k in b if k in screened and run.get(ids[k], FAILED).outcome != "passed"
                  and self.screened.get(ids[k], FAILED).outcome != "passed"]
        waited = self._waited(ids, failed, [r for r in runs if r is not None])
        again_failed = self._screen(ids, [k for k in redo if k in screened], retried=retried,
                                    alone=[k for k in redo if k in checked],
                                    together=True) if redo else []
        if not waited or retried:
            return sorted([*failed, *again_failed])
        # Run again with the prerequisites their run-time depends() named: one
        # that passes so was skipped alone only for a declared prerequisite.
        again = set(self._screen(ids, waited, retried=True))
        return sorted([*(k for k in failed if k not in waited or k in again), *again_failed])

    def _batches(self, ids: list[str], targets: list[int], checked: set[int],
                 together: bool = False) -> list[list[int]]:
        """The screening's batches: ``targets`` taken in turn (a stride), or whole
        components of the declared graph (prerequisites, run-time ``depends()``
        included) shared out by their serial seconds, whichever the serial pass's
        durations say ends sooner, within ``SCREEN_SLACK``; whole components only
        where they run no target after an earlier test outside its declared
        prerequisites that the stride does not run before it (:meth:`_exposed`).

        A batch runs its tests' declared prerequisites with them, so a stride that
        cuts a component runs its prerequisites in every batch (bpypolyskel: each
        module's ``test_polygonize`` in both batches, 1.8 serial passes of work
        for one); whole components run each test once.  What a target is screened
        against is the same either way: its declared prerequisites before it, and
        otherwise the batch's tests in reverse serial order, except where another
        target's prerequisites run before it, which the check above keeps to what
        the stride did (pynurbs: one batch would run ``test_fitting.py``'s
        ``TestCurve`` before ``TestFunction``, pulled in by the module's
        ``test_end``; its stride batches do not).
        """
        stride = self._stride(ids, targets)
        whole = self._whole(ids, targets, checked, together)
        if whole and self._makespan(ids, whole, checked, together) <= \
                SCREEN_SLACK * self._makespan(ids, stride, checked, together):
            before, after = self._exposed(ids, stride), self._exposed(ids, whole)
            if all(after.get(t, set()) <= before.get(t, set()) for t in targets):
                return whole
        return stride

    def _stride(self, ids: list[str], targets: list[int]) -> list[list[int]]:
        """``targets`` dealt out in turn to as many batches as keep the work they
        run (with their declared prerequisites) within ``SCREEN_WORK``."""
        stride: list[list[int]] = []
        for per_slot in range(BATCHES_PER_SLOT, 0, -1):
            count = max(1, min(len(targets), self.slots * per_slot))
            stride = [targets[k::count] for k in range(count)]
            # Each batch runs with its tests' declared prerequisites: where they
            # are dense, every batch grows to nearly the whole suite (pynurbs:
            # 4 of 261-290 tests of 303), and fewer batches cost fewer runs.
            work = sum(len(self._with_declared([ids[k] for k in b])) for b in stride)
            if work <= SCREEN_WORK * len(targets):
                break
        return stride

    def _whole(self, ids: list[str], targets: list[int], checked: set[int],
               together: bool) -> list[list[int]]:
        """``targets`` as whole components of the declared graph, shared out by
        their serial seconds over at most ``slots x BATCHES_PER_SLOT`` batches."""
        roots = self._roots(len(ids))
        parts: dict[int, list[int]] = {}
        for t in targets:
            parts.setdefault(roots[t], []).append(t)
        # Largest first, each to the batch with the fewest seconds so far (ties:
        # collection order): the batches then run largest first.
        count = min(len(parts), self.slots * BATCHES_PER_SLOT)
        loads = [0.0] * count
        whole: list[list[int]] = [[] for _ in range(count)]
        costs = {p[0]: self._cost(ids, p, checked, together) for p in parts.values()}
        for part in sorted(parts.values(), key=lambda p: (-costs[p[0]], p[0])):
            i = loads.index(min(loads))
            whole[i] += part
            loads[i] += costs[part[0]]
        return [sorted(b) for _, b in sorted(zip(loads, whole, strict=True),
                                             key=lambda lb: -lb[0]) if b]

    def _roots(self, n: int) -> list[int]:
        """Each of the first ``n`` tests' component of the declared graph
        (prerequisites, run-time ``depends()`` included), named by one test of it."""
        root = list(range(n))

        def find(k: int) -> int:
            while root[k] != k:
                root[k] = root[root[k]]
                k = root[k]
            return k

        for k in range(n):
            for p in self._before(k):
                if p < n:
                    root[find(k)] = find(p)
        return [find(k) for k in range(n)]

    def _exposed(self, ids: list[str], batches: list[list[int]]) -> dict[int, set[int]]:
        """For each test of ``batches``, the earlier tests outside its declared
        prerequisites that its batch runs before it: a need of one of those the
        screening cannot show."""
        out: dict[int, set[int]] = {}
        for batch in batches:
            members = set(batch)
            seen: list[int] = []
            for nid in self._with_declared([ids[k] for k in reversed(batch)]):
                k = self.order[nid]
                if k in members and k not in out:
                    mine = _reached(k, self._before)
                    out[k] = {u for u in seen if u < k and u not in mine}
                seen.append(k)
        return out

    def _cost(self, ids: list[str], batch: list[int], checked: set[int],
              together: bool = False) -> float:
        """A batch's serial seconds: its tests with their declared prerequisites,
        and again those it also runs alone (all once when it runs them alone only,
        see :meth:`_alone_only`)."""
        def cost(nids: Iterable[str]) -> float:
            return sum(self.serial.get(nid, FAILED).seconds + SCREEN_TEST_COST for nid in nids)

        run = self._with_declared([ids[k] for k in reversed(batch)])
        if not together and self._alone_only(ids, batch, run, checked):
            return cost(self._alone_order(ids, batch, run))
        return cost(run) + cost(ids[k] for k in batch if k in checked)

    def _makespan(self, ids: list[str], batches: list[list[int]], checked: set[int],
                  together: bool) -> float:
        """When the batches would end, by serial seconds, each started in turn on
        the probe slot that is free first (as the screening's pool does)."""
        free = [0.0] * self.slots
        for batch in batches:
            i = free.index(min(free))
            free[i] += self._cost(ids, batch, checked, together)
        return max(free)

    def _alone_only(self, ids: list[str], batch: list[int], run: list[str],
                    checked: set[int]) -> bool:
        """Whether a batch runs each of its tests alone only, once, with no run of
        its own (``run``: its tests with their declared prerequisites, in its
        order): every test of ``batch`` is one checked alone or has no declared
        prerequisite (its screening is then its run alone: a fresh process, the
        files of the tests before it in the batch; not in a batch with no test
        checked alone, which this would not make cheaper), none of ``run`` changed the
        environment or a test module's or conftest's values in the serial pass
        (a package's lazy set-up is made again by each fresh process, as in
        :meth:`_combined`), and no two of ``run`` share a module or class
        fixture instance.

        A test checked alone gets its verdict from its run alone; its run in the
        batch's process after that is there only for what it leaves the tests
        after it.  They are checked alone too, so the batch's process is no
        evidence for them; what they find is the files, which each test's own run
        alone has written in its place, in the batch's order (a child per test,
        or tests that are not each other's prerequisites in one, as
        ``probe_plugin._batch`` joins them): with no state changed and no fixture
        instance shared, a test writes there what it writes in the batch's
        process.  The batch's second run of every test (pynurbs: a third of the
        screening's runs) gives no evidence these runs do not.
        """
        if not checked.intersection(batch) \
                or any(k not in checked and self._before(k) for k in batch):
            return False
        wide = self._wides()
        seen: set[tuple[str, str, str]] = set()
        for nid in run:
            k = self.order.get(nid)
            if k is None or self.serial.get(nid, FAILED).tests_state \
                    or not seen.isdisjoint(wide[k]):
                return False
            seen |= wide[k]
        return True

    def _alone_order(self, ids: list[str], batch: list[int], run: list[str]) -> list[str]:
        """What a batch that runs its tests alone only (:meth:`_alone_only`) runs:
        ``run``, its tests with their declared prerequisites, or only its own
        tests where the serial pass was :meth:`_quiet`.  Each runs in a child
        forked from the untouched server: a prerequisite's run alone gives the
        tests after it nothing but the files it writes, and it writes none
        (pynurbs: each of its two batches ran 296 of its 303 tests alone, to
        screen 151)."""
        if not self._quiet(self.serial):
            return run
        return [ids[k] for k in reversed(batch)]

    def _runtime(self, ids: list[str], serial: dict[str, Result]) -> list[list[int]]:
        """Each test's prerequisites named by run-time ``depends()`` calls in the
        serial pass (none after it).  A module or class fixture's call is recorded
        once per instance, on the test that set it up; a test that recorded none
        also takes what the nearest earlier test sharing such an instance with it
        recorded (names of its own module): a probe may set the instance up for
        it, and pytest keeps the fixture's skip for the instance's other users of
        that probe, which then fail with no call of their own (archive-tools: 46
        tests failed the screening, their prerequisites run before them)."""
        wide = self._wides()
        last: dict[tuple[str, str, str], int] = {}
        out: list[list[int]] = []
        for k, nid in enumerate(ids):
            names = list(serial[nid].waits) if nid in serial else []
            if names:
                last.update(dict.fromkeys(wide[k], k))
            else:
                j = max((last[key] for key in wide[k] if key in last), default=None)
                module = nid.split("::", 1)[0]
                names = [w for w in serial[ids[j]].waits
                         if w.split("::", 1)[0] == module] if j is not None else []
            out.append([self.order[w] for w in names if self.order.get(w, k) < k])
        return out

    def _waited(self, ids: list[str], failed: list[int],
                runs: list[dict[str, Result]]) -> list[int]:
        """Those of ``failed`` whose run-time ``depends()`` named a test before
        them that the serial pass did not see them wait for (a module fixture
        calls it once per instance: serially, for its first user only); those
        are added to ``self.runtime``."""
        seen = {nid: r for run in runs for nid, r in run.items()}
        out = []
        for k in failed:
            new = [p for p in (self.order.get(w, k) for w in seen.get(ids[k], FAILED).waits)
                   if p < k and p not in self.runtime[k]]
            if new:
                self.runtime[k] = [*self.runtime[k], *new]
                out.append(k)
        return out

    def _search(self, ids: list[str], suspects: list[int], hints: dict[int, list[int]],
                write: _Write) -> tuple[dict[int, list[int]], list[int]]:
        """Each suspect's needs: among its hints first (short probes), else its whole prefix.

        Over 60 lines: one test's search (``search``, its probes and what is no
        answer) and the loop that waits for them all, prints progress and sorts
        their ends share the two executors made here.
        """
        width = max(1, self.slots // max(1, len(suspects)))
        self.left = len(suspects)
        probes_ex = cf.ThreadPoolExecutor(self.slots)

        def search(t: int) -> list[int]:
            def over(among: Sequence[int]) -> Callable[[Sequence[Sequence[int]]], list[bool]]:
                def probes(subsets: Sequence[Sequence[int]]) -> list[bool]:
                    if self._stopped():
                        raise SearchStopped
                    runs = [probes_ex.submit(
                        self._probe, [*(ids[among[k]] for k in s), ids[t]]) for s in subsets]
                    answers = [r.result() for r in runs]
                    if self._stopped() and any(ids[t] not in a for a in answers):
                        # The budget or Ctrl-C cut (or never started) a probe: no answer.
                        raise SearchStopped
                    if any(KILLED in a and ids[t] not in a for a in answers):
                        # A timeout is not an answer: the test is left unsearched.
                        raise ProbeTimedOut
                    return [a.get(ids[t], FAILED).outcome == "passed" for a in answers]
                return probes

            try:
                if over([])([[]])[0]:
                    return []
                hinted = hints.get(t, [])
                if hinted and over(hinted)([range(len(hinted))])[0]:
                    return [hinted[k] for k in needed(len(hinted), over(hinted), width=width)]
                return needed(t, over(range(t)), width=width)
            finally:
                with self.lock:
                    self.left -= 1

        needs: dict[int, list[int]] = {}
        unfinished: list[int] = []
        with probes_ex, cf.ThreadPoolExecutor(min(64, max(1, len(suspects)))) as ex:
            futures = {t: ex.submit(search, t) for t in suspects}
            shown = (-1, -1)
            while True:
                _, pending = cf.wait(futures.values(), timeout=PROGRESS_EVERY)
                now = (self.left, self.probes_run)
                if now != shown and pending:
                    write(f"dagorder: {plural(now[0], 'test')} left to search, "
                          f"{plural(now[1], 'probe')} run")
                    shown = now
                if not pending:
                    break
            for t, fut in futures.items():
                try:
                    found = fut.result()
                except ProbeTimedOut:
                    self.found.timed_out.append(t)
                    continue
                except NotReproducible:
                    self.found.unreproducible.setdefault(t, "")
                    continue
                except SearchStopped:
                    unfinished.append(t)
                    continue
                if found:
                    needs[t] = found
        return needs, unfinished

    def _same_process(self, ids: list[str], needs: dict[int, list[int]],
                      serial: dict[str, Result]) -> set[int]:
        """The tests that need their prerequisites' process, not only their files.

        Probed (the prerequisites in one process, the test in the next) unless
        the serial pass settles it: each prerequisite wrote a path the test
        touched and changed nothing in the process a later test could read
        (files only), or none wrote such a path (the process: at worst the
        two share a worker they did not need to).
        """
        def settled(t: int) -> bool | None:
            mine = serial.get(ids[t], FAILED).touches
            seen = [serial.get(ids[p], FAILED) for p in needs[t]]
            wrote = [not r.touches.writes.isdisjoint(mine.reads | mine.writes) for r in seen]
            if all(wrote) and not any(r.state for r in seen):
                return False
            if not any(wrote):
                return True
            return None

        def check(t: int) -> bool:
            if self._stopped():
                return True  # unknown: kept on one worker (safe)
            sandbox = self.pool.get()
            try:
                sandbox.reset()
                self._run(sandbox, [ids[k] for k in needs[t]])
                after = self._run(sandbox, [ids[t]])
            finally:
                self.pool.put(sandbox)
            return after.get(ids[t], FAILED).outcome != "passed"

        known = {t: settled(t) for t in sorted(needs)}
        asked = [t for t, same in known.items() if same is None]
        with cf.ThreadPoolExecutor(self.slots) as ex:
            answers = list(ex.map(check, asked))
        known.update(zip(asked, answers, strict=True))
        return {t for t, same in known.items() if same}

    def _conflicts(self, ids: list[str], pairs: list[tuple[int, int, str]],
                   needs: dict[int, list[int]], write: _Write
                   ) -> tuple[list[tuple[int, int, str]], list[tuple[int, int, str]]]:
        """The pairs that failed when overlapped, and those left (the budget, Ctrl-C)."""
        def chain(t: int) -> list[str]:
            seen = _reached(t, lambda k: needs.get(k, ()))
            return [ids[k] for k in sorted(seen)] + [ids[t]]

        done = [0]

        def clash(pair: tuple[int, int, str]) -> bool | None:
            i, j, _ = pair
            for _ in range(OVERLAP_ATTEMPTS):
                if self._stopped():
                    return None
                sandbox = self.pool.get()
                try:
                    sandbox.reset()
                    runs = self._together(sandbox, [(chain(i), ids[i]), (chain(j), ids[j])])
                finally:
                    self.pool.put(sandbox)
                if self._stopped() and any(nid not in r for r, nid in
                                           zip(runs, (ids[i], ids[j]), strict=True)):
                    return None  # cut by the budget or Ctrl-C: left, not a clash
                if any(r.get(nid, FAILED).outcome != "passed"
                       for r, nid in zip(runs, (ids[i], ids[j]), strict=True)):
                    return True
            with self.lock:
                done[0] += 1
            return False

        with cf.ThreadPoolExecutor(max(1, self.slots // 2)) as ex:
            futures = [ex.submit(clash, pair) for pair in pairs]
            shown = -1
            while True:
                _, pending = cf.wait(futures, timeout=PROGRESS_EVERY)
                if not pending:
                    break
                if done[0] != shown:
                    write(f"dagorder: {done[0]} of {plural(len(pairs), 'pair')} overlapped")
                    shown = done[0]
            answers = [f.result() for f in futures]
        hits = [p for p, hit in zip(pairs, answers, strict=True) if hit]
        left = [p for p, hit in zip(pairs, answers, strict=True) if hit is None]
        return hits, left

    # -- probes ------------------------------------------------------------------------

    def _probe(self, ids: list[str], *, trace: bool = False,
               idle: float | None = None) -> dict[str, Result]:
        """``ids`` in a fresh process, in a freshly reset copy of the rootdir."""
        sandbox = self._free_slot()
        try:
            sandbox.reset()
            return self._run(sandbox, ids, trace=trace, idle=idle)
        finally:
            self.pool.put(sandbox)

    def _free_slot(self) -> Sandbox:
        """A probe slot from the pool; past :data:`WIDEN_WAIT` with all of them busy
        after the serial pass, the slots :meth:`_widen` held back start (its
        measure, the serial pass's tests, said nothing of the probes after it)."""
        if len(self.sandboxes) >= self.slots or not self.serial_ended.is_set():
            return self.pool.get()
        try:
            return self.pool.get(timeout=WIDEN_WAIT)
        except queue.Empty:
            if not self._stopped():
                self._add_slots(self.slots)
            return self.pool.get()

    def _probe_alone(self, ids: list[str], serial: dict[str, Result], order: list[str],
                     checked: list[int], longest: float,
                     into: dict[str, Result], *, only: bool = False) -> dict[str, Result]:
        """``order`` in a fresh process (as :meth:`_probe`), each test of ``checked``
        also alone in a fresh process right before its place (their records go to
        ``into``); ``longest``: the serial seconds the alone runs' time limit
        allows for.  ``only``: ``checked`` is all of ``order``, run alone only (no
        run of ``order`` in one process; see :meth:`_alone_only`)."""
        rules = self._batching(ids, serial, checked)
        if only:
            rules["only"] = True
        sandbox = self.pool.get()
        try:
            sandbox.reset()
            return self._run(sandbox, order, alone=[ids[k] for k in checked], into=into,
                             alone_rules=rules,
                             alone_limit=_alone_timeout(longest),
                             limit=2 * self.timeout + PROBE_TIMEOUT_ALLOWANCE * len(checked))
        finally:
            self.pool.put(sandbox)

    def _command(self, sandbox: Sandbox, ids: list[str], out: Path,
                 basetemp: Path, *, workers: int = 0,
                 edges: Path | None = None) -> tuple[list[str], Path]:
        return self.invocation.command(sandbox, ids, basetemp, workers=workers, edges=edges)

    def _spawn(self, sandbox: Sandbox, ids: list[str], *, trace: bool = False,
               barrier: str | None = None, alone: Sequence[str] = (),
               alone_limit: float = 0.0, workers: int = 0, edges: Path | None = None,
               hold: Path | None = None) -> tuple[subprocess.Popen[bytes], Path]:
        with self.lock:
            self.counter += 1
            n = self.counter
            self.processes += 1
        out = sandbox.tmp.parent / f"probe-{n}.jsonl"
        out.unlink(missing_ok=True)
        ids = self._with_declared(ids)
        args, cwd = self._command(sandbox, ids, out, sandbox.tmp / f"basetemp-{n}",
                                  workers=workers, edges=edges)
        env = self._environment(sandbox, out)
        if trace:
            env[probe_plugin.TRACE] = "1"
        if barrier is not None:
            env[probe_plugin.BARRIER] = barrier
        if hold is not None:
            env[probe_plugin.HOLD] = f"{hold}|{os.getpid()}"
        if alone:
            names = sandbox.tmp.parent / f"alone-{n}.txt"
            names.write_text("\n".join(alone) + "\n", encoding="utf-8")
            env[probe_plugin.ALONE] = str(names)
            env[probe_plugin.ALONE_TIMEOUT] = str(alone_limit)
        log = (sandbox.tmp.parent / f"probe-{n}.log").open("wb")
        try:
            # Its own process group: a stop ends the probe and every child it forked.
            proc = subprocess.Popen(args, cwd=cwd, env=env, stdout=log,
                                    stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                    start_new_session=True)
        finally:
            log.close()
        with self.lock:
            self.live.add(proc)
        return proc, out

    def _collect(self, proc: subprocess.Popen[bytes], out: Path, sandbox: Sandbox, *,
                 limit: float | None = None, idle: float | None = None,
                 into: dict[str, Result] | None = None) -> dict[str, Result]:
        """The probe's records once it ended; stopped (and its records so far) when
        its time (``limit``, else the measured timeout) or the budget runs out, when
        no test ended for ``idle`` seconds, or on Ctrl-C.  ``into``: where the
        records of tests run alone go."""
        began = time.monotonic()
        end = began + (self.timeout if limit is None else limit)
        size, moved = -1, began
        code: int | None = None
        while code is None:
            try:
                code = proc.wait(timeout=POLL)
                break
            except subprocess.TimeoutExpired:
                pass
            now = time.monotonic()
            if idle is not None:
                grown = out.stat().st_size if out.exists() else 0
                if grown != size:
                    size, moved = grown, now
            if (self.stop.is_set() or now > end
                    or (idle is None and now > self.deadline)
                    or (idle is not None and now - moved > idle)):
                _kill(proc)
                self.killed = True
                code = -1
        with self.lock:
            self.live.discard(proc)
        results = self._read(out, sandbox, into)
        if code == -1 and not self._stopped():
            results[KILLED] = FAILED
        if not results and code not in (0, 1, 5, -1):
            raise ProbeError(_before_tests(code, out.with_suffix(".log")))
        with self.lock:
            self.probes_run += 1
        return results

    def _prerequisites(self, k: int) -> set[int]:
        """The declared prerequisites of the test at ``k``, transitively."""
        return _reached(k, lambda t: self.declared[t])

    def _wides(self) -> list[set[tuple[str, str, str]]]:
        """Each selected test's module and class fixture instances, by index."""
        if self.wide is None:
            self.wide = [_wide_instances(it) for it in self.items]
        return self.wide

    def _before(self, k: int) -> list[int]:
        """The test at ``k``'s declared prerequisites and those its run-time
        ``depends()`` named in the serial pass (none before it)."""
        return [*self.declared[k], *self.runtime[k]] if self.runtime else self.declared[k]

    def _with_declared(self, ids: list[str]) -> list[str]:
        """``ids`` and their declared prerequisites, transitively, in the serial order.

        Named on the command line rather than pulled back by the plugin: a test
        pulled back from outside a node-id selection comes from a module
        collected apart, with its own module-scoped fixtures.
        """
        def closure(k: int) -> list[int]:
            return sorted(_reached(k, self._before))

        known = [self.order[nid] for nid in ids if nid in self.order]
        if len(known) != len(ids) or not any(self._before(k) for k in known):
            return ids
        if known == sorted(known):  # the serial order: the prerequisites at their places
            return [self.ids[k] for k in sorted({*known, *(p for k in known
                                                           for p in closure(k))})]
        # Another order (the screening's): each test's prerequisites just before it.
        out: dict[int, None] = {}
        for k in known:
            out.update(dict.fromkeys(p for p in closure(k) if p not in out))
            out.setdefault(k, None)
        return [self.ids[k] for k in out]

    def _run(self, sandbox: Sandbox, ids: list[str], *, trace: bool = False,
             idle: float | None = None, limit: float | None = None,
             alone: Sequence[str] = (), alone_limit: float = 0.0,
             alone_rules: dict[str, object] | None = None,
             into: dict[str, Result] | None = None,
             lane: Sequence[str] = ()) -> dict[str, Result]:
        # The serial pass (the one probe with ``idle``) runs whatever the budget:
        # without it there is nothing to search.
        if self.stop.is_set() or (idle is None and time.monotonic() > self.deadline):
            return {}
        server = self._server(sandbox)
        if server is not None:
            out = self._out(sandbox)
            # A run alone only ("only": see _alone_only) runs its tests in the order
            # given (the screening's, reverse serial): a dependent before its
            # prerequisites, so that one fresh process takes both in turn
            # (probe_plugin._batch); with each test's prerequisites put before it,
            # every link of a chain would start another process.
            run = ids if alone_rules is not None and alone_rules.get("only") \
                else self._with_declared(ids)
            killed = self._ask(sandbox, server, [{
                "ids": run, "out": str(out), "trace": trace,
                "alone": list(alone), "alone_limit": alone_limit, "rules": alone_rules,
                "lane": list(lane)}],
                limit, idle, out)
            found = self._read(out, sandbox, into)
            if killed and not self._stopped():
                # Stopped by its time (see _search); one the budget cut has no
                # verdict at all: its callers check ``_stopped``.
                found[KILLED] = FAILED
            return found
        proc, out = self._spawn(sandbox, ids, trace=trace, alone=alone,
                                alone_limit=alone_limit)
        return self._collect(proc, out, sandbox, limit=limit, idle=idle, into=into)

    # -- the probe server --------------------------------------------------------------

    def _out(self, sandbox: Sandbox) -> Path:
        with self.lock:
            self.counter += 1
            n = self.counter
        out = sandbox.tmp.parent / f"probe-{n}.jsonl"
        out.unlink(missing_ok=True)
        return out

    def _server(self, sandbox: Sandbox, paths: Sequence[str] = (), *,
                counted: bool = True) -> Server | None:
        """The sandbox's probe server, started if it is not running (collecting the
        selection's node ids, else ``paths``, relative to the rootdir); ``counted``
        among the search's processes (a spare slot's is once it joins)."""
        if not FORKS:
            return None
        server = sandbox.server
        if server is not None and server.proc.poll() is None:
            return server
        if server is not None:
            self._drop(sandbox)
        with self.lock:
            self.counter += 1
            n = self.counter
            if counted:
                self.processes += 1
        sandbox.server = _start_server(self.invocation, self.environment, sandbox,
                                       self.ids or list(paths), n)
        with self.lock:
            self.live.add(sandbox.server.proc)
        return sandbox.server

    def _drop(self, sandbox: Sandbox) -> None:
        server = sandbox.server
        if server is None:
            return
        sandbox.server = None
        _close_server(server)
        with self.lock:
            self.live.discard(server.proc)

    def _ask(self, sandbox: Sandbox, server: Server, runs: list[dict[str, object]],
             limit: float | None, idle: float | None = None, out: Path | None = None,
             watch: Callable[[], bool] | None = None) -> bool:
        """One request to the server, waited for as ``_collect`` waits for a probe; a
        server that does not answer in time is stopped (and started anew next time).
        ``watch``: asked at each poll, True stops it too (not counted as a timeout)."""
        seconds = self.timeout if limit is None else limit
        request = {"runs": runs, "limit": seconds if seconds != float("inf") else 1e9}
        sandbox.ended = None
        try:
            os.write(server.ask, (json.dumps(request) + "\n").encode())
        except OSError:  # it died (a collection error): its log says why
            self._dead(sandbox, server)
            return False
        began = time.monotonic()
        end = began + seconds + PROBE_TIMEOUT_ALLOWANCE
        size, moved = -1, began
        while True:
            ready, _, _ = select.select([server.answers], [], [], POLL)
            if ready:
                chunk = os.read(server.answers, 4096)
                if not chunk:
                    self._dead(sandbox, server)
                    return False
                server.pending += chunk
                if b"\n" in server.pending:
                    answer, _, server.pending = server.pending.partition(b"\n")
                    said = json.loads(answer)
                    killed = bool(said.get("killed"))
                    if not killed and any(said.get("statuses", ())):
                        status = next(c for c in said["statuses"] if c)
                        sandbox.ended = Ending(f"status {status}", server.log)
                    self.killed |= killed
                    with self.lock:
                        self.probes_run += 1
                    return killed
            now = time.monotonic()
            if idle is not None and out is not None:
                grown = out.stat().st_size if out.exists() else 0
                if grown != size:
                    size, moved = grown, now
            if watch is not None and watch():
                self._drop(sandbox)
                return True
            if (self.stop.is_set() or now > end
                    or (idle is None and now > self.deadline)
                    or (idle is not None and now - moved > idle)):
                self.killed = True
                self._drop(sandbox)
                return True

    def _dead(self, sandbox: Sandbox, server: Server) -> None:
        """The server ended by itself: before any probe, it could not collect
        (a status other than pytest's own: :class:`ProbeError`, its log's tail)."""
        code = server.proc.wait(timeout=30)
        self._drop(sandbox)
        if code not in (0, 1, 5):
            raise ProbeError(_before_tests(code, server.log))
        sandbox.ended = Ending(f"the probe server ended by itself, status {code}", server.log)

    def _environment(self, sandbox: Sandbox, out: Path) -> dict[str, str]:
        return _probe_environment(self.environment, sandbox, out)

    def _read(self, out: Path, sandbox: Sandbox,
              into: dict[str, Result] | None = None) -> dict[str, Result]:
        """The records a probe wrote (those of tests run alone go ``into``)."""
        results: dict[str, Result] = {}
        if not out.exists():
            return results
        for line in out.read_text(encoding="utf-8").splitlines():
            try:
                rec = json.loads(line)
            except ValueError:  # the last line of a probe stopped mid-write
                continue
            result = Result(rec["outcome"], Touches(
                frozenset(_relative(p, sandbox.root) for p in rec["writes"]),
                frozenset(_relative(p, sandbox.root) for p in rec["reads"])),
                bool(rec.get("state")), float(rec.get("seconds", 0.0)),
                frozenset(rec.get("services", ())),
                tuple(_relative(p, sandbox.root) for p in rec.get("waits", ())),
                bool(rec.get("state_tests", rec.get("state"))))
            nid = _relative(rec["id"], sandbox.root)
            if rec.get("alone"):
                if into is not None:
                    into[nid] = result
            else:
                results[nid] = result
        return results

    def _together(self, sandbox: Sandbox,
                  runs: list[tuple[list[str], str]]) -> list[dict[str, Result]]:
        """Each list in its own process, at once, both held before their last test."""
        line = sandbox.tmp / f"line-{self.counter}"
        line.mkdir()
        server = self._server(sandbox)
        if server is not None:
            outs = [self._out(sandbox) for _ in runs]
            self._ask(sandbox, server, [
                {"ids": self._with_declared(ids), "out": str(out),
                 "barrier": f"{line}|{len(runs)}|{held}"}
                for (ids, held), out in zip(runs, outs, strict=True)], None)
            return [self._read(out, sandbox) for out in outs]
        started = [self._spawn(sandbox, ids, barrier=f"{line}|{len(runs)}|{held}")
                   for ids, held in runs]
        return [self._collect(proc, out, sandbox) for proc, out in started]

    # -- the report --------------------------------------------------------------------

    def _record(self, ids: list[str], found: Findings) -> edges_file.EdgesFile:
        """What the edges file gets: found edges, resources, groups, and the verdicts."""
        prints = evidence.Fingerprints(self.config.rootpath)
        grouped = {k for members in found.groups.values() for k in members}
        record = edges_file.EdgesFile(
            [edges_file.FileEdge(ids[t], ids[p], t in found.same_process)
             for t in sorted(found.needs) for p in found.needs[t]], {},
            list(found.verdicts) + [
                # A found edge carries its evidence too: through files only, or
                # the probe that showed the test reads its prerequisites' process.
                edges_file.Verdict(
                    ids[t], ids[p], t not in found.same_process,
                    "" if t not in found.same_process else
                    f"{ids[t]} failed in a fresh process after its prerequisites ran "
                    "in another", prints.of((ids[p], ids[t])))
                for t in sorted(found.needs) for p in found.needs[t]],
            {name: [ids[k] for k in members] for name, members in found.groups.items()},
            list(found.fences))
        for i, j, p in found.conflicts:
            if (i in grouped and j in grouped) or (i, j, p) in found.settled:
                continue  # one worker runs them, or the suite keeps them apart: nothing to add
            # Every test that wrote the path carries it, not only the pair overlapped.
            users = record.resources.setdefault(resource_name(p, str(self.config.rootpath)), [])
            users.extend(ids[k] for k in self.writers.get(p, [i, j]) if ids[k] not in users)
        return record

    def _report(self, items: list[pytest.Item], found: Findings, write: _Write,
                seconds: float, stopped: str = "") -> None:
        """The findings, as the terminal shows them, and the ``--dag-edges`` file.

        Over 60 lines: one paragraph per kind of finding (missing prerequisites,
        fixture paths, conflicts, tests not searched, not repeated, pairs and
        edges not checked, not fixed) and the summary line, in the order they
        print; each paragraph is a few writes, read top to bottom.
        """
        ids = [it.nodeid for it in items]
        style = _style(self.config)
        if stopped or time.monotonic() > self.deadline:
            why = "interrupted" if stopped else "the time budget ran out"
            left = [p for p in ("serial pass", "screening", "search", "conflicts")
                    if p not in found.phases]
            write(f"dagorder: {why}: what was found so far is reported"
                  + (f"; phases not finished: {', '.join(left)}" if left else ""))
        if not found.needs and not found.conflicts and not found.groups:
            write("dagorder: no missing prerequisite and no conflict found"
                  + (" so far" if stopped or time.monotonic() > self.deadline else "")
                  + (" among the tests the probes repeat" if found.unreproducible else ""))
        for t in sorted(found.needs):
            names = [ids[p] for p in found.needs[t]]
            write(f"dagorder: {ids[t]} needs {', '.join(names)}")
            for line in _declaration(style, ids[t], names):
                write(f"    {line}")
            if t in found.same_process:
                # No xdist_group to add: a declared edge keeps its tests in one
                # process by default (only evidence lifts it, and this says not).
                write("    # it reads what they leave in the process: declared, the edge "
                      "keeps them on one worker")
        group_of = {k: name for name, members in found.groups.items() for k in members}
        advised: set[str] = set()
        # Said before the conflicts: it holds whether or not an overlap showed a
        # clash, and a conflict of the same group then names it.
        for i, j, path in found.fixture_paths:
            group = group_of.get(i)
            if group is None or group in advised or group != group_of.get(j):
                continue
            advised.add(group)
            write(f"dagorder: a fixture that {ids[i]} and {ids[j]} share writes {path} when "
                  f"set up and torn down: keep its {len(found.groups[group])} tests on one "
                  f"worker, @pytest.mark.xdist_group({_quote(group)}) on each")
        for i, j, path in found.conflicts:
            name = resource_name(path, str(self.config.rootpath))
            write(f"dagorder: {ids[i]} and {ids[j]} fail when run at the same time "
                  f"(both use {path})")
            if (i, j, path) in found.settled:
                write(f"    nothing to add: {found.settled[(i, j, path)]}")
                continue
            group = group_of.get(i)
            if group is not None and group == group_of.get(j):
                # One grouping per group: advised at its first conflict, named after.
                if group in advised:
                    write(f"    the group {_quote(group)} above keeps them on one worker")
                    continue
                advised.add(group)
                write(f"    the path lives in a fixture its {len(found.groups[group])} tests "
                      f"share: keep them on one worker, "
                      f"@pytest.mark.xdist_group({_quote(group)}) on each")
                continue
            many = len(self.writers.get(path, ()))
            write(f"    @pytest.mark.dag_resource({_quote(name)}) on each"
                  + (f" of the {many} tests that write it" if many > 2 else ""))
        if found.unfinished:
            many = len(found.unfinished) != 1
            write(f"dagorder: {'interrupted' if stopped else 'the time budget ran out'} "
                  f"before {plural(len(found.unfinished), 'test')} {'were' if many else 'was'} "
                  "searched:")
            for t in found.unfinished:
                write(f"    {ids[t]}")
        if found.timed_out:
            write(f"dagorder: {plural(len(found.timed_out), 'test')} not searched: a probe "
                  f"ran past its time ({self.timeout:.0f} s, {PROBE_TIMEOUT_FACTOR:g} x the "
                  "serial pass) and was stopped:")
            for t in found.timed_out:
                write(f"    {ids[t]}")
        if found.unreproducible:
            again = found.unreproducible
            write(f"dagorder: {plural(len(again), 'test')} did not repeat the serial pass in "
                  "a fresh copy of the rootdir (run again at their serial place, or after "
                  "every set of earlier tests the search tried): they depend on state outside "
                  "the copies that nothing resets between probes (a database server, a path "
                  "outside the rootdir); they are not searched, the declared edges whose "
                  "probe ran after them stay kept"
                  + (f", and they keep the serial order on one worker: "
                     f"@pytest.mark.xdist_group({_quote(OUTSIDE_GROUP)}) on each"
                     if OUTSIDE_GROUP in found.groups else "") + ":")
            _write_some(write, [
                f"{ids[t]}" + (f" ({self.serial.get(ids[t], FAILED).outcome}, then {again[t]})"
                               if again[t] else "") for t in sorted(again)])
            joined = found.joined
            if found.places:
                shown = ", ".join(found.places[:3]) + (
                    f" and {len(found.places) - 3} more" if len(found.places) > 3 else "")
                write(f"    their state lives at {shown}; "
                      + (f"{plural(len(joined), 'more test')} "
                         f"{'touches' if len(joined) == 1 else 'touch'} it and "
                         f"{'joins' if len(joined) == 1 else 'join'} them:"
                         if joined else "no other test touches it"))
                _write_some(write, [ids[k] for k in joined])
            elif OUTSIDE_GROUP in found.groups:
                # Nothing recorded says where (no path outside the rootdir, no
                # connection): a test that reads what they left is not found.
                write("    where their state lives was not seen (no path outside the "
                      "rootdir written, no connection): a test that reads it is not "
                      "in their group")
        if found.unpaired:
            write(f"dagorder: {plural(len(found.unpaired), 'pair')} of tests that write one "
                  "path not overlapped (stopped):")
            for i, j, path in found.unpaired:
                write(f"    {ids[i]} and {ids[j]} ({path})")
        if found.uncapped:
            write(f"dagorder: {plural(found.uncapped, 'more pair')} of tests that write one "
                  f"path not overlapped (at most {MAX_PAIRS}, at most {PAIRS_PER_PATH} a path)")
        if found.unchecked:
            write(f"dagorder: {plural(len(found.unchecked), 'test')} with declared "
                  "prerequisites not checked in a fresh process (stopped): their edges "
                  "stay kept")
        if found.not_fixed:
            write(f"dagorder: with the findings, -n 2 still gave other outcomes than the "
                  f"serial run for {plural(len(found.not_fixed), 'test')} (not fixed):")
            for nid in found.not_fixed:
                write(f"    {nid}")
        target = self.settings.edges_path
        wrote = ""
        if target is not None and (found.needs or found.conflicts or found.verdicts
                                   or found.groups or found.fences):
            edges_file.write(target, self._record(ids, found))
            wrote = f"; written to {target}"
        elif found.needs or found.conflicts or found.verdicts or found.groups or found.fences:
            wrote = "; add --dag-edges PATH to write them to a file later runs read"
        edges = sum(len(v) for v in found.needs.values())
        free = sum(v.separable for v in found.verdicts)
        checked = (f", {free:,} of {plural(len(found.verdicts), 'declared edge')} separable"
                   if found.verdicts else "")
        if found.fences:
            checked += (f", {sum(v.free for v in found.fences):,} of "
                        f"{plural(len(found.fences), 'test')} free of pytest-order's fences")
        write(f"dagorder: {plural(edges, 'missing prerequisite')}, "
              f"{plural(len(found.conflicts), 'conflict')}{checked} "
              f"in {seconds:.1f} s with {plural(self.probes_run, 'probe')} in "
              f"{plural(self.processes, 'pytest process', 'pytest processes')}{wrote}")


def _scoped(items: Sequence[pytest.Item], every: Sequence[set[tuple[str, str, str]]],
            conflicts: Sequence[tuple[int, int, str]]) -> dict[str, list[int]]:
    """Groups for the conflicts whose tests use a fixture of the project wider than a
    test (module, class or package): the path may be the fixture's, alive between
    its tests, so every test using one of those fixture instances of either test
    stays on one worker (one group per connected set); ``every``: each test's
    instances (``_wide_instances``)."""
    parent: dict[int, int] = {}

    def root(x: int) -> int:
        while parent.get(x, x) != x:
            x = parent[x]
        return x

    for i, j, _ in conflicts:
        mine = every[i] | every[j]
        if not mine:
            continue  # a path the tests themselves write: a resource is enough
        members = [k for k, ks in enumerate(every) if k in (i, j) or not ks.isdisjoint(mine)]
        for k in members:
            a, b = sorted((root(members[0]), root(k)))
            parent.setdefault(a, a)
            parent[b] = a
    groups: dict[int, list[int]] = {}
    for k in sorted(parent):
        groups.setdefault(root(k), []).append(k)
    return {_scope_name(items, members): members for members in groups.values()}


def _probe_timeout(seconds: float) -> float:
    """The time a probe whose tests took ``seconds`` in the serial pass may run
    (see :data:`PROBE_TIMEOUT_FACTOR`)."""
    return PROBE_TIMEOUT_ALLOWANCE + PROBE_TIMEOUT_FACTOR * seconds


def _alone_timeout(seconds: float) -> float:
    """The time a test of ``seconds`` serially may take run alone (see
    :data:`ALONE_FACTOR`)."""
    return PROBE_TIMEOUT_ALLOWANCE + ALONE_FACTOR * seconds


def _worth_a_slot(start_up: float, since: float, first: float, done: int,
                 total: int) -> bool:
    """Whether the serial pass runs its tests for longer than ``start_up`` (a probe
    slot's start): its tests ran that long (``since`` its first record, and
    ``first``, that test's seconds), or the pace of the ``done - 1`` tests after
    the first (three records at least) says those left take that long."""
    if since + first >= start_up:
        return True
    return done >= 3 and max(0, total - done) * since / (done - 1) >= start_up


def _fails(records: dict[str, Result]) -> bool:
    """Whether a test of ``records`` failed (or passed where it should fail)."""
    return any(r.outcome in ("failed", "xpassed") for r in records.values())


def _tail(log: Path | None, lines: int = 15) -> str:
    """The last lines of a probe's log, indented after a line of their own (empty
    where the log is, or there is none)."""
    text = log.read_text(errors="replace").rstrip() if log is not None and log.exists() else ""
    if not text:
        return ""
    return "; its output ends:\n" + "\n".join(
        f"    {line}" for line in text.splitlines()[-lines:])


def _before_tests(status: int, log: Path) -> str:
    """What a probe whose pytest ended before it ran a test says of it (a
    collection error in the copy, a conftest that refuses the probe)."""
    return f"its pytest ended before it ran a test (status {status}){_tail(log)}"


def _pass_records(finder: MissingFinder, sandbox: Sandbox) -> dict[str, Result]:
    """The records the serial pass has written so far (its probe is the only one
    on its slot while it runs; a line being written is left for the next read)."""
    outs = sorted(sandbox.tmp.parent.glob("probe-*.jsonl"),
                  key=lambda p: int(p.stem.partition("-")[2] or 0))
    return finder._read(outs[0], sandbox) if outs else {}


def _write_some(write: _Write, lines: Sequence[str]) -> None:
    """The first :data:`SHOWN` of ``lines``, indented, then how many more there are."""
    for line in lines[:SHOWN]:
        write(f"    {line}")
    if len(lines) > SHOWN:
        write(f"    and {len(lines) - SHOWN} more")


def _fixture_paths(items: Sequence[pytest.Item], wide: Sequence[set[tuple[str, str, str]]],
                   touches: Sequence[Touches]) -> list[tuple[int, int, str]]:
    """Per module or class fixture instance of the project with two users or more:
    a path its first user (where it was set up) wrote in the serial pass, and
    so did the last user or the last test of the module or class holding the
    instance (where it was torn down: pytest ends a module's fixtures after
    its last test, whether that test uses them or not), as (first user, last
    user, path)."""
    users: dict[tuple[str, str, str], list[int]] = {}
    last_of: dict[str, int] = {}
    for k, item in enumerate(items):
        for key in wide[k]:
            users.setdefault(key, []).append(k)
        node = item.nodeid
        while "::" in node:
            node = node.rsplit("::", 1)[0]
            last_of[node] = k
    out: list[tuple[int, int, str]] = []
    for (_, _, holder), members in users.items():
        first, last = members[0], members[-1]
        ends = {last, last_of.get(holder, last)}
        if first == last or max(first, *ends) >= len(touches):
            continue
        common = sorted(touches[first].writes
                        & set().union(*(touches[k].writes for k in ends)))
        if common:
            out.append((first, last, common[0]))
    return sorted(set(out))


def _wide_instances(item: pytest.Item) -> set[tuple[str, str, str]]:
    """The project fixture instances wider than a test (module, class, package)
    that ``item`` uses: (name, where defined, the node holding the instance).
    A fixture defined for the whole session's tree (``where`` "") is a plugin's
    unless its function lies under the rootdir outside the environment: then it
    is a rootdir ``conftest.py``'s (archive-tools' module ``tmpdir``), the
    project's like any other."""
    out: set[tuple[str, str, str]] = set()
    files: dict[str, str] | None = None
    for name, scope, where in wide_fixtures(item) or ():
        if scope not in ("module", "class", "package"):
            continue
        if not where:
            files = fixture_files(item) if files is None else files
            if not _of_project(files.get(name, ""), item.config.rootpath):
                continue
        node = (item.getparent(pytest.Module) if scope == "module" else
                item.getparent(pytest.Class) if scope == "class" else None)
        out.add((name, where, node.nodeid if node is not None else where))
    return out


def _of_project(file: str, root: Path) -> bool:
    """Whether ``file`` is the project's: under ``root`` and not in an environment
    there (a ``.venv`` in the checkout holds plugins)."""
    if not file:
        return False
    path = Path(file).resolve()
    if any(part in ("site-packages", "dist-packages") for part in path.parts):
        return False
    return (path.is_relative_to(root.resolve())
            and not path.is_relative_to(Path(sys.prefix).resolve()))


def _scope_name(items: Sequence[pytest.Item], members: list[int]) -> str:
    modules = sorted({items[k].nodeid.split("::", 1)[0] for k in members})
    return modules[0] if len(modules) == 1 else f"{modules[0]} and {len(modules) - 1} more"


def _remove(work: tempfile.TemporaryDirectory[str]) -> None:
    """Remove a work folder; a process just killed may still be closing files in
    it: tried again a few times (bounded), then once more removing what can be."""
    for _ in range(REMOVE_TRIES):
        try:
            work.cleanup()
            return
        except OSError:
            time.sleep(POLL)
    with contextlib.suppress(OSError):
        shutil.rmtree(work.name)


def _kill(proc: subprocess.Popen[bytes]) -> None:
    """Stop a probe and every process it forked (its own process group)."""
    if proc.poll() is not None:
        return
    with contextlib.suppress(OSError):
        os.killpg(proc.pid, signal.SIGKILL)
    with contextlib.suppress(OSError):
        proc.kill()
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=30)


def _unwritable(path: Path) -> str:
    """Why ``path`` cannot be written ("" if it can): checked before any probe runs."""
    if path.exists():
        if path.is_dir():
            return "it is a folder"
        try:
            edges_file.read(path)
        except edges_file.EdgesFileError as exc:
            return str(exc).split(": ", 1)[-1].split("; ", 1)[0]
        return "" if os.access(path, os.W_OK) and os.access(path.parent, os.W_OK) \
            else "not writable"
    folder = path.parent
    while not folder.exists() and folder.parent != folder:
        folder = folder.parent
    if not folder.is_dir():
        return f"{folder} is not a folder"
    return "" if os.access(folder, os.W_OK) else f"{folder} is not writable"


def _hints(ids: list[str], serial: dict[str, Result], t: int,
           wide: Sequence[set[tuple[str, str, str]]]) -> list[int]:
    """The tests before ``t`` most likely to be what it needs, from the serial pass:
    those that wrote a path ``t`` touched, those that changed the process's state,
    and those that share a module or class fixture instance with it (``wide``:
    each test's, from ``_wide_instances``).  The last are what a test reading what
    an earlier test left in the fixture needs, a value or a folder under a random
    name the record leaves out (archive-tools: 92 tests, each a module-mate's);
    without them its search bisects its whole serial prefix."""
    mine = serial.get(ids[t], FAILED).touches
    paths = mine.reads | mine.writes
    out = []
    for k in range(t):
        seen = serial.get(ids[k], FAILED)
        if (seen.state or not seen.touches.writes.isdisjoint(paths)
                or not wide[t].isdisjoint(wide[k])):
            out.append(k)
    return out


def _tracked(root: Path, paths: Sequence[str]) -> set[str] | None:
    """Which of ``paths`` git tracks (None: not a git checkout, or no git)."""
    try:
        done = subprocess.run(["git", "-C", str(root), "ls-files", "-z", "--", *paths],
                              capture_output=True, timeout=60, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    if done.returncode != 0:
        return None
    return {os.path.normpath(p) for p in done.stdout.decode(errors="replace").split("\0") if p}


def _inside(path: Path, root: Path, copy: Path) -> Path:
    """``path`` in the copy of ``root`` if it lies below ``root``, else ``path``."""
    try:
        return copy / path.relative_to(root)
    except ValueError:
        return path


def _relative(path: str, root: Path) -> str:
    prefix = str(root) + os.sep
    return path[len(prefix):] if path.startswith(prefix) else path


#: Options of the user's command line a probe keeps: plugins, ini overrides,
#: warnings and how modules are imported.
_KEPT: Final = ("-p", "-o", "--override-ini", "-W", "--pythonwarnings", "--import-mode")


def _early_paths(config: pytest.Config, option: object,
                 args: Sequence[str]) -> list[str] | None:
    """The session's paths (or node ids: ``args``) relative to the rootdir, for a
    probe server started before the collection; None where one lies outside
    it, or names a package (``--pyargs`` in ``option``)."""
    if getattr(option, "pyargs", False):
        return None
    root = str(config.rootpath)
    out: list[str] = []
    for arg in args:
        path, sep, rest = arg.partition("::")
        full = os.path.normpath(os.path.join(config.invocation_params.dir, path))
        if full != root and not full.startswith(root.rstrip(os.sep) + os.sep):
            return None
        out.append(os.path.relpath(full, root) + sep + rest)
    return out


def _collection_options(option: object) -> list[str]:
    """The options (``config.option``: from the command line or the ini's
    ``addopts``) that change which items a file holds and how they are named: a
    probe given node ids must collect them as the user's session did."""
    out: list[str] = []
    if getattr(option, "doctestmodules", False):
        out.append("--doctest-modules")
    for glob in getattr(option, "doctestglob", None) or ():
        out.append(f"--doctest-glob={glob}")
    if getattr(option, "doctest_continue_on_failure", False):
        out.append("--doctest-continue-on-failure")
    mode = getattr(option, "importmode", None)
    if mode:
        out.append(f"--import-mode={mode}")
    return out


def _forwarded(args: Sequence[str]) -> list[str]:
    out: list[str] = []
    k = 0
    while k < len(args):
        arg = args[k]
        if arg in _KEPT and k + 1 < len(args):
            out += [arg, args[k + 1]]
            k += 1
        elif arg.split("=", 1)[0] in _KEPT or (arg.startswith("-p") and not arg.startswith("--")):
            out.append(arg)
        k += 1
    return out


def _style(config: pytest.Config) -> str:
    runner = config.pluginmanager.get_plugin(DRIVER_NAME)
    names: frozenset[str] = getattr(getattr(runner, "plan", None), "marker_names", frozenset())
    for marker in ("dependency", "depends", "order"):
        if marker in names:
            return marker
    return "dagorder"


def _quote(text: str) -> str:
    """A Python string literal in double quotes (the declarations are code to paste)."""
    return json.dumps(text)


def _target(test: str, prerequisite: str) -> str:
    """The prerequisite as ``test`` would name it: bare in its own module, else the node id."""
    mine, _, _ = test.partition("::")
    theirs, sep, rest = prerequisite.partition("::")
    return rest if sep and mine == theirs else prerequisite


def _declaration(style: str, test: str, prerequisites: list[str]) -> list[str]:
    names = [_target(test, p) for p in prerequisites]
    quoted = ", ".join(_quote(n) for n in names)
    if style == "dependency":
        scope = "module" if all(n != p for n, p in zip(names, prerequisites, strict=True)) \
            else "session"
        full = names if scope == "module" else prerequisites
        lines = [f"@pytest.mark.dependency(depends=[{', '.join(map(_quote, full))}]"
                 + (', scope="session")' if scope == "session" else ")")]
        return [*lines, "# and @pytest.mark.dependency() on " + ", ".join(prerequisites)]
    if style == "depends":
        return [f"@pytest.mark.depends(on=[{quoted}])"]
    if style == "order":
        after = quoted if len(names) == 1 else f"[{quoted}]"
        return [f"@pytest.mark.order(after={after})"]
    return [f"@depends_on({quoted})"]
