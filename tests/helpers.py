"""Shared test helpers, mostly for the end-to-end tests (tests/test_e2e_*.py).

Inner projects record what ran into a log file whose absolute path is baked
into the generated sources (so it works on xdist workers and from any cwd):
one line per executed test body, ``name pid start end``.
"""

from __future__ import annotations

import atexit
import contextlib
import faulthandler
import importlib
import importlib.util
import json
import os
import pkgutil
import subprocess
import sys
import tempfile
import textwrap
import warnings
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from support.zygote import FRESH_ENV, Zygote

LOG_NAME = "ran.log"


#: The entry point of hypothesis' pytest plugin.  No inner project uses
#: hypothesis, and importing it is most of what starting an inner run that
#: loads every installed plugin costs (controller and each worker).
HYPOTHESIS_PLUGIN = "hypothesispytest"


#: The entry points of the plugins of the ``neighbours`` extra (pytest-benchmark
#: apart: :func:`base_args` blocks it in every inner run).  Several act merely by
#: being installed (pytest-randomly shuffles, pytest-sugar rewrites the output,
#: pytest-asyncio warns, an error under ``filterwarnings = error``): an inner run
#: that loads every installed plugin blocks them all, as pyproject's ``addopts``
#: blocks those that would act in this suite's own run; tests/test_neighbours.py
#: loads each by name.
NEIGHBOURS = ("randomly", "sugar", "asyncio", "django", "env", "pytest-testmon", "timeout",
              "pytest_cov", "html", "html_fixtures", "metadata", "pytest-bdd", "pytest_mock")


def base_args(*, cache: bool = False) -> list[str]:
    """Options every inner run gets: no cache (unless ``cache``); no pytest-benchmark
    where it exists; the plugin by name where plugin autoload is off (the root
    conftest turns it off for tests not marked ``autoload``), and otherwise
    every installed plugin but hypothesis' (:data:`HYPOTHESIS_PLUGIN`) and the
    neighbours' (:data:`NEIGHBOURS`)."""
    args = [] if cache else ["-p", "no:cacheprovider"]
    if os.environ.get("PYTEST_DISABLE_PLUGIN_AUTOLOAD"):
        args += ["-p", "dagorder"]
    else:
        args += ["-p", f"no:{HYPOTHESIS_PLUGIN}"]
        for name in NEIGHBOURS:
            args += ["-p", f"no:{name}"]
    if importlib.util.find_spec("pytest_benchmark") is not None:
        args += ["-p", "no:benchmark"]
    return args


#: Options that start xdist workers.
XDIST_OPTIONS = ("-n", "--numprocesses", "--dist", "-d", "--tx", "--maxprocesses")


def uses_xdist(args: tuple[str, ...]) -> bool:
    """Whether these inner-run options start xdist workers."""
    for arg in args:
        name = arg.split("=", 1)[0]
        if name in XDIST_OPTIONS or (name.startswith("-n") and name[2:].isdigit()):
            return True
    return False


#: Names a descriptor of this process' stderr as it was before output
#: capturing (the root conftest sets it): where a hung in-process run's
#: tracebacks go, so that they reach the terminal.
HANG_REPORT_FD = "DAGORDER_SUITE_HANG_REPORT_FD"


#: Options of every in-process inner run.  An inner session's own
#: unraisable-exception plugin collects garbage when it ends (pytest 8.4.0:
#: five full collections of this whole process, hypothesis' data included,
#: for each inner run, most of what the suite's lowest-versions pass spent
#: beyond the newest's); without it, this session's hook, which stays
#: installed, reports an unraisable exception of the inner run in the test
#: that started it.
IN_PROCESS_ARGS = ("-p", "no:unraisableexception")


#: Options of an in-process inner run that loads every installed plugin.
#: pytest marks the modules of each plugin it loads by entry point for
#: assertion rewriting, and warns when one was imported already, which in
#: this process every one was (by the outer session).
AUTOLOAD_IN_PROCESS_ARGS = ("-W", "ignore::pytest.PytestAssertRewriteWarning")


