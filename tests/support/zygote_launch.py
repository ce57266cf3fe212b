"""The launcher of the suite's fork server (``support.zygote``): ``sys.executable``
during an inner run, so what execnet starts as an xdist worker's interpreter
(``-u -c BOOTSTRAP``) and the finder or pytester as ``-m pytest ...``.

:class:`support.zygote.Zygote` writes it as an executable file: ``#!PYTHON -IS``,
the constants ``SOCKET`` and ``PYTHON``, then this source (run as ``__main__``:
no import of the suite's code, no site, no bytecode to find).  It hands its
descriptors (0, 1, 2 and those passed to it), its arguments, environment,
directory and whether it leads a session or process group to the fork
server, which forks a worker that takes them over, and it stays as that
worker's stand-in: it forwards the signals it gets and ends as the worker
ended.  When the server is not there, refuses (another interpreter, other
options) or does not answer in time, it replaces itself with ``PYTHON``
and the same arguments: a fresh interpreter, as without the server.
"""

import _signal
import _socket
import marshal
import os
import sys

#: Bounds on the server's answers (it answers from a loop that does nothing
#: else for long; a loaded machine makes a fork take tens of milliseconds).
CONNECT_TIMEOUT = 5.0
ANSWER_TIMEOUT = 30.0
#: The signals a worker's stand-in passes on (SIGKILL cannot be caught: the
#: worker then sees its stand-in's end of the socket close and kills itself).
FORWARDED = ("SIGTERM", "SIGINT", "SIGHUP", "SIGQUIT", "SIGUSR1", "SIGUSR2")


class Lines:
    """The server's answers, a line at a time (``socket.makefile`` would import
    ``socket``, ``selectors`` and ``enum``: several times what this launcher
    costs without them)."""

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


def passed(conn: int) -> list[int]:
    """The descriptors above 2 this process inherited (its starter's
    ``pass_fds``): a fresh interpreter would have them too."""
    found = []
    for name in os.listdir("/proc/self/fd"):
        fd = int(name)
        if fd > 2 and fd != conn:
            try:
                if os.get_inheritable(fd):
                    found.append(fd)
            except OSError:  # listdir's own, closed by now
                continue
    return sorted(found)


def group() -> str:
    """Whether this process leads a session or a process group (its starter's
    ``start_new_session``, ``process_group``): its worker then leads its own."""
    pid = os.getpid()
    return "session" if os.getsid(0) == pid else "group" if os.getpgid(0) == pid else ""


def fresh(python: str) -> None:
    os.execv(python, [python, *sys.argv[1:]])


def main(path: str, python: str) -> None:
    """Serve as the stand-in of a worker forked by the server listening at
    ``path``, or become a fresh ``python``."""
    try:
        conn = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
        conn.settimeout(CONNECT_TIMEOUT)
        conn.connect(path)
        numbers = [0, 1, 2, *passed(conn.fileno())]
        request = marshal.dumps({"argv": sys.argv[1:], "env": dict(os.environ),
                                 "cwd": os.getcwd(), "fds": numbers, "group": group()})
        fds = b"".join(fd.to_bytes(4, sys.byteorder) for fd in numbers)
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
    for fd in numbers[3:]:
        os.close(fd)

    def forward(signum: int, frame: object) -> None:
        try:
            conn.sendall(b"sig %d\n" % signum)
        except OSError:  # the worker and server are gone: the loop below ends
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
