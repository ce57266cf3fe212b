"""The suite's fork server ("zygote"): the interpreters its in-process inner runs
start, forked from a process that imported pytest once.

Most of what an inner ``-n 2`` run costs is starting its workers: execnet starts
each as ``sys.executable -u -c BOOTSTRAP``, and each imports pytest, its default
plugins and execnet again: most of what a worker costs (docs/performance.md,
"This project's own checks").  The finder starts its probe servers and its
``-n 2`` checks as ``sys.executable -m pytest ...``, and a run in a process of
its own (``helpers.runpytest``'s ``own_process``) is pytester's
``sys.executable -mpytest ...``.  A :class:`Zygote` is one process per process
of this suite (started by the first inner run that asks, ended with this
process) that imported those once; ``tests/helpers.py:runpytest`` points
``sys.executable`` at its launcher (``support/zygote_launch.py``) for the inner
run, and each such interpreter is then a fork of the server that takes over the
launcher's descriptors, arguments, environment and directory.  It serves
``[-u] [-B] -c CODE [ARGS]`` and ``[-u] [-B] -m pytest [ARGS]``; the launcher
starts a fresh interpreter for anything else.

What a fork has as the fresh interpreter would (tests/test_zygote.py compares them):
descriptors 0-2 and the others its starter passed (``pass_fds``), at their
numbers; ``os.environ``; the working directory; a session or process group of
its own where the launcher leads one (the finder's ``start_new_session``);
``sys.argv`` and ``sys.orig_argv`` (``-m``: ``runpy`` names ``pytest/__main__.py``
as ``python -m`` does); ``sys.path`` (the first entry ``-c`` or ``-m`` puts there,
then the request's ``PYTHONPATH`` entries, then the server's path after ``site``;
the server refuses a request whose other ``PYTHON*`` variables, locale or
variables the venv's ``.pth`` files read differ from its own, that drops one of
its ``PYTHONPATH`` entries or adds one with a ``sitecustomize``: the launcher then
starts a fresh interpreter); the standard streams as ``-u`` or not makes them
(buffering, encoding, errors, names); a fresh ``__main__``;
``sys.dont_write_bytecode`` as its environment and ``-B`` say; and its exit
status and signals through the launcher, which its starter waits for and kills.
A fork whose launcher died (execnet, pytester and the finder kill it on
teardown and timeouts) kills itself, and its process group when it leads one
(the finder's ``killpg`` of a probe's group reaches the launcher only).

Known differences, and why what the tests check does not depend on them:

- **Modules already imported**: pytest, its default plugins (``_pytest.*``,
  which a fresh process imports first thing, before its assertion-rewriting
  hook exists), execnet, the libraries of :data:`PRELOAD_IF_INSTALLED` (which
  the installed originals import; no inner project imports them itself) and
  what they import.  Neither xdist nor this plugin is imported by the
  server: pytest marks an installed plugin's modules for rewriting and warns
  (an error under ``filterwarnings = error``) when they were imported
  before, and the plugin's own loading (``shims/late_loading``)
  and what importing it does are what some tests check; a fork imports both
  as a fresh one does (pre-importing them too would save little:
  docs/performance.md).  The markers ``pytest.mark`` remembers are those of
  this fork's run alone (the server ran none).
- **One hash seed** for all forks of this process' server (a fresh
  interpreter draws one each): the plugin's results must not depend on hash or
  set order, which ``helpers.outputs_under_hash_seeds`` checks under fixed seeds
  in processes of their own; a ``PYTHONHASHSEED`` a run sets is honoured
  (the server refuses it, the launcher starts a fresh interpreter).
- **Parent process**: a fork's parent is the server, not its starter
  (``os.getppid()``); the launcher stands in for it towards its starter.
- **Signals** the launcher gets are passed to the fork alone, not to its
  group (only ``SIGKILL`` is sent to a group, by the finder, and reaches it).
- **One descriptor more**, the fork's connection to its launcher (numbered
  100 or above, not inheritable, so the program's own get the numbers they
  would), and a daemon thread that reads it (a stack dump of every thread
  shows it: tests/test_stall.py keeps fresh workers).
- ``sys.flags`` (``unbuffered``, ``dont_write_bytecode``) are the server's
  (``-u``); the streams and ``sys.dont_write_bytecode`` they stand for are the
  request's.  An exception escaping the program shows the server's frames
  under the program's in its traceback.
- ``sys.executable`` of a ``-m pytest`` fork names the launcher, as it does
  in an in-process run (a ``-c`` fork's is the interpreter's): the workers of
  a run in a process of its own and of the finder's ``-n 2`` checks are forks
  too (no inner test reads ``sys.executable``).
- **The server's objects are frozen** (``gc.freeze``) so that a fork's
  collections do not write to, and so copy, their pages: garbage among them
  (importing makes next to none) is never collected in a fork.  What the
  tests check of collection (unraisable exceptions, ``ResourceWarning``)
  concerns objects a fork makes.

Runs of tests marked ``versions`` (tests/conftest.py) and every run when
``DAGORDER_SUITE_FRESH_WORKERS`` is set to a non-empty value keep fresh
interpreters; so does every run after the server failed to start or died
(:func:`helpers.runpytest` checks before each run, the launcher at each
start).  This module is run by the server with nothing but the standard
library imported by it.
"""