@contextlib.contextmanager
def fresh_warning_filters() -> Iterator[None]:
    """The warning filters a new interpreter starts with (CPython's defaults),
    for the block's duration: an in-process inner session applies its own
    filters on top of the ones it finds, and would otherwise find this test's
    (``filterwarnings = error``), where a subprocess run finds the defaults."""
    with warnings.catch_warnings():
        warnings.resetwarnings()
        for category in (DeprecationWarning, PendingDeprecationWarning, ImportWarning,
                         ResourceWarning):
            warnings.simplefilter("ignore", category)
        warnings.filterwarnings("default", category=DeprecationWarning, module="__main__")
        yield


@contextlib.contextmanager
def bounded(timeout: float) -> Iterator[None]:
    """Bound an in-process inner run: past ``timeout`` seconds faulthandler writes
    every thread's traceback to the real stderr and ends this process (under
    ``-n``, xdist reports the worker crashed in this test) instead of hanging.

    pytest's faulthandler plugin arms its own timer only when
    ``faulthandler_timeout`` is set, which neither this suite nor an inner
    project sets; a timer of an enclosing caller is not restored.
    """
    fd = os.environ.get(HANG_REPORT_FD)
    out = int(fd) if fd else sys.__stderr__
    faulthandler.dump_traceback_later(timeout, exit=True, file=out)
    try:
        yield
    finally:
        faulthandler.cancel_dump_traceback_later()


def runpytest(pytester: pytest.Pytester, *args: str, timeout: float = 180.0,
              own_process: str = "") -> pytest.RunResult:
    """An inner pytest run, in this process unless the test gives a reason
    (``own_process``) for a fresh interpreter.

    An in-process run (``pytester.runpytest_inprocess``) saves an interpreter
    start and the imports of pytest, xdist, the plugin and (marked
    ``autoload``) every installed plugin, but shares this process: imported
    modules stay imported (pytester restores ``sys.modules`` and ``sys.path``
    after the run), and module-level state is shared with the outer run.
    Plugins loaded by entry point are registered with the inner run's own
    plugin manager as in a new process, so a takeover of installed plugins
    is tested in-process too.  Where sharing the process would change what a
    test checks, it names why (it patches the plugin's modules from a
    conftest.py, reads import side effects, checks that a marker is unknown:
    ``pytest.mark`` remembers every marker any run of the process registered,
    reads what the controller writes to its stderr, ends processes ...).

    xdist options are no reason: as in pytest-xdist's own suite, the
    controller runs in this process and execnet starts the workers as
    processes (they inherit the run's directory as their cwd).

    The interpreters an in-process run starts as ``sys.executable`` (xdist's
    workers, the finder's probes), and a run in a process of its own, are
    forks of this process' fork server (:func:`forked_workers`), unless the
    test is marked ``versions``, or ``DAGORDER_SUITE_FRESH_WORKERS`` is set:
    then fresh interpreters.

    ``timeout`` bounds the run either way (in-process: :func:`bounded`).
    In-process the run's directory is put on ``sys.path`` first, as
    ``python -m pytest`` there would, and the run starts from a new
    interpreter's warning filters (:func:`fresh_warning_filters`).
    """
    if own_process:
        with forked_workers():
            return pytester.runpytest_subprocess(*args, timeout=timeout)
    args = (*IN_PROCESS_ARGS, *args)
    if not os.environ.get("PYTEST_DISABLE_PLUGIN_AUTOLOAD"):
        args = (*AUTOLOAD_IN_PROCESS_ARGS, *args)
    if not uses_xdist(args):
        with bounded(timeout), fresh_warning_filters(), forked_workers():
            return pytester.runpytest_inprocess(*args, syspathinsert=True)
    with bounded(timeout), fresh_warning_filters(), descriptor_stderr() as written, \
            forked_workers():
        result = pytester.runpytest_inprocess(*args, syspathinsert=True)
    return pytest.RunResult(result.ret, result.outlines, result.errlines + written,
                            result.duration)


