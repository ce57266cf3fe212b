"""The plugins a team runs beside this one, each really installed, serially and under ``-n 2``.

One small inner project per plugin (docs/neighbours.rst has the table of
what works, what differs and what is not supported).  The plugins come with
the ``neighbours`` extra (``.ci/run`` installs it into the newest versions'
venv); a test skips, naming the extra, where its plugin is missing.  Autoload
stays off in these inner runs (the root conftest), so each run loads the
plugin it checks by name (``-p``) and no other neighbour.

A run goes into a process of its own where the plugin acts on the whole
process: coverage's tracer, pytest-timeout's alarm signal and ``os._exit``,
Django's settings, pytest-testmon's tracer.
"""

from __future__ import annotations

import importlib.util
import json
import re
import xml.etree.ElementTree as ET

import pytest
from helpers import A_THEN_B, assert_after, forked_workers
from support.dagtester import DagTester

from pytest_dagorder.drivers.distributed.barrier import BARRIER_NAME


def needs(module: str, dist: str) -> pytest.MarkDecorator:
    """Skip unless ``dist`` (imported as ``module``) is installed."""
    return pytest.mark.skipif(
        importlib.util.find_spec(module) is None,
        reason=f"{dist} is not installed (pip install -e '.[neighbours]'; .ci/run installs it)")


def skip_reasons(result: pytest.RunResult) -> list[str]:
    """The reasons of the ``-rs`` lines, sorted."""
    return sorted(line.split(": ", 1)[1] for line in result.outlines
                  if line.startswith("SKIPPED ["))


#: Options of an in-process run that loads a plugin by name: pytest marks its
#: module for assertion rewriting and warns when this process imported a module
#: of that name already (``-p asyncio``: the standard library's).
IN_PROCESS = ("-W", "ignore::pytest.PytestAssertRewriteWarning")


def workers_used(result: pytest.RunResult) -> set[str]:
    """The xdist workers a ``-v`` run's result lines name."""
    return set(re.findall(r"^\[(gw\d+)\]", "\n".join(result.outlines), re.MULTILINE))


# -- pytest-cov ---------------------------------------------------------------------------

COV_LIB = """
def one():
    return 1


def two():
    return 2


def three():
    return 3


def four():
    return 4


def never():
    return 0
"""

COV_CHAIN = """
import lib


def test_a():
    assert lib.one() == 1


@depends_on("test_a")
def test_b():
    assert lib.two() == 2


def test_free():
    assert lib.three() == 3
"""

COV_OTHER = """
import lib


def test_c():
    assert lib.four() == 4


def test_d():
    mark("d", 0.2)
    assert lib.one() == 1
"""


def cov_total(result: pytest.RunResult) -> str:
    """The ``lib.py`` line of a ``--cov-report=term-missing`` report."""
    lines = [line for line in result.outlines if line.startswith("lib.py ")]
    assert len(lines) == 1, result.outlines
    return lines[0]


@needs("pytest_cov", "pytest-cov")
def test_cov_combines_every_worker_and_never_counts_a_barrier(dagtester: DagTester) -> None:
    dagtester.modules(test_chain=COV_CHAIN, test_other=COV_OTHER)
    (dagtester.path / "lib.py").write_text(COV_LIB, encoding="utf-8")
    cov = ("-p", "pytest_cov", "--cov=lib", "--cov-report=term-missing", "--cov-context=test",
           "-v")
    result = dagtester.run(*cov, own_process="coverage's tracer acts on the whole process")
    result.assert_outcomes(passed=5)
    # Every line but never()'s body: the chain's worker and the other one, combined.
    assert cov_total(result).split() == ["lib.py", "10", "1", "90%", "19"]
    if dagtester.xdist:
        assert workers_used(result) == {"gw0", "gw1"}
    # The contexts coverage recorded: the five tests' phases, nothing else.
    import coverage

    data = coverage.CoverageData(basename=str(dagtester.path / ".coverage"))
    data.read()
    tests = {context.rsplit("|", 1)[0] for context in data.measured_contexts() if context}
    assert tests == {"test_chain.py::test_a", "test_chain.py::test_b",
                     "test_chain.py::test_free", "test_other.py::test_c",
                     "test_other.py::test_d"}
    assert not any(BARRIER_NAME in context for context in data.measured_contexts())


