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