#: Why this test's inner runs start fresh worker interpreters ("": none does);
#: tests/conftest.py sets it for the tests marked ``versions``.
fresh_workers = ""
#: This process' fork server, once started (None: not yet; False: it failed).
_zygote: Zygote | bool | None = None


@contextlib.contextmanager
def forked_workers() -> Iterator[None]:
    """For the block's duration, an interpreter started as ``sys.executable``
    (execnet's popen worker, ``-u -c BOOTSTRAP``; the finder's probe or
    pytester's run in a subprocess, ``-m pytest ...``) is a fork of this
    process' fork server (``support/zygote.py``: pytest, its default plugins
    and execnet imported once; what a fork sees, and what differs from a fresh
    interpreter and why the tests do not depend on it, is told there):
    ``sys.executable`` names the server's launcher.

    Fresh interpreters instead: for a test marked ``versions`` (the lowest
    versions' pass checks end to end what a new process does), when
    ``DAGORDER_SUITE_FRESH_WORKERS`` is set to a non-empty value, and once the
    server failed to start or died (the launcher also starts a fresh
    interpreter whenever the server does not answer).  The server starts with
    the first run that uses it and ends with this process.
    """
    global _zygote
    if fresh_workers or os.environ.get(FRESH_ENV) or _zygote is False:
        yield
        return
    if _zygote is None:
        try:
            _zygote = Zygote()
        except (OSError, RuntimeError):
            _zygote = False
            yield
            return
        atexit.register(_zygote.close)
    assert isinstance(_zygote, Zygote)
    if not _zygote.alive:
        _zygote = False
        yield
        return
    saved = sys.executable
    sys.executable = _zygote.launcher
    try:
        yield
    finally:
        sys.executable = saved


def import_the_plugin() -> None:
    """Every module of the plugin, imported in this process before any test
    (tests/conftest.py calls it), so before any ``pytester`` takes its snapshot.

    Pytester drops the modules a run imported when it ends, but a package that
    stays imported keeps its submodule as an attribute: a later run would then
    hold two copies of one module, one through ``from package import module``
    and one freshly imported, each with its own globals (a ``StashKey`` set
    through one and read through the other is not found).  Imported here, before
    any ``pytester``, they are part of what it keeps, and no run imports them again.
    """
    import pytest_dagorder

    for found in pkgutil.walk_packages(pytest_dagorder.__path__, "pytest_dagorder."):
        importlib.import_module(found.name)


@contextlib.contextmanager
def descriptor_stderr() -> Iterator[list[str]]:
    """The lines written to file descriptor 2 while the block runs.

    In-process pytester captures ``sys.stderr`` only; the workers of an
    in-process xdist controller inherit descriptor 2 and write there what a
    subprocess run would show in its stderr (a worker's crash, a traceback
    execnet prints): they join the run's stderr so checks for them still see it.
    """
    lines: list[str] = []
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile() as sink:
        os.dup2(sink.fileno(), 2)
        try:
            yield lines
        finally:
            sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)
            sink.seek(0)
            lines += sink.read().decode("utf-8", "replace").splitlines()


def write_ini(pytester: pytest.Pytester, extra: str = "") -> None:
    """Inner ini: warnings are errors, so leaks of the plugin show up as failures."""
    pytester.makeini("[pytest]\nfilterwarnings =\n    error\n" + textwrap.dedent(extra))


def prelude(pytester: pytest.Pytester) -> str:
    """Source put at the top of every inner test module: imports and ``mark``."""
    log = str(pytester.path / LOG_NAME)
    return textwrap.dedent(
        f"""\
        import os
        import time

        import pytest

        from pytest_dagorder import depends_on, run_after

        LOG = {log!r}


        def mark(name, sleep=0.0):
            start = time.time()
            if sleep:
                time.sleep(sleep)
            with open(LOG, "a") as f:
                f.write(f"{{name}} {{os.getpid()}} {{start!r}} {{time.time()!r}}\\n")

        """
    )