@needs("pytest_cov", "pytest-cov")
@pytest.mark.dag_modes("xdist")
def test_cov_figures_equal_plain_xdist_on_a_suite_without_dependencies(
        dagtester: DagTester) -> None:
    dagtester.modules(test_free=COV_OTHER.replace("def test_d", "def test_e"),
                      test_more=COV_OTHER.replace("lib.four() == 4", "lib.two() == 2"))
    (dagtester.path / "lib.py").write_text(COV_LIB, encoding="utf-8")
    cov = ("-p", "pytest_cov", "--cov=lib", "--cov-report=term-missing")
    why = "coverage's tracer acts on the whole process"
    ours = dagtester.run(*cov, "--dag-affinity=none", own_process=why)
    with forked_workers():  # a process of its own, as ``ours`` is
        plain = dagtester.pytester.runpytest_subprocess("-p", "no:cacheprovider", "-p", "xdist",
                                                        "-n", "2", *cov, timeout=120)
    ours.assert_outcomes(passed=4)
    plain.assert_outcomes(passed=4)
    assert cov_total(ours) == cov_total(plain)


# -- pytest-timeout -----------------------------------------------------------------------

TIMEOUT_SUITE = """
def test_slow():
    mark("slow")
    time.sleep(30)


@depends_on("test_slow")
def test_after():
    mark("after")


def test_free():
    mark("free")
"""

LATER = """

@depends_on("test_after")
def test_later():
    mark("later")
"""


@needs("pytest_timeout", "pytest-timeout")
def test_timeout_signal_method_skips_the_dependents_naming_the_timeout(
        dagtester: DagTester) -> None:
    dagtester.modules(test_t=TIMEOUT_SUITE + LATER)
    result = dagtester.run("-p", "timeout", "--timeout=1", "--timeout-method=signal", "-rs",
                           timeout=60, own_process="pytest-timeout's alarm signal")
    result.assert_outcomes(failed=1, passed=1, skipped=2)
    result.stdout.fnmatch_lines(["*Failed: Timeout (>1.0s) from pytest-timeout*",
                                 "test_t.py::test_slow failed: blocked 2 tests"])
    # The failure's first line reaches the dependents' reasons, and theirs.
    assert skip_reasons(result) == [
        "prerequisite test_after was skipped: test_slow failed "
        "(Timeout (>1.0s) from pytest-timeout)",
        "prerequisite test_slow failed (Timeout (>1.0s) from pytest-timeout)"]
    assert sorted(dagtester.ran()) == ["free", "slow"]


#: Beside TIMEOUT_SUITE's test_slow (the ini's limit): one ended by pytest-timeout's
#: thread method through its marker, and one that ends its process itself, long
#: before its limit.
THREAD_TIMEOUTS = """
@pytest.mark.timeout(1, method="thread")
def test_marked():
    mark("marked")
    time.sleep(30)


@depends_on("test_marked")
def test_after_marked():
    mark("after_marked")


@pytest.mark.timeout(60, method="thread")
def test_exits():
    os._exit(3)


@depends_on("test_exits")
def test_after_exit():
    mark("after_exit")
"""

THREAD_LIMIT = ("past its pytest-timeout limit of {} s, whose thread method ends the "
                "process")


@needs("pytest_timeout", "pytest-timeout")
def test_timeout_thread_method_names_the_limit_of_the_crashed_worker(
        dagtester: DagTester) -> None:
    dagtester.modules(test_t=TIMEOUT_SUITE, test_u=THREAD_TIMEOUTS)
    dagtester.ini("timeout = 2\ntimeout_method = thread\n")
    result = dagtester.run("-p", "timeout", "-rs", timeout=120,
                           own_process="pytest-timeout's os._exit")
    if not dagtester.xdist:
        # Serially the thread method ends the whole pytest process (pytest-timeout's
        # own design: os._exit after dumping the stacks): nothing hangs, nothing
        # after it runs.
        assert result.ret == 1
        result.stdout.fnmatch_lines(["*+ Timeout +*"])
        assert sorted(dagtester.ran()) == ["slow"]
        return
    # Under -n it ends a worker; a replacement runs the rest.
    result.assert_outcomes(failed=3, passed=1, skipped=3)
    result.stdout.fnmatch_lines(["*crashed while running 'test_t.py::test_slow'*"])
    assert skip_reasons(result) == [
        "prerequisite test_exits crashed its worker",
        "prerequisite test_marked crashed its worker (" + THREAD_LIMIT.format(1) + ")",
        "prerequisite test_slow crashed its worker (" + THREAD_LIMIT.format(2) + ")"]
    assert sorted(dagtester.ran()) == ["free", "marked", "slow"]