from __future__ import annotations

import contextlib
import fcntl
import gc
import importlib
import importlib.machinery
import importlib.util
import io
import marshal
import os
import select
import signal
import socket
import subprocess
import sys
import tempfile
import threading
from pathlib import Path
from typing import IO, Any, NamedTuple

#: Set to a non-empty value: every inner run's workers are fresh interpreters.
FRESH_ENV = "DAGORDER_SUITE_FRESH_WORKERS"
#: The name the server loads this module under (a worker drops it again).
MODULE = "_dagorder_suite_zygote"
#: What the server imports before it serves (a worker imports the rest).
PRELOAD = ("pytest", "execnet", "execnet.gateway_base")
#: Libraries the installed originals import when pytest loads them by entry
#: point (pytest-depends: networkx and colorama; pytest-rerunfailures:
#: packaging), imported by the server where installed.  They are no plugins:
#: pytest's assertion rewriting neither marks them nor warns that they were
#: imported before.  networkx is most of what loading every installed plugin
#: costs a worker of an inner run that does (tests marked ``autoload``):
#: docs/performance.md.
PRELOAD_IF_INSTALLED = ("networkx", "colorama", "packaging.version")
#: Bound on the server's start-up (imports, then one line: "ready").
START_TIMEOUT = 60.0
#: Bound on reading one request once a launcher connected.
REQUEST_TIMEOUT = 10.0
#: Environment variables that must be the server's own for a fork to be what a
#: fresh interpreter would be: the interpreter reads them at start-up
#: (``PYTHON*``: path, hash seed, warnings, flags ...), and the locale sets the
#: encoding of the standard streams.
LOCALE = ("LANG", "LC_ALL", "LC_CTYPE")
#: Read at start-up by the ``.pth`` files the venvs hold (coverage's process
#: start-up hook, setuptools' distutils shim): a fork would not have run them
#: under the request's values.
SITE_PREFIXES = ("COVERAGE_", "COV_CORE_", "SETUPTOOLS_USE_DISTUTILS")
#: What a worker applies as an interpreter would at start-up: bytecode writing,
#: unbuffered standard streams (:func:`_stdio`), ``sys.path`` (:func:`_python_path`).
APPLIED = ("PYTHONDONTWRITEBYTECODE", "PYTHONUNBUFFERED", "PYTHONPATH")
#: Modules a fresh interpreter imports from ``sys.path`` while ``site`` runs.
CUSTOMIZE = ("sitecustomize", "usercustomize")
#: A worker's connection to its launcher is moved to this number or above: the
#: program's own descriptors then get the numbers they would get in a fresh
#: interpreter.
CONN_FLOOR = 100
#: The most descriptors a launcher passes on (0, 1, 2 and those its starter
#: passed it, e.g. the finder's pipes to a probe server).
MAX_FDS = 32
LAUNCHER = Path(__file__).with_name("zygote_launch.py")
#: The longest ``#!`` line every Linux kernel reads whole (before 5.1: 128 bytes).
SHEBANG_MAX = 127


