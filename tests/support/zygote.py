"""The suite's fork server ("zygote") for the xdist workers of its in-process inner runs.

Most of what an inner ``-n 2`` run costs is starting its workers: execnet starts
each as ``sys.executable -u -c BOOTSTRAP``, and each imports pytest, its default
plugins and execnet again: most of what a worker costs (docs/performance.md,
"This project's own checks").  A :class:`Zygote` is one process per process of this
suite (started by the first inner run that asks, ended with this process)
that imported those once; ``tests/helpers.py:runpytest`` points
``sys.executable`` at its launcher (``support/zygote_launch.py``) for the inner
run, and each worker is then a fork of the server that takes over the
launcher's descriptors, arguments, environment and directory.

What a forked worker has as a fresh ``python -u -c BOOTSTRAP`` would:
descriptors 0-2, ``os.environ``, the working directory, ``sys.argv``
(``['-c']``), ``sys.path`` (the server's own as ``python -c`` made it; the
server refuses a request whose ``PYTHON*`` variables or locale differ from
its own, and the launcher then starts a fresh interpreter), a fresh
``__main__``, ``sys.dont_write_bytecode`` as its environment and ``-B`` say,
and its exit status and signals through the launcher, which execnet waits
for and kills.  A worker whose launcher died (execnet kills it on teardown
and timeouts) kills itself.

Known differences, and why what the tests check does not depend on them:

- **Modules already imported**: pytest, its default plugins (``_pytest.*``,
  which a fresh process imports first thing, before its assertion-rewriting
  hook exists), execnet and what they import.  Neither xdist nor this plugin
  is imported by the server: pytest marks an installed plugin's modules for
  rewriting and warns (an error under ``filterwarnings = error``) when they
  were imported before, and the plugin's own loading (``shims/late_loading``)
  is what some tests check; a worker imports both as a fresh one does
  (pre-importing them too would save little: docs/performance.md).
- **One hash seed** for all workers of all inner runs of this process (a fresh
  interpreter draws one each): the plugin's results must not depend on hash or
  set order, which ``helpers.outputs_under_hash_seeds`` checks under fixed seeds
  in processes of their own; a ``PYTHONHASHSEED`` an inner run sets is honoured
  (the server refuses it, the worker starts fresh).
- **Parent process**: a worker's parent is the server, not the controller
  (``os.getppid()``); the launcher stands in for it towards execnet.
- **The server's objects are frozen** (``gc.freeze``) so that a worker's
  collections do not write to, and so copy, their pages: garbage among them
  (importing makes next to none) is never collected in a worker.  What the
  tests check of collection (unraisable exceptions, ``ResourceWarning``)
  concerns objects a worker makes.

Runs of tests marked ``versions`` (tests/conftest.py), runs in a process of
their own (``own_process``: their workers are started by that process) and
every run when ``DAGORDER_SUITE_FRESH_WORKERS`` is set to a non-empty value
keep fresh interpreters; so does every run after the server failed to start
or died (:func:`helpers.runpytest` checks before each run, the launcher at each
start).  This module is run by the server with nothing but the standard
library imported by it.
"""

from __future__ import annotations

import contextlib
import gc
import importlib
import importlib.machinery
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
from typing import IO, Any

#: Set to a non-empty value: every inner run's workers are fresh interpreters.
FRESH_ENV = "DAGORDER_SUITE_FRESH_WORKERS"
#: The name the server loads this module under (a worker drops it again).
MODULE = "_dagorder_suite_zygote"
#: What the server imports before it serves (a worker imports the rest).
PRELOAD = ("pytest", "execnet", "execnet.gateway_base")
#: Bound on the server's start-up (imports, then one line: "ready").
START_TIMEOUT = 60.0
#: Bound on reading one request once a launcher connected.
REQUEST_TIMEOUT = 10.0
#: Environment variables that must be the server's own for a fork to be what a
#: fresh interpreter would be: the interpreter reads them at start-up
#: (``PYTHON*``: path, hash seed, warnings, flags ...), and the locale sets the
#: encoding of the standard streams.
LOCALE = ("LANG", "LC_ALL", "LC_CTYPE")
LAUNCHER = Path(__file__).with_name("zygote_launch.py")
#: The longest ``#!`` line every Linux kernel reads whole (before 5.1: 128 bytes).
SHEBANG_MAX = 127