# -- pytest-asyncio -----------------------------------------------------------------------

ASYNC_MODULE = """
import asyncio

import pytest_asyncio

SEEN = []


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def box():
    return []


@pytest.mark.asyncio(loop_scope="module")
async def test_open(box):
    box.append("opened")
    SEEN.append(asyncio.get_running_loop())


@depends_on("test_open")
@pytest.mark.asyncio(loop_scope="module")
async def test_use(box):
    assert box == ["opened"]
    assert asyncio.get_running_loop() is SEEN[0]


@pytest.mark.asyncio
async def test_free():
    await asyncio.sleep(0)
"""

ASYNC_SESSION_FIRST = """
import asyncio

import state


@pytest.mark.asyncio(loop_scope="session")
async def test_start():
    state.LOOPS.append(asyncio.get_running_loop())
"""

ASYNC_SESSION_SECOND = """
import asyncio

import state


@depends_on("test_session_a.py::test_start")
@pytest.mark.asyncio(loop_scope="session")
async def test_continue():
    assert state.LOOPS == [asyncio.get_running_loop()]
"""


@needs("pytest_asyncio", "pytest-asyncio")
def test_asyncio_module_and_session_loops_along_a_chain(dagtester: DagTester) -> None:
    dagtester.ini("asyncio_default_fixture_loop_scope = function\n")
    dagtester.modules(test_module=ASYNC_MODULE, test_session_a=ASYNC_SESSION_FIRST,
                      test_session_b=ASYNC_SESSION_SECOND)
    (dagtester.path / "state.py").write_text("LOOPS = []\n", encoding="utf-8")
    result = dagtester.run(*IN_PROCESS, "-p", "asyncio")
    result.assert_outcomes(passed=5)


# -- pytest-django ------------------------------------------------------------------------

DJANGO_SETTINGS = """
SECRET_KEY = "neighbours"
INSTALLED_APPS = ["django.contrib.auth", "django.contrib.contenttypes"]
DATABASES = {"default": {"ENGINE": "django.db.backends.sqlite3", "NAME": "db.sqlite3",
                         "TEST": {"NAME": "test_db.sqlite3"}}}
USE_TZ = True
"""

DJANGO_CONFTEST = """
import pytest


@pytest.fixture(scope="session")
def django_db_setup(django_db_setup, django_db_blocker):
    # The worker's own test database, with one user every test sees.
    from django.contrib.auth.models import User

    with django_db_blocker.unblock():
        User.objects.create(username="founder")
"""

DJANGO_CHAIN = """
import os

from django.contrib.auth.models import User
from django.db import connection


def test_write(django_db_setup, django_db_blocker):
    # Committed outside any test transaction: it stays in this worker's database.
    with django_db_blocker.unblock():
        User.objects.create(username="alice")
    worker = os.environ.get("PYTEST_XDIST_WORKER")
    name = connection.settings_dict["NAME"]
    assert name.endswith(f"test_db.sqlite3_{worker}" if worker else "test_db.sqlite3"), name


@depends_on("test_write")
@pytest.mark.django_db
def test_read():
    assert User.objects.filter(username="alice").exists()
    assert User.objects.filter(username="founder").exists()
"""

DJANGO_ACROSS = """
from django.contrib.auth.models import User


@depends_on("test_chain.py::test_write")
@pytest.mark.django_db
def test_read_elsewhere():
    assert User.objects.filter(username="alice").exists()
"""


DJANGO_TRANSACTIONAL = """
from django.contrib.auth.models import User


# pytest-django empties every table after a transactional test (the users of
# django_db_setup too): declared to come after the tests that read them.
@depends_on("test_chain.py::test_read", "test_across.py::test_read_elsewhere")
@pytest.mark.django_db(transaction=True)
def test_transactional_write():
    User.objects.create(username="bob")


@depends_on("test_transactional_write")
def test_transactional_read(transactional_db):
    assert not User.objects.filter(username="bob").exists()
"""