def _interpreter_env(env: dict[str, str]) -> dict[str, str]:
    """What of ``env`` a fork must share with the server (the variables a worker
    applies itself apart: :data:`APPLIED`)."""
    return {k: v for k, v in env.items()
            if (k.startswith(("PYTHON", *SITE_PREFIXES)) and k not in APPLIED) or k in LOCALE}


def _entries(python_path: str, cwd: str) -> list[str]:
    """``sys.path``'s entries from ``PYTHONPATH`` as an interpreter started in ``cwd``
    makes them (absolute, normalised, empty ones left out)."""
    return [os.path.normpath(os.path.join(cwd, entry))
            for entry in python_path.split(os.pathsep) if entry]


def _customizes(directory: str) -> bool:
    """Whether ``site`` would import a ``sitecustomize`` or ``usercustomize`` from ``directory``."""
    return any(os.path.exists(os.path.join(directory, name + suffix))
               for name in CUSTOMIZE for suffix in ("", ".py", ".pyc"))


def _python_path(base: list[str], own: list[str], env: dict[str, str],
                 cwd: str) -> list[str] | None:
    """``sys.path`` after ``site`` for a request's ``PYTHONPATH`` (before the
    program's first entry): its entries, then ``base`` (the server's own path
    without its ``PYTHONPATH`` entries), duplicates dropped as ``site`` drops them.
    None where a fresh interpreter would differ in more than its path: an entry
    the server has is dropped (a module ``site`` imported from there stays), or
    a new one holds a ``sitecustomize``."""
    entries = _entries(env.get("PYTHONPATH", ""), cwd)
    if any(entry not in entries for entry in own):
        return None
    if any(_customizes(entry) for entry in entries if entry not in own):
        return None
    return list(dict.fromkeys([*entries, *base]))


# -- the server --------------------------------------------------------------------


class Own(NamedTuple):
    """What of the server a request must match, and what its ``sys.path`` is made from."""

    env: dict[str, str]  # :func:`_interpreter_env` of its environment
    entries: list[str]  # its ``PYTHONPATH`` entries in ``sys.path``
    base: list[str]  # the rest of ``sys.path`` after the program's entry


class Program(NamedTuple):
    """What a request's arguments ask an interpreter to run."""

    options: list[str]  # ``-u``, ``-B``
    code: str | None  # ``-c CODE``; None: ``-m pytest``
    argv: list[str]  # ``sys.argv`` (``-m``: runpy then names the module's file)


def _program(argv: object) -> Program | None:
    """``[-u] [-B] -c CODE [ARGS]`` or ``[-u] [-B] -m pytest [ARGS]``; None for anything else."""
    if not (isinstance(argv, list) and all(isinstance(arg, str) for arg in argv)):
        return None
    k = 0
    while k < len(argv) and argv[k] in ("-u", "-B"):
        k += 1
    options, rest = argv[:k], argv[k:]
    if rest[:1] == ["-c"] and len(rest) >= 2:
        return Program(options, rest[1], ["-c", *rest[2:]])
    if rest[:2] == ["-m", "pytest"]:
        return Program(options, None, ["-m", *rest[2:]])
    if rest[:1] == ["-mpytest"]:
        return Program(options, None, ["-m", *rest[1:]])
    return None


