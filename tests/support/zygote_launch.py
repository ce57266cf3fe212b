"""The launcher of the suite's fork server (``support.zygote``): what execnet starts
as the interpreter of an inner run's xdist worker (``sys.executable -u -c BOOTSTRAP``).

:class:`support.zygote.Zygote` writes it as an executable file: ``#!PYTHON -IS``,
the constants ``SOCKET`` and ``PYTHON``, then this source (run as ``__main__``:
no import of the suite's code, no site, no bytecode to find).  It hands its
descriptors 0, 1 and 2, its arguments, environment and directory to the fork
server, which forks a worker that takes them over, and it stays as that
worker's stand-in: it forwards the signals it gets and ends as the worker
ended.  When the server is not there, refuses (another interpreter, other
options) or does not answer in time, it replaces itself with ``PYTHON``
and the same arguments: a fresh interpreter, as without the server.
"""

import json
import os
import signal
import socket
import sys

#: Bounds on the server's answers (it answers from a loop that does nothing
#: else for long; a loaded machine makes a fork take tens of milliseconds).
CONNECT_TIMEOUT = 5.0
ANSWER_TIMEOUT = 30.0
#: The signals a worker's stand-in passes on (SIGKILL cannot be caught: the
#: worker then sees its stand-in's end of the socket close and kills itself).
FORWARDED = ("SIGTERM", "SIGINT", "SIGHUP", "SIGQUIT", "SIGUSR1", "SIGUSR2")


def fresh(python: str) -> None:
    os.execv(python, [python, *sys.argv[1:]])


def main(path: str, python: str) -> None:
    """Serve as the stand-in of a worker forked by the server listening at
    ``path``, or become a fresh ``python``."""
    try:
        conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        conn.settimeout(CONNECT_TIMEOUT)
        conn.connect(path)
        request = json.dumps({"argv": sys.argv[1:], "env": dict(os.environ),
                              "cwd": os.getcwd()}).encode()
        socket.send_fds(conn, [len(request).to_bytes(4, "big") + request], [0, 1, 2])
        conn.settimeout(ANSWER_TIMEOUT)
        answers = conn.makefile("rb")
        first = answers.readline().split()
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
        except OSError:  # the worker and server are gone: the loop below ends
            return

    for name in FORWARDED:
        signal.signal(getattr(signal, name), forward)
    while True:
        try:
            line = answers.readline().split()
        except InterruptedError:  # pragma: no cover - retried by Python itself (PEP 475)
            continue
        if len(line) == 2 and line[0] == b"exit":
            os._exit(int(line[1]))
        if len(line) == 2 and line[0] == b"signal":
            number = int(line[1])
            signal.signal(number, signal.SIG_DFL)
            os.kill(os.getpid(), number)
            os._exit(128 + number)
        if not line:  # the server and the worker are gone, no status came
            os._exit(1)