@needs("pytest_django", "pytest-django")
def test_django_chains_in_and_across_modules_on_each_workers_database(
        dagtester: DagTester) -> None:
    dagtester.ini("DJANGO_SETTINGS_MODULE = settings\npythonpath = .\n")
    (dagtester.path / "settings.py").write_text(DJANGO_SETTINGS, encoding="utf-8")
    (dagtester.path / "conftest.py").write_text(DJANGO_CONFTEST, encoding="utf-8")
    dagtester.modules(test_chain=DJANGO_CHAIN, test_across=DJANGO_ACROSS,
                      test_transactional=DJANGO_TRANSACTIONAL)
    result = dagtester.run("-p", "django", "-rs", own_process="Django's settings are global")
    result.assert_outcomes(passed=5)


# -- pytest-randomly ----------------------------------------------------------------------

RANDOMLY_A = """
def test_a():
    mark("a")


@depends_on("test_a")
def test_b():
    mark("b")


@depends_on("test_b")
def test_c():
    mark("c")


def test_d():
    mark("d")


def test_e():
    mark("e")


def test_f():
    mark("f")
"""

RANDOMLY_Z = """
@depends_on("test_randomly_a.py::test_c")
def test_x():
    mark("x")


def test_y():
    mark("y")


@depends_on("test_y")
def test_w():
    mark("w")
"""

RANDOMLY_EDGES = [("a", "b"), ("b", "c"), ("c", "x"), ("y", "w")]


def order_of(dagtester: DagTester) -> list[str]:
    ran = dagtester.ran()
    return sorted(ran, key=lambda name: ran[name].start)


@needs("pytest_randomly", "pytest-randomly")
def test_randomly_shuffles_within_the_graph_reproducibly(dagtester: DagTester) -> None:
    dagtester.modules(test_randomly_a=RANDOMLY_A, test_randomly_z=RANDOMLY_Z)
    orders = []
    # The seed repeated checks that it gives the same order, which is checked
    # serially only: under xdist its run would repeat the first one's checks.
    seeds = ("1", "2", "3") if dagtester.xdist else ("1", "2", "3", "1")
    for seed in seeds:
        result = dagtester.run(*IN_PROCESS, "-p", "randomly", f"--randomly-seed={seed}")
        result.assert_outcomes(passed=9)
        result.stdout.fnmatch_lines([f"Using --randomly-seed={seed}"])
        assert_after(dagtester.ran(), RANDOMLY_EDGES)
        orders.append(order_of(dagtester))
    if not dagtester.xdist:
        # Shuffled, and the same seed gives the same order.
        assert len({tuple(order) for order in orders}) > 1
        assert orders[0] == orders[3]


# -- pytest-html and --junitxml ------------------------------------------------------------

REPORTED = """
def test_a():
    mark("a")


@depends_on("test_a")
def test_b():
    mark("b")


def test_broken():
    assert 0


@depends_on("test_broken")
def test_blocked():
    mark("blocked")


def test_free():
    mark("free")
"""


@needs("pytest_html", "pytest-html")
def test_html_and_junitxml_report_each_test_once(dagtester: DagTester) -> None:
    dagtester.modules(test_r=REPORTED)
    result = dagtester.run(*IN_PROCESS, "-p", "metadata", "-p", "html", "--html=report.html",
                           "--self-contained-html", "--junitxml=out.xml")
    result.assert_outcomes(passed=3, failed=1, skipped=1)
    cases = list(ET.parse(dagtester.path / "out.xml").getroot().iter("testcase"))
    assert sorted(case.get("name", "") for case in cases) == [
        "test_a", "test_b", "test_blocked", "test_broken", "test_free"]
    html = (dagtester.path / "report.html").read_text(encoding="utf-8")
    blob = re.search(r'data-jsonblob="([^"]*)"', html)
    assert blob is not None
    tests = json.loads(blob.group(1).replace("&#34;", '"').replace("&amp;", "&"))["tests"]
    assert {nodeid: [entry["result"] for entry in entries] for nodeid, entries in tests.items()
            } == {"test_r.py::test_a": ["Passed"], "test_r.py::test_b": ["Passed"],
                  "test_r.py::test_broken": ["Failed"], "test_r.py::test_blocked": ["Skipped"],
                  "test_r.py::test_free": ["Passed"]}
    assert BARRIER_NAME not in html


# -- pytest-benchmark ---------------------------------------------------------------------

BENCHMARKED = """
def test_bench(benchmark):
    assert benchmark(sum, [1, 2, 3]) == 6


@depends_on("test_bench")
def test_after():
    mark("after")
"""


