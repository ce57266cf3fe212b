"""The suite's fork server for inner runs' workers (``support/zygote.py``): a worker
forked from it sees what a fresh ``python -u -c`` would, ends with its launcher,
and a launcher without a server starts a fresh interpreter."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import helpers
import pytest
from helpers import forked_workers, runpytest
from support.zygote import FRESH_ENV, Zygote

WAIT = 30.0

#: What a worker reports of itself, as JSON.
REPORT = """\
import json, os, sys
print(json.dumps({"cwd": os.getcwd(), "argv": sys.argv, "path": sys.path,
                  "env": os.environ.get("ZYGOTE_CHECK"), "pid": os.getpid(),
                  "parent": os.getppid(), "executable": sys.executable,
                  "main": sorted(vars(sys.modules["__main__"])),
                  "bytecode": sys.dont_write_bytecode}))
"""


@pytest.fixture
def zygote() -> Iterator[Zygote]:
    server = Zygote()
    try:
        yield server
    finally:
        server.close()


def report(python: str, cwd: Path, *options: str) -> dict[str, Any]:
    env = {**os.environ, "ZYGOTE_CHECK": str(cwd)}
    done = subprocess.run([python, "-u", *options, "-c", REPORT], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=WAIT, check=True)
    out: dict[str, Any] = json.loads(done.stdout)
    return out


def gone(pid: int) -> bool:
    """Whether process ``pid`` ended (or is a zombie no one waited for yet)."""
    deadline = time.monotonic() + WAIT
    while time.monotonic() < deadline:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            return True
        if state == "Z":
            return True
        time.sleep(0.05)
    return False


@pytest.mark.parametrize("options", [(), ("-B",)])
def test_a_forked_worker_sees_what_a_fresh_interpreter_would(
        zygote: Zygote, tmp_path: Path, options: tuple[str, ...]) -> None:
    forked = report(zygote.launcher, tmp_path, *options)
    fresh = report(sys.executable, tmp_path, *options)
    assert forked["parent"] == zygote.process.pid  # it was forked, not started afresh
    for key in ("cwd", "argv", "path", "env", "executable", "main", "bytecode"):
        assert forked[key] == fresh[key], key
    assert forked["cwd"] == forked["env"] == str(tmp_path)


#: An inner test module that reports its process as :data:`REPORT` does, and more.
MODULE_REPORT = """
import json, os, sys


def test_report():
    streams = [[type(s.buffer).__name__, s.line_buffering, s.write_through, s.encoding,
                s.errors, s.mode, getattr(s.buffer, "raw", s.buffer).name]
               for s in (sys.__stdin__, sys.__stdout__, sys.__stderr__)]
    report = {"cwd": os.getcwd(), "argv": sys.argv, "orig": sys.orig_argv[1:],
              "path": sys.path, "executable": sys.executable, "parent": os.getppid(),
              "main": sorted(vars(sys.modules["__main__"])), "streams": streams,
              "bytecode": sys.dont_write_bytecode, "module": sys.modules["__main__"].__file__,
              "fds": sorted(int(fd) for fd in os.listdir("/proc/self/fd")),
              "leads": [os.getsid(0) == os.getpid(), os.getpgid(0) == os.getpid()]}
    with open(os.environ["ZYGOTE_REPORT"], "w") as f:
        json.dump(report, f)