def _interpreter_env(env: dict[str, str]) -> dict[str, str]:
    return {k: v for k, v in env.items()
            if (k.startswith("PYTHON") and k != "PYTHONDONTWRITEBYTECODE") or k in LOCALE}


# -- the server --------------------------------------------------------------------


def serve(directory: str) -> None:
    """The server's main loop (``python -u -c`` runs it): listen on
    ``directory/socket``, fork a worker per request, report each worker's
    status to its launcher; end when descriptor 0 (a pipe from the process
    that started it) reaches its end.  Returns only in a forked worker,
    which has then run its bootstrap."""
    path = [p for p in sys.path]  # as `python -c` made it, before any change below
    for name in PRELOAD:
        importlib.import_module(name)
    from _pytest.config import default_plugins

    for name in default_plugins:
        importlib.import_module(f"_pytest.{name}")
    # Collections in a worker leave the server's objects alone: their pages
    # stay shared with the server instead of each worker copying them.
    gc.freeze()
    own = _interpreter_env(dict(os.environ))
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
            conn, _ = listener.accept()
            child = _answer(conn, own, waiting)
            if child is not None:
                # The forked worker: nothing of the server stays.
                for other in waiting.values():
                    other.close()
                listener.close()
                wake_r.close()
                wake_w.close()
                _become_worker(conn, child, path)
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


def _answer(conn: socket.socket, own: dict[str, str],
            waiting: dict[int, socket.socket]) -> dict[str, Any] | None:
    """Read a request, fork for it: the request in the worker, None in the server."""
    fds: list[int] = []
    pid = -1
    try:
        conn.settimeout(REQUEST_TIMEOUT)
        data, fds, _, _ = socket.recv_fds(conn, 65536, 3)
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
                request["fds"] = fds
                return request  # type: ignore[no-any-return]
            waiting[pid] = conn
            conn.sendall(b"pid %d\n" % pid)
    except (OSError, EOFError, ValueError):
        pass
    for fd in fds:
        os.close(fd)
    if pid <= 0:
        conn.close()
    return None


def _refusal(request: dict[str, Any], own: dict[str, str], fds: list[int]) -> str:
    argv = request.get("argv")
    if len(fds) != 3:
        return "descriptors"
    if not (isinstance(argv, list) and argv[:1] == ["-u"] and len(argv) in (3, 4)
            and argv[-2] == "-c" and argv[1:-2] in ([], ["-B"])):
        return "arguments"
    if _interpreter_env(request["env"]) != own:
        return "environment"
    return ""


def _become_worker(conn: socket.socket, request: dict[str, Any], path: list[str]) -> None:
    """In the forked worker: wait for the launcher's go, take over its
    descriptors, arguments, environment and directory, then run the bootstrap
    in a fresh ``__main__`` as ``python -c`` would."""
    signal.set_wakeup_fd(-1)
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    answers = conn.makefile("rb")
    if answers.readline() != b"go\n":  # the launcher gave up: it started a fresh one
        os._exit(1)
    for target, fd in enumerate(request["fds"]):
        os.dup2(fd, target)
        os.close(fd)
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    argv = request["argv"]
    sys.argv[:] = ["-c"]
    sys.path[:] = path
    sys.dont_write_bytecode = "-B" in argv or bool(os.environ.get("PYTHONDONTWRITEBYTECODE"))
    tempfile.tempdir = None
    importlib.invalidate_caches()
    sys.modules.pop(MODULE, None)
    threading.Thread(target=_watch, args=(answers,), daemon=True).start()
    main = sys.modules["__main__"].__dict__
    main.clear()
    main.update(__name__="__main__", __doc__=None, __package__=None, __spec__=None,
                __loader__=importlib.machinery.BuiltinImporter, __annotations__={},
                __builtins__=sys.modules["builtins"])
    exec(compile(argv[-1], "<string>", "exec"), main)


def _watch(answers: IO[bytes]) -> None:
    """A worker's thread: signals its launcher forwards, and its launcher's end."""
    while True:
        try:
            line = answers.readline().split()
        except OSError:
            line = []
        if len(line) == 2 and line[0] == b"sig":
            os.kill(os.getpid(), int(line[1]))
            continue
        # The launcher is gone (killed): a worker does not outlive it.
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
