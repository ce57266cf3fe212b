"""Remote workers: a socket worker (execnet's socket server) next to a popen one.

The socket server runs in its own empty directory, so the remote worker sees
the tests only through ``--rsyncdir`` (its copy lives under the server's
``pyexecnetcache``): nothing may rely on a filesystem, temp or cache
directory shared with the controller.  Each run gets a fresh server, because
the server runs the worker in its own process and would keep the previous
run's modules imported.

Outcomes, skip reasons and order must come out as on a local ``-n 2`` run.
The inner tests write their log to an absolute path (the server is on this
machine); that log is the test's instrument, not something the plugin uses.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers import (
    HYPOTHESIS_PLUGIN,
    LOG_NAME,
    Ran,
    assert_after,
    forked_workers,
    junit_key,
    make_modules,
    read_junit,
    read_log,
)

import pytest_dagorder

TIMEOUT = 120.0
SERVER_START = 20.0
#: Where pytest's cache keeps the durations the controller records.
DURATIONS_KEY = "dagorder/durations"

pytest.importorskip("execnet.script.socketserver")

#: The remote workers are plain pytest processes started here, loading the
#: plugin by its entry point.
pytestmark = pytest.mark.autoload

SUITE = {
    "tests__test_flow": """
        STATE = {}

        def test_root():
            mark("root")
            STATE["root"] = 1

        @depends_on("test_root")
        def test_mid():
            mark("mid")
            assert STATE["root"] == 1  # carried state: needs module affinity
            STATE["mid"] = 1

        @depends_on("test_mid")
        def test_leaf():
            mark("leaf")

        @depends_on("test_root")
        def test_broken():
            mark("broken")
            assert 0, "boom"

        @depends_on("test_broken")
        def test_after_broken():
            mark("after_broken")

        @depends_on("test_after_broken")
        def test_two_down():
            mark("two_down")

        @run_after("test_broken")
        def test_ordered_only():
            mark("ordered_only")
    """,
    "tests__test_other": """
        import pytest

        @pytest.mark.parametrize("i", range(6))
        def test_free(i):
            mark(f"free{i}", 0.05)

        @pytest.mark.skip(reason="not today")
        def test_skipped():
            mark("skipped")

        @depends_on("test_skipped")
        def test_needs_skipped():
            mark("needs_skipped")

        @depends_on("tests/test_flow.py::test_leaf")
        def test_cross_module():
            mark("cross")

        @pytest.mark.xfail(reason="known", strict=True)
        def test_xfail():
            mark("xfail")
            assert 0

        @depends_on("test_xfail")
        def test_needs_xfail():
            mark("needs_xfail")
    """,
}

EDGES = [("root", "mid"), ("mid", "leaf"), ("root", "broken"), ("broken", "ordered_only"),
         ("leaf", "cross")]
NOT_RUN = {"after_broken", "two_down", "skipped", "needs_skipped", "needs_xfail"}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextlib.contextmanager
def socket_server(home: Path, env: dict[str, str] | None = None) -> Iterator[str]:
    """A fresh execnet socket server in ``home`` (created empty); yields its ``--tx`` spec.

    Skips the test if the server does not listen within a bounded time.
    """
    home.mkdir(parents=True)
    port = free_port()
    server = subprocess.Popen(
        [sys.executable, "-u", "-m", "execnet.script.socketserver", f"127.0.0.1:{port}"],
        cwd=home, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + SERVER_START
        while True:
            try:
                # The server accepts this probe, reads an empty line and loops back.
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if server.poll() is not None or time.monotonic() > deadline:
                    pytest.skip("execnet's socket server did not start listening")
                time.sleep(0.05)
        yield f"socket=127.0.0.1:{port}//id=sock"
    finally:
        server.kill()
        server.wait(timeout=30)


def inner_run(project: Path, *args: str) -> subprocess.CompletedProcess[str]:
    # The controller and its popen workers: forks of the suite's fork server
    # (the socket server's worker is a process of the server's own).
    with forked_workers():
        return subprocess.run(
            [sys.executable, "-m", "pytest", "-rA", "-v", "-W", "ignore::DeprecationWarning",
             "-p", f"no:{HYPOTHESIS_PLUGIN}", f"--junitxml={project / 'junit.xml'}", *args],
            cwd=project, capture_output=True, text=True, timeout=TIMEOUT,
        )


def outcomes(project: Path) -> dict[str, tuple[str, str]]:
    cases, count = read_junit(project / "junit.xml")
    assert count == len(cases)
    return {k: (c.outcome, c.message) for k, c in cases.items()}


def make_project(pytester: pytest.Pytester) -> Path:
    make_modules(pytester, **SUITE)
    # The xdist deprecation of rsync is xdist's business, not this suite's.
    pytester.makeini("[pytest]\nfilterwarnings =\n    error\n"
                     "    ignore:The --rsyncdir:DeprecationWarning\n")
    return pytester.path


def remote_args(project: Path, spec: str) -> list[str]:
    # The `=` forms: xdist rewrites every argument that names an existing path
    # relative to an rsync root, and refuses one outside all of them.
    tests = project / "tests"
    return ["--dist=load", f"--tx={spec}", "--tx=popen//id=pop", f"--rsyncdir={tests}",
            str(tests)]


def check_log(ran: dict[str, Ran]) -> None:
    assert NOT_RUN.isdisjoint(ran), sorted(NOT_RUN & set(ran))
    assert_after(ran, EDGES)


def test_socket_worker_matches_local_run(pytester: pytest.Pytester, tmp_path: Path) -> None:
    """A socket worker beside a popen one gives the local run's outcomes and order.
    Recorded durations are read and written by the controller only: the remote
    run ranks by those the local run recorded, although the remote worker never
    saw the controller's cache, and records its own there."""
    project = make_project(pytester)
    local = inner_run(project, "-n", "2", "tests")
    assert local.returncode == 1, local.stdout
    assert "critical path by test counts" in local.stdout  # nothing recorded before
    expected = outcomes(project)
    check_log(read_log(pytester))
    (project / LOG_NAME).unlink()
    recorded = (project / ".pytest_cache" / "v" / DURATIONS_KEY).read_text()

    home = tmp_path / "remote-home"
    with socket_server(home) as spec:
        remote = inner_run(project, *remote_args(project, spec))
    assert remote.returncode == 1, remote.stdout + remote.stderr
    assert "[sock]" in remote.stdout, "the socket worker ran no test"
    assert "critical path by recorded durations of 14/18 tests" in remote.stdout, remote.stdout
    assert outcomes(project) == expected
    ran = read_log(pytester)
    check_log(ran)
    # The chain carrying module state stayed on one worker (the one that ran root).
    assert ran["root"].pid == ran["mid"].pid == ran["leaf"].pid
    assert expected[junit_key("tests/test_flow.py::test_two_down")] == (
        "skipped", "prerequisite test_after_broken was skipped: test_broken failed "
        "(AssertionError: boom)")
    assert expected[junit_key("tests/test_other.py::test_needs_xfail")][0] == "skipped"
    # The controller recorded the remote run's durations (measured anew: not the same seconds).
    assert (project / ".pytest_cache" / "v" / DURATIONS_KEY).read_text() != recorded, (
        "the remote run's durations were not recorded")
    remote_files = {p.relative_to(home).parts[:2] for p in home.rglob("*")}
    # Only the rsynced copy: no cache, no temp dir, no log of the plugin's.
    assert {parts[0] for parts in remote_files} == {"pyexecnetcache"}
    assert not list(home.rglob(".pytest_cache"))