"""


def module_report(python: str, cwd: Path, argv: tuple[str, ...], *, unbuffered: bool,
                  session: bool) -> dict[str, Any]:
    """``python ARGV test_report.py`` as the finder starts a probe or pytester a
    subprocess run: ``PYTHONPATH`` with ``cwd`` first, a descriptor passed on."""
    (cwd / "test_report.py").write_text(MODULE_REPORT, encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}
    if unbuffered:
        env["PYTHONUNBUFFERED"] = "1"
    env["ZYGOTE_REPORT"] = str(cwd / "report.json")
    env["PYTHONPATH"] = os.pathsep.join([str(cwd), *filter(None, [env.get("PYTHONPATH")])])
    read, write = os.pipe()
    try:
        subprocess.run([python, *argv, "-q", "-s", *helpers.base_args(), "test_report.py"],
                       cwd=cwd, env=env, capture_output=True, timeout=WAIT, check=True,
                       pass_fds=(write,), start_new_session=session)
    finally:
        os.close(read)
        os.close(write)
    out: dict[str, Any] = json.loads((cwd / "report.json").read_text(encoding="utf-8"))
    return out


@pytest.mark.parametrize(("argv", "unbuffered", "session"), [
    (("-mpytest",), False, False),  # pytester's runpytest_subprocess
    (("-m", "pytest"), True, True),  # the finder's probe servers and checks
    (("-u", "-B", "-m", "pytest"), False, True)])
def test_a_forked_pytest_sees_what_a_fresh_python_m_pytest_would(
        zygote: Zygote, tmp_path: Path, argv: tuple[str, ...], unbuffered: bool,
        session: bool) -> None:
    forked = module_report(zygote.launcher, tmp_path, argv, unbuffered=unbuffered,
                           session=session)
    fresh = module_report(sys.executable, tmp_path, argv, unbuffered=unbuffered,
                          session=session)
    assert forked["parent"] == zygote.process.pid  # it was forked, not started afresh
    for key in ("cwd", "argv", "orig", "path", "main", "streams", "bytecode", "module",
                "leads"):
        assert forked[key] == fresh[key], key
    # What the run starts is forked too.
    assert (forked["executable"], fresh["executable"]) == (zygote.launcher, sys.executable)
    # The one descriptor more is the worker's connection to its launcher.
    assert len(forked["fds"]) == len(fresh["fds"]) + 1
    assert forked["fds"][:-1] == fresh["fds"]
    assert forked["path"][:2] == [str(tmp_path)] * 2
    assert forked["leads"] == [session, session]


@pytest.mark.parametrize("customized", [False, True])
def test_a_path_the_server_cannot_give_gets_a_fresh_interpreter(
        zygote: Zygote, tmp_path: Path, customized: bool) -> None:
    """A ``PYTHONPATH`` entry with a ``sitecustomize`` (which ``site`` would import)
    gets a fresh interpreter; any other entry a fork with it in its path."""
    if customized:
        (tmp_path / "sitecustomize.py").write_text("", encoding="utf-8")
    env = {**os.environ, "ZYGOTE_CHECK": str(tmp_path),
           "PYTHONPATH": os.pathsep.join([str(tmp_path),
                                          *filter(None, [os.environ.get("PYTHONPATH")])])}
    done = subprocess.run([zygote.launcher, "-u", "-c", REPORT], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=WAIT, check=True)
    out = json.loads(done.stdout)
    assert out["parent"] == (os.getpid() if customized else zygote.process.pid)
    assert out["path"][:2] == ["", str(tmp_path)]


def test_a_killed_group_leader_takes_its_workers_group_down(zygote: Zygote) -> None:
    """The finder stops a probe with ``killpg`` of its process (started as a
    session leader): what the probe started goes too."""
    code = ("import os, subprocess, sys, time\n"
            "child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'])\n"
            "print(os.getpid(), child.pid, flush=True)\n"
            "time.sleep(60)\n")
    worker = subprocess.Popen([zygote.launcher, "-u", "-c", code], stdout=subprocess.PIPE,
                              start_new_session=True)
    assert worker.stdout is not None
    pid, child = map(int, worker.stdout.readline().split())
    assert pid != worker.pid
    os.killpg(worker.pid, signal.SIGKILL)
    assert worker.wait(WAIT) == -signal.SIGKILL
    assert gone(pid)
    assert gone(child)
    worker.stdout.close()


def test_exit_status_and_signals_go_through_the_launcher(zygote: Zygote) -> None:
    done = subprocess.run([zygote.launcher, "-u", "-c", "import sys; sys.exit(3)"],
                          timeout=WAIT, check=False)
    assert done.returncode == 3
    worker = subprocess.Popen(
        [zygote.launcher, "-u", "-c", "import os, time; print(os.getpid()); time.sleep(60)"],
        stdout=subprocess.PIPE)
    assert worker.stdout is not None
    pid = int(worker.stdout.readline())
    assert pid != worker.pid
    worker.send_signal(signal.SIGTERM)
    assert worker.wait(WAIT) == -signal.SIGTERM
    assert gone(pid)
    worker.stdout.close()


def test_a_killed_launcher_takes_its_worker_down(zygote: Zygote) -> None:
    """execnet kills a worker's process (its launcher) on teardown and timeouts."""
    worker = subprocess.Popen(
        [zygote.launcher, "-u", "-c", "import os, time; print(os.getpid()); time.sleep(60)"],
        stdout=subprocess.PIPE)
    assert worker.stdout is not None
    pid = int(worker.stdout.readline())
    worker.kill()
    assert worker.wait(WAIT) == -signal.SIGKILL
    assert gone(pid)
    worker.stdout.close()