def serve(directory: str) -> None:
    """The server's main loop (``python -u -c`` runs it): listen on
    ``directory/socket``, fork a worker per request, report each worker's
    status to its launcher; end when descriptor 0 (a pipe from the process
    that started it) reaches its end.  Returns only in a forked worker,
    which has then run its program."""
    path = [p for p in sys.path]  # as `python -c` made it, before any change below
    entries = _entries(os.environ.get("PYTHONPATH", ""), os.getcwd())
    own = Own(_interpreter_env(dict(os.environ)), entries,
              [p for p in path[1:] if p not in entries])
    for name in PRELOAD:
        importlib.import_module(name)
    for name in PRELOAD_IF_INSTALLED:
        if importlib.util.find_spec(name.partition(".")[0]) is not None:
            importlib.import_module(name)
    from _pytest.config import default_plugins

    for name in default_plugins:
        importlib.import_module(f"_pytest.{name}")
    # Collections in a worker leave the server's objects alone: their pages
    # stay shared with the server instead of each worker copying them.
    gc.freeze()
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(os.path.join(directory, "socket"))
    listener.listen(64)
    wake_r, wake_w = socket.socketpair()
    wake_w.setblocking(False)
    signal.signal(signal.SIGCHLD, lambda signum, frame: None)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # ends with its pipe, as its starter does
    signal.set_wakeup_fd(wake_w.fileno())
    waiting: dict[int, socket.socket] = {}  # worker pid -> its launcher's connection
    sys.stdout.write("ready\n")
    sys.stdout.flush()
    while True:
        readable, _, _ = select.select([0, listener, wake_r], [], [])
        if 0 in readable and not os.read(0, 4096):
            return_code = 0
            break
        if wake_r in readable:
            with contextlib.suppress(BlockingIOError):
                wake_r.recv(4096)
            _reap(waiting)
        if listener in readable:
            try:
                conn, _ = listener.accept()
            except OSError:  # out of descriptors: that launcher starts a fresh interpreter
                continue
            child = _answer(conn, own, waiting)
            if child is not None:
                # The forked worker: nothing of the server stays.
                for other in waiting.values():
                    other.close()
                listener.close()
                wake_r.close()
                wake_w.close()
                _become_worker(conn, child, os.path.join(directory, "python"))
                return
    listener.close()
    sys.exit(return_code)


def _reap(waiting: dict[int, socket.socket]) -> None:
    while waiting:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        conn = waiting.pop(pid, None)
        if conn is None:
            continue
        if os.WIFSIGNALED(status):
            line = b"signal %d\n" % os.WTERMSIG(status)
        else:
            line = b"exit %d\n" % os.waitstatus_to_exitcode(status)
        with contextlib.suppress(OSError):  # a launcher killed before its worker ended
            conn.sendall(line)
        conn.close()


def _answer(conn: socket.socket, own: Own,
            waiting: dict[int, socket.socket]) -> dict[str, Any] | None:
    """Read a request, fork for it: the request in the worker, None in the server."""
    fds: list[int] = []
    pid = -1
    try:
        conn.settimeout(REQUEST_TIMEOUT)
        data, fds, _, _ = socket.recv_fds(conn, 65536, MAX_FDS)
        while len(data) < 4 or len(data) < 4 + int.from_bytes(data[:4], "big"):
            more = conn.recv(65536)
            if not more:
                raise EOFError
            data += more
        request = marshal.loads(data[4:])
        refusal = _refusal(request, own, fds)
        if refusal:
            conn.sendall(b"no " + refusal.encode() + b"\n")
        else:
            pid = os.fork()
            if pid == 0:
                conn.settimeout(None)
                request["received"] = fds
                return request  # type: ignore[no-any-return]
            waiting[pid] = conn
            conn.sendall(b"pid %d\n" % pid)
    except (OSError, EOFError, ValueError, TypeError, KeyError):
        pass
    for fd in fds:
        os.close(fd)
    if pid <= 0:
        conn.close()
    return None