def other_version(tmp_path: Path) -> dict[str, str]:
    """The environment of a worker machine with another pytest-dagorder installed."""
    other = tmp_path / "other-install"
    shutil.copytree(Path(pytest_dagorder.__file__).parent, other / "pytest_dagorder",
                    ignore=shutil.ignore_patterns("__pycache__"))
    init = other / "pytest_dagorder" / "__init__.py"
    mine = pytest_dagorder.__version__
    source = init.read_text(encoding="utf-8")
    assert f'__version__ = "{mine}"' in source
    init.write_text(source.replace(f'__version__ = "{mine}"', '__version__ = "0.0.0+other"'),
                    encoding="utf-8")
    return dict(os.environ, PYTHONPATH=str(other))


def check_refused(project: Path, proc: subprocess.CompletedProcess[str]) -> None:
    out = proc.stdout + proc.stderr
    assert proc.returncode == 4, out
    assert "INTERNALERROR" not in out
    assert "0.0.0+other" in out and pytest_dagorder.__version__ in out, out
    assert not (project / LOG_NAME).exists(), "a test ran although the versions differ"


def test_version_mismatch_is_a_usage_error(pytester: pytest.Pytester, tmp_path: Path) -> None:
    """A worker machine with another pytest-dagorder: refused, both versions named."""
    project = make_project(pytester)
    tests = project / "tests"
    with socket_server(tmp_path / "remote-home", other_version(tmp_path)) as spec:
        proc = inner_run(project, "-p", "no:cacheprovider", "--dist=load", f"--tx={spec}",
                         f"--rsyncdir={tests}", str(tests))
    check_refused(project, proc)


def test_version_mismatch_on_a_later_worker_is_a_usage_error(
        pytester: pytest.Pytester, tmp_path: Path) -> None:
    project = make_project(pytester)
    # The remote worker collects last, for certain: its plan is not the first
    # one.  It waits until the controller has the popen worker's collection
    # (the controller touches a file then; the server runs on this machine),
    # bounded: a controller that never gets it ends the run all the same.
    collected = project / "pop-collected"
    (project / "tests" / "conftest.py").write_text(
        "import os, time\n"
        "from pathlib import Path\n\n"
        f"COLLECTED = Path({str(collected)!r})\n\n\n"
        "def pytest_xdist_node_collection_finished(node):\n"
        "    if node.gateway.id == 'pop':\n"
        "        COLLECTED.touch()\n\n\n"
        "def pytest_collection_modifyitems(items):\n"
        "    if os.environ.get('PYTEST_XDIST_WORKER') == 'sock':\n"
        "        deadline = time.monotonic() + 60\n"
        "        while not COLLECTED.exists() and time.monotonic() < deadline:\n"
        "            time.sleep(0.05)\n")
    with socket_server(tmp_path / "remote-home", other_version(tmp_path)) as spec:
        proc = inner_run(project, "-p", "no:cacheprovider", *remote_args(project, spec))
    check_refused(project, proc)
    assert collected.exists(), "the popen worker's collection was not the first"