@needs("pytest_benchmark", "pytest_benchmark")
def test_benchmark_under_its_own_xdist_rules(dagtester: DagTester) -> None:
    dagtester.modules(test_b=BENCHMARKED)
    # pytest-benchmark's rule: under xdist the benchmark runs its function
    # once, unmeasured, and warns (as without this plugin).
    quiet = ("-W", "ignore:Benchmarks are automatically disabled") if dagtester.xdist else ()
    result = dagtester.run(*IN_PROCESS, *quiet, "-p", "benchmark", "--benchmark-columns=min")
    result.assert_outcomes(passed=2)
    table = any("benchmark: 1 tests" in line for line in result.outlines)
    assert table != dagtester.xdist


# -- pytest-bdd ---------------------------------------------------------------------------

FEATURE = """\
Feature: Accounts
    Scenario: Open an account
        Given a bank
        When an account is opened
        Then the bank has 1 account

    Scenario: Deposit
        Given a bank
        When 10 is deposited
        Then the balance is 10
"""

BDD_STEPS = """
from pytest_bdd import given, parsers, scenario, then, when

BANK = {}


@scenario("accounts.feature", "Open an account")
def test_open():
    pass


@depends_on("test_open")
@scenario("accounts.feature", "Deposit")
def test_deposit():
    pass


@given("a bank", target_fixture="bank")
def bank():
    return BANK


@when("an account is opened")
def open_account(bank):
    bank["alice"] = 0


@when(parsers.parse("{amount:d} is deposited"))
def deposit(bank, amount):
    bank["alice"] += amount


@then("the bank has 1 account")
def one_account(bank):
    assert len(bank) == 1


@then(parsers.parse("the balance is {amount:d}"))
def balance(bank, amount):
    assert bank["alice"] == amount
"""


@needs("pytest_bdd", "pytest-bdd")
def test_bdd_scenario_depends_on_a_scenario(dagtester: DagTester) -> None:
    (dagtester.path / "accounts.feature").write_text(FEATURE, encoding="utf-8")
    # Its first scenario fails (no account to deposit into).
    (dagtester.path / "broken.feature").write_text(
        FEATURE.replace("When an account is opened", "When 10 is deposited"), encoding="utf-8")
    dagtester.modules(test_accounts=BDD_STEPS, test_broken=BDD_STEPS.replace(
        "accounts.feature", "broken.feature"))
    result = dagtester.run(*IN_PROCESS, "-p", "pytest-bdd", "-rs")
    result.assert_outcomes(passed=2, failed=1, skipped=1)
    # The deposit on the broken feature is skipped, never run on an empty bank.
    assert skip_reasons(result) == [
        "prerequisite test_broken.py::test_open failed (KeyError: 'alice')"]


# -- pytest-mock --------------------------------------------------------------------------

MOCKED = """
import json


def test_patched(mocker):
    spy = mocker.patch("json.dumps", return_value="patched")
    assert json.dumps(1) == "patched"
    spy.assert_called_once_with(1)


@depends_on("test_patched")
def test_restored_after(mocker):
    # The prerequisite's patch ended with its teardown, on this worker too.
    assert json.dumps(1) == "1"
    stub = mocker.stub()
    stub("x")
    stub.assert_called_once_with("x")
"""


@needs("pytest_mock", "pytest-mock")
def test_mock_patches_end_with_their_test(dagtester: DagTester) -> None:
    dagtester.modules(test_m=MOCKED)
    dagtester.run(*IN_PROCESS, "-p", "pytest_mock").assert_outcomes(passed=2)


# -- pytest-env ---------------------------------------------------------------------------

ENVIRONMENT = """
def test_first():
    assert os.environ["DAGORDER_NEIGHBOUR"] == "on"


@depends_on("test_first")
def test_second():
    assert os.environ["DAGORDER_NEIGHBOUR"] == "on"
"""


@needs("pytest_env", "pytest-env")
def test_env_reaches_every_worker(dagtester: DagTester,
                                  monkeypatch: pytest.MonkeyPatch) -> None:
    # pytest-env sets this process' environment (the run is in-process): the
    # variable is set first so that this test's end restores it.
    monkeypatch.setenv("DAGORDER_NEIGHBOUR", "off")
    dagtester.ini("env =\n    DAGORDER_NEIGHBOUR=on\n")
    dagtester.modules(test_e=ENVIRONMENT)
    dagtester.run(*IN_PROCESS, "-p", "env").assert_outcomes(passed=2)


# -- pytest-sugar -------------------------------------------------------------------------