def _refusal(request: dict[str, Any], own: Own, fds: list[int]) -> str:
    """Why the server cannot fork what a fresh interpreter would be for this
    request ("": it can)."""
    numbers = request.get("fds")
    if not (isinstance(numbers, list) and numbers[:3] == [0, 1, 2]
            and len(numbers) == len(fds) == len(set(numbers))):
        return "descriptors"
    if _program(request.get("argv")) is None:
        return "arguments"
    if _interpreter_env(request["env"]) != own.env:
        return "environment"
    path = _python_path(own.base, own.entries, request["env"], request["cwd"])
    if path is None:
        return "path"
    request["path"] = path
    return ""


def _become_worker(conn: socket.socket, request: dict[str, Any], launcher: str) -> None:
    """In the forked worker: take over the launcher's descriptors (once it said
    go), directory, process group, environment and arguments, then run the
    program in a fresh ``__main__`` as ``python -c`` or ``python -m`` would
    (``-m pytest`` with ``launcher`` as ``sys.executable``)."""
    signal.set_wakeup_fd(-1)
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    conn = _descriptors(request["fds"], request["received"], conn)
    answers = conn.makefile("rb")
    if answers.readline() != b"go\n":  # the launcher gave up: it started a fresh one
        os._exit(1)
    os.chdir(request["cwd"])
    group = request.get("group", "")
    if group == "session":
        os.setsid()
    elif group == "group":
        os.setpgid(0, 0)
    os.environ.clear()
    os.environ.update(request["env"])
    program = _program(request["argv"])
    assert program is not None  # _refusal checked
    _stdio("-u" in program.options or bool(os.environ.get("PYTHONUNBUFFERED")))
    sys.argv[:] = program.argv
    sys.orig_argv[:] = [sys.executable, *request["argv"]]
    sys.path[:] = ["" if program.code is not None else os.getcwd(), *request["path"]]
    sys.dont_write_bytecode = ("-B" in program.options
                               or bool(os.environ.get("PYTHONDONTWRITEBYTECODE")))
    tempfile.tempdir = None
    importlib.invalidate_caches()
    sys.modules.pop(MODULE, None)
    threading.Thread(target=_watch, args=(answers, bool(group)), daemon=True).start()
    main = sys.modules["__main__"].__dict__
    main.clear()
    main.update(__name__="__main__", __doc__=None, __package__=None, __spec__=None,
                __loader__=importlib.machinery.BuiltinImporter, __annotations__={},
                __builtins__=sys.modules["builtins"])
    if program.code is not None:
        exec(compile(program.code, "<string>", "exec"), main)
        return
    import runpy

    # The interpreters the run starts (xdist's workers, the finder's probes)
    # are forks too.
    sys.executable = launcher
    # What `python -m` calls (runpy's private entry point for it): sys.argv[0]
    # becomes the module's file, __main__ gets its code.
    runpy._run_module_as_main("pytest")  # type: ignore[attr-defined]


def _descriptors(numbers: list[int], received: list[int],
                 conn: socket.socket) -> socket.socket:
    """Put each descriptor received at the number it had in the launcher (first
    moving the received ones, and ``conn``, above every number in play and
    :data:`CONN_FLOOR`); ``conn``, moved."""
    floor = max([*numbers, *received, conn.fileno(), CONN_FLOOR - 1]) + 1
    if conn.fileno() < floor:
        moved = socket.socket(fileno=fcntl.fcntl(conn.fileno(), fcntl.F_DUPFD_CLOEXEC, floor))
        conn.close()
        conn = moved
    high = [fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, floor) for fd in received]
    for fd in received:
        os.close(fd)
    for target, fd in zip(numbers, high, strict=True):
        os.dup2(fd, target)
        os.close(fd)
    return conn


