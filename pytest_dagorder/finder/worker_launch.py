"""The interpreter of the ``-n 2`` check's xdist workers when the check is forked
from a probe server (``probe_plugin._run_check``).

Never imported: the server writes it as an executable file, ``#!PYTHON -IS``,
this source, then ``main(SOCKET, PYTHON)``, and the check's controller names
that file as its interpreter, so execnet starts each worker as ``LAUNCHER -u
-c BOOTSTRAP``.  It hands its descriptors 0, 1 and 2, its arguments,
environment and directory to the server listening at ``SOCKET``, which forks a
worker from its collected process that takes them over; it stays as that
worker's stand-in: it forwards the signals it gets and ends as the worker
ended.  When the server is not there, refuses or does not answer in time, it
replaces itself with ``PYTHON`` and the same arguments: a fresh worker.
Standard library only, and as little of it as it can (``_socket``, not
``socket``): it runs with ``-S`` and before every worker.
"""

import _signal  # type: ignore[import-not-found]  # no stubs; `signal` would import enum
import _socket
import marshal
import os
import sys

#: Bounds on the server's answers (its loop does nothing else for long; a
#: loaded machine makes a fork take tens of milliseconds).
CONNECT_TIMEOUT = 5.0
ANSWER_TIMEOUT = 30.0
#: The signals the stand-in passes on (SIGKILL cannot be caught: the worker then
#: sees its stand-in's end of the socket close and ends itself).
FORWARDED = ("SIGTERM", "SIGINT", "SIGHUP", "SIGQUIT", "SIGUSR1", "SIGUSR2")


class Lines:
    """The server's answers, a line at a time."""

    def __init__(self, conn: _socket.socket) -> None:
        self.conn = conn
        self.buffer = b""

    def next(self) -> list[bytes]:
        """The next line's words, [] at the end."""
        while b"\n" not in self.buffer:
            data = self.conn.recv(4096)
            if not data:
                return []
            self.buffer += data
        line, self.buffer = self.buffer.split(b"\n", 1)
        return line.split()


def fresh(python: str) -> None:
    os.execv(python, [python, *sys.argv[1:]])


def main(path: str, python: str) -> None:
    """Stand in for a worker forked by the server at ``path``, or become ``python``."""
    try:
        conn = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
        conn.settimeout(CONNECT_TIMEOUT)
        conn.connect(path)
        request = marshal.dumps({"argv": sys.argv[1:], "env": dict(os.environ),
                                 "cwd": os.getcwd()})
        fds = b"".join(fd.to_bytes(4, sys.byteorder) for fd in (0, 1, 2))
        message = len(request).to_bytes(4, "big") + request
        sent = conn.sendmsg([message], [(_socket.SOL_SOCKET, _socket.SCM_RIGHTS, fds)])
        conn.sendall(message[sent:])
        conn.settimeout(ANSWER_TIMEOUT)
        answers = Lines(conn)
        first = answers.next()
    except OSError:
        fresh(python)
        return
    if len(first) != 2 or first[0] != b"pid":
        conn.close()  # a worker forked all the same reads no "go" and ends
        fresh(python)
        return
    conn.settimeout(None)  # from here the wait is the worker's life
    conn.sendall(b"go\n")
    # The worker holds the pipes now: their ends close with it alone.
    null = os.open(os.devnull, os.O_RDWR)
    os.dup2(null, 0)
    os.dup2(null, 1)

    def forward(signum: int, frame: object) -> None:
        try:
            conn.sendall(b"sig %d\n" % signum)
        except OSError:  # the worker and the server are gone: the loop below ends
            return

    for name in FORWARDED:
        _signal.signal(getattr(_signal, name), forward)
    while True:
        line = answers.next()
        if len(line) == 2 and line[0] == b"exit":
            os._exit(int(line[1]))
        if len(line) == 2 and line[0] == b"signal":
            number = int(line[1])
            _signal.signal(number, _signal.SIG_DFL)
            os.kill(os.getpid(), number)
            os._exit(128 + number)
        if not line:  # the server and the worker are gone, no status came
            os._exit(1)