def make_modules(pytester: pytest.Pytester, **modules: str) -> None:
    """Write test modules (name -> body), each prefixed with :func:`prelude`.

    A name may contain ``__`` for a directory separator (``sub__test_x``).
    """
    head = prelude(pytester)
    for name, body in modules.items():
        path = pytester.path / (name.replace("__", "/") + ".py")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(head + textwrap.dedent(body), encoding="utf-8")


@dataclass(frozen=True)
class Ran:
    name: str
    pid: int
    start: float
    end: float


def read_log(pytester: pytest.Pytester) -> dict[str, Ran]:
    """Every test body that ran, by the name it recorded (empty if none ran)."""
    path = pytester.path / LOG_NAME
    if not path.exists():
        return {}
    out: dict[str, Ran] = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        name, pid, start, end = line.split()
        assert name not in out, f"{name} ran twice"
        out[name] = Ran(name, int(pid), float(start), float(end))
    return out


#: A module body: test_b depends on test_a.
A_THEN_B = """
    def test_a():
        mark("a")


    @depends_on("test_a")
    def test_b():
        mark("b")
"""


def free_tests(n: int, seconds: float = 0.05) -> str:
    """A module body of ``n`` independent tests ``test_free0 ..`` recording ``free0 ..``."""
    return "\n".join(f"def test_free{k}():\n    mark('free{k}', {seconds})\n\n" for k in range(n))


def assert_after(ran: dict[str, Ran], edges: list[tuple[str, str]]) -> None:
    """Each (prerequisite, dependent): the dependent started after the prerequisite ended."""
    for pre, dep in edges:
        assert pre in ran and dep in ran, (pre, dep, sorted(ran))
        assert ran[dep].start >= ran[pre].end, f"{dep} started before {pre} ended"


def junit_key(nodeid: str) -> str:
    """The ``classname::name`` junitxml gives a node id (``a/t.py::C::f`` -> ``a.t.C::f``)."""
    parts = nodeid.split("::")
    module = parts[0].removesuffix(".py").replace("/", ".")
    return ".".join([module, *parts[1:-1]]) + "::" + parts[-1]


@dataclass(frozen=True)
class JunitCase:
    outcome: str  # passed, failed, error, skipped
    message: str


def read_junit(path: Path) -> tuple[dict[str, JunitCase], int]:
    """Testcases by :func:`junit_key`, and how many testcase elements there were."""
    root = ET.parse(path).getroot()
    cases = list(root.iter("testcase"))
    out: dict[str, JunitCase] = {}
    for case in cases:
        key = f"{case.get('classname')}::{case.get('name')}"
        outcome, message = "passed", ""
        for kind in ("failure", "error", "skipped"):
            child = case.find(kind)
            if child is not None:
                outcome = {"failure": "failed"}.get(kind, kind)
                message = child.get("message", "")
                break
        out[key] = JunitCase(outcome, message)
    return out, len(cases)


#: The JUnit XML file a run given ``--junitxml=out.xml`` writes
#: (``DagTester.outcomes`` reads it).
JUNIT_NAME = "out.xml"


def outputs_under_hash_seeds(script: str) -> list[Any]:
    """What a Python script prints as JSON, run once under each of three hash seeds.

    For checking that results never depend on hash or set order.
    """
    root = str(Path(__file__).resolve().parent.parent)
    outputs = []
    for seed in ("1", "2", "12345"):
        env = {**os.environ, "PYTHONHASHSEED": seed, "PYTHONPATH": root}
        proc = subprocess.run([sys.executable, "-c", script], env=env,
                              capture_output=True, text=True, check=True, timeout=60)
        outputs.append(json.loads(proc.stdout))
    return outputs