def _stdio(unbuffered: bool) -> None:
    """``sys.stdin``, ``sys.stdout``, ``sys.stderr`` (and their ``__x__``) over
    descriptors 0-2, made as CPython makes them at start-up (``create_stdio``):
    unbuffered (``-u``): no buffer under stdout and stderr, every write
    through; else line buffering on a terminal and for stderr.  Encoding and
    errors are the server's (its locale and ``PYTHONIOENCODING`` are the request's)."""
    for fd, name in enumerate(("stdin", "stdout", "stderr")):
        old = getattr(sys, f"__{name}__")
        write = fd > 0
        buffering = 0 if unbuffered and write else -1
        # Stays open as the stream's buffer (descriptors 0-2 are never closed by it).
        buffer: Any = open(fd, "wb" if write else "rb", buffering, closefd=False)  # noqa: SIM115
        raw = buffer if buffering == 0 else buffer.raw
        raw.name = f"<{name}>"
        stream = io.TextIOWrapper(buffer, old.encoding, old.errors, "\n",
                                  not unbuffered and (raw.isatty() or fd == 2), unbuffered)
        stream.mode = "w" if write else "r"  # type: ignore[misc]
        setattr(sys, name, stream)
        setattr(sys, f"__{name}__", stream)


def _watch(answers: IO[bytes], group: bool) -> None:
    """A worker's thread: signals its launcher forwards, and its launcher's end."""
    while True:
        try:
            line = answers.readline().split()
        except OSError:
            line = []
        if len(line) == 2 and line[0] == b"sig":
            os.kill(os.getpid(), int(line[1]))
            continue
        # The launcher is gone (killed): a worker does not outlive it, nor do
        # the processes of its group (the launcher's was theirs).
        if group:
            os.killpg(os.getpgid(0), signal.SIGKILL)
        os.kill(os.getpid(), signal.SIGKILL)


# -- the client ---------------------------------------------------------------------


class Zygote:
    """The server seen from this suite's process: started here, ended with it."""

    def __init__(self) -> None:
        self.directory = tempfile.mkdtemp(prefix="dagorder-zygote-")
        self.python = sys.executable
        self.launcher = os.path.join(self.directory, "python")
        if len(f"#!{self.python} -IS".encode()) > SHEBANG_MAX:
            raise RuntimeError("the interpreter's path is too long for a #! line")
        source = LAUNCHER.read_text(encoding="utf-8")
        Path(self.launcher).write_text(
            f"#!{self.python} -IS\n{source}\n"
            f"main({os.path.join(self.directory, 'socket')!r}, {self.python!r})\n",
            encoding="utf-8")
        os.chmod(self.launcher, 0o700)
        code = ("import importlib.util as u, sys;"
                f"s = u.spec_from_file_location({MODULE!r}, {__file__!r});"
                "m = u.module_from_spec(s); sys.modules[s.name] = m; s.loader.exec_module(m);"
                f"m.serve({self.directory!r})")
        hang_fd = os.environ.get("DAGORDER_SUITE_HANG_REPORT_FD")
        self.process = subprocess.Popen(
            [self.python, "-u", "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=int(hang_fd) if hang_fd else None, cwd=self.directory)
        assert self.process.stdout is not None
        ready, _, _ = select.select([self.process.stdout], [], [], START_TIMEOUT)
        if not ready or self.process.stdout.readline() != b"ready\n":
            self.close()
            raise RuntimeError("the suite's fork server did not start")

    @property
    def alive(self) -> bool:
        return self.process.poll() is None

    def close(self) -> None:
        """End the server (its workers stay: each ends with its launcher)."""
        if self.process.stdin is not None:
            with contextlib.suppress(OSError):
                self.process.stdin.close()
        try:
            self.process.wait(5)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(5)
        if self.process.stdout is not None:
            self.process.stdout.close()
        for name in ("socket", "python"):
            with contextlib.suppress(OSError):
                os.unlink(os.path.join(self.directory, name))
        with contextlib.suppress(OSError):
            os.rmdir(self.directory)