@needs("pytest_sugar", "pytest-sugar")
def test_sugar_progress_counts_each_test_once(dagtester: DagTester) -> None:
    dagtester.modules(test_r=REPORTED)
    result = dagtester.run(*IN_PROCESS, "-p", "sugar", "--force-sugar", "-rs")
    text = "\n".join(result.outlines)
    assert BARRIER_NAME not in text
    result.stdout.fnmatch_lines(["*Results (*", "*3 passed*", "*1 failed*", "*1 skipped*"])
    assert "prerequisite test_broken failed" in text
    assert result.ret == 1


# -- pytest-testmon -----------------------------------------------------------------------

TESTMON_LIB = "def value():\n    return 1\n"

TESTMON_SUITE = """
import lib


def test_setup():
    mark("setup")


@depends_on("test_setup")
def test_uses_lib():
    mark("uses_lib")
    assert lib.value() == 1


def test_other():
    mark("other")
"""


TESTMON_MORE = """
def test_m1():
    mark("m1")


def test_m2():
    mark("m2")
"""


@needs("testmon", "pytest-testmon")
def test_testmon_records_every_test_and_selects_with_prerequisites(
        dagtester: DagTester) -> None:
    dagtester.modules(test_tm=TESTMON_SUITE, test_more=TESTMON_MORE)
    lib = dagtester.path / "lib.py"
    lib.write_text(TESTMON_LIB, encoding="utf-8")
    why = "pytest-testmon's tracer acts on the whole process"
    testmon = ("-p", "pytest-testmon", "--testmon", "-rs", "-v")
    result = dagtester.run(*testmon, cache=True, own_process=why)
    if dagtester.xdist and "Different tests were collected between" in result.stdout.str():
        # One worker collected none of the tests under pytest-testmon while the
        # other collected all five: seen once in .ci/run on a loaded machine
        # (testmon's new database, its worker-side selection), not in 14 runs
        # here, and in no other xdist test (none loads testmon).  The recording
        # run once more, from a new database; a failure of this plugin's own
        # fails both runs.
        for data in dagtester.path.glob(".testmondata*"):
            data.unlink()
        result = dagtester.run(*testmon, cache=True, own_process=why)
    result.assert_outcomes(passed=5)
    if dagtester.xdist:
        assert workers_used(result) == {"gw0", "gw1"}
    # Only test_uses_lib rests on lib.py: testmon selects it alone, and its
    # prerequisite comes back as with --dag-with-prerequisites (skipped, the
    # dependent would be recorded as tested and never selected again).  A test
    # the first run left unrecorded (a worker's last batch) would be selected
    # too, as new.
    lib.write_text(TESTMON_LIB.replace("1", "2 - 1"), encoding="utf-8")
    result = dagtester.run(*testmon, cache=True, own_process=why)
    assert result.parseoutcomes()["passed"] == 2
    assert sorted(dagtester.ran()) == ["setup", "uses_lib"]
    # ... and both are recorded again: the next run selects nothing.
    dagtester.run(*testmon, cache=True, own_process=why)
    assert dagtester.ran() == {}


# -- a plugin reading xdist's options early (pytest-cov does) -------------------------------

EARLY_READER = """
import json
import os


def pytest_load_initial_conftests(early_config):
    known = early_config.known_args_namespace
    if os.environ.get("PYTEST_XDIST_WORKER"):
        return  # the controller's is the one checked
    with open("early.json", "w") as f:
        json.dump(getattr(known, "numprocesses", "missing"), f)
"""


@pytest.mark.dag_modes("xdist")
def test_xdist_options_reach_early_readers_with_autoload_off(
        dagtester: DagTester, monkeypatch: pytest.MonkeyPatch) -> None:
    # -p dagorder brings xdist where autoload is off: its -n must be known to
    # the other plugins' pytest_load_initial_conftests too, whatever the -p order.
    (dagtester.path / "early.py").write_text(EARLY_READER, encoding="utf-8")
    monkeypatch.setenv("PYTHONPATH", str(dagtester.path))
    dagtester.modules(test_e=A_THEN_B)
    for first, second in (("dagorder", "early"), ("early", "dagorder")):
        result = dagtester.run("-p", first, "-p", second,
                               own_process="early.py is found through PYTHONPATH")
        result.assert_outcomes(passed=2)
        assert json.loads((dagtester.path / "early.json").read_text(encoding="utf-8")) == 2