def test_without_the_server_the_launcher_starts_a_fresh_interpreter(
        zygote: Zygote, tmp_path: Path) -> None:
    zygote.process.kill()
    zygote.process.wait(WAIT)
    fresh = report(zygote.launcher, tmp_path)
    assert fresh["parent"] == os.getpid()  # the launcher became the interpreter
    assert fresh["path"] == report(sys.executable, tmp_path)["path"]


def test_a_different_hash_seed_gets_a_fresh_interpreter(zygote: Zygote) -> None:
    code = "import os; print(os.getppid(), hash('zygote'))"
    env = {**os.environ, "PYTHONHASHSEED": "7"}
    out = [subprocess.run([python, "-u", "-c", code], env=env, capture_output=True,
                          text=True, timeout=WAIT, check=True).stdout.split()
           for python in (zygote.launcher, sys.executable)]
    assert out[0][0] == str(os.getpid())
    assert out[0][1] == out[1][1]


INNER = """
import os

def test_one():
    with open("parents", "a") as f:
        f.write(f"{os.getppid()}\\n")

def test_two():
    test_one()
"""


def inner_parents(pytester: pytest.Pytester) -> set[int]:
    pytester.makepyfile(test_inner=INNER)
    result = runpytest(pytester, *helpers.base_args(), "-n", "2")
    result.assert_outcomes(passed=2)
    return {int(line) for line in (pytester.path / "parents").read_text().split()}


def test_an_inner_runs_workers_are_forks_of_the_server(pytester: pytest.Pytester) -> None:
    parents = inner_parents(pytester)
    server = helpers._zygote
    assert isinstance(server, Zygote)
    assert parents == {server.process.pid}


#: An inner test that starts ``sys.executable -m pytest`` as the finder starts its
#: probes, and records its process, that process' parent and the parent of the
#: interpreter it started.
STARTS = """
import os, subprocess, sys


def test_start():
    code = "import os; print(os.getppid())"
    done = subprocess.run([sys.executable, "-m", "pytest", "--version"], capture_output=True)
    assert done.returncode == 0, done.stderr
    started = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    with open("parents", "a") as f:
        f.write(f"{os.getpid()} {os.getppid()} {started.stdout.strip()}\\n")
"""


@pytest.mark.parametrize("own_process", ["", "checked here"])
def test_an_inner_runs_python_starts_are_forks_of_the_server(
        pytester: pytest.Pytester, own_process: str) -> None:
    """In an in-process inner run (xdist's or not: the finder starts its probes
    either way) an interpreter started as ``sys.executable`` is a fork of the
    server; so are a run in a process of its own and what it starts."""
    pytester.makepyfile(test_inner=STARTS)
    result = runpytest(pytester, *helpers.base_args(), "-p", "no:xdist",
                       own_process=own_process)
    result.assert_outcomes(passed=1)
    server = helpers._zygote
    assert isinstance(server, Zygote)
    pid, parent, started = map(int, (pytester.path / "parents").read_text().split())
    assert started == server.process.pid
    if own_process:
        assert parent == server.process.pid
    else:
        assert (pid, parent) == (os.getpid(), os.getppid())


def test_the_variable_keeps_fresh_workers(pytester: pytest.Pytester,
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(FRESH_ENV, "1")
    assert inner_parents(pytester) == {os.getpid()}


def test_a_reason_for_fresh_workers_keeps_them(pytester: pytest.Pytester,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """As tests/conftest.py gives the tests marked ``versions``."""
    monkeypatch.setattr(helpers, "fresh_workers", "versions")
    assert inner_parents(pytester) == {os.getpid()}


def test_a_dead_server_leaves_fresh_workers(pytester: pytest.Pytester,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    server = Zygote()
    monkeypatch.setattr(helpers, "_zygote", server)
    server.process.kill()
    server.process.wait(WAIT)
    try:
        assert inner_parents(pytester) == {os.getpid()}
    finally:
        server.close()
    with forked_workers():
        assert sys.executable != server.launcher
