"""End to end: a catalogue of ways one test leaves state for the next, each
along a dependency edge, and the promise that the default keeps them: the
per-test outcomes under ``-n`` equal the serial ones.

Every pattern is a module of its own (a chain of two or three tests), all
in one inner project beside independent tests that keep the workers busy:
one serial run in a process of its own (the patterns change the
environment, the working directory and ``sys.modules`` of the process they
run in), then runs under ``-n`` whose outcomes must equal it test by test.
The independent tests have recorded durations, longer than the chains',
so that a placement free to split a chain has reasons to.
"""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest
from helpers import junit_key, read_junit
from support.dagtester import DagTester

pytestmark = pytest.mark.dag_modes("own")

HEAD = """\
import os
import sys

import pytest

from pytest_dagorder import depends_on

"""

#: name -> the module body (HEAD is put before each).  Each passes serially.
PATTERNS: dict[str, str] = {
    "module_fixture_first_and_last": """
        @pytest.fixture(scope="module")
        def cart():
            return {}

        def test_add(cart):
            cart["gizmo"] = 2

        @depends_on("test_add")
        def test_price_rules():
            assert 1 + 1 == 2

        @depends_on("test_price_rules")
        def test_checkout(cart):
            assert cart["gizmo"] == 2
    """,
    "module_fixture": """
        @pytest.fixture(scope="module")
        def box():
            return []

        def test_put(box):
            box.append(os.getpid())

        @depends_on("test_put")
        def test_read(box):
            assert box == [os.getpid()]
    """,
    "class_fixture": """
        @pytest.fixture(scope="class")
        def basket():
            return set()

        class TestBasket:
            def test_fill(self, basket):
                basket.add("apple")

            @depends_on("test_fill")
            def test_has(self, basket):
                assert basket == {"apple"}
    """,
    "session_fixture_dict": """
        @pytest.fixture(scope="session")
        def ids():
            return {}

        def test_create(ids):
            ids["user"] = 41

        @depends_on("test_create")
        def test_use(ids):
            assert ids["user"] == 41
    """,
    "function_fixture_returns_module_global": """
        USERS = {}

        @pytest.fixture
        def users():
            return USERS

        def test_signup(users):
            users["ada"] = "x"

        @depends_on("test_signup")
        def test_login(users):
            assert "ada" in users
    """,
    "function_fixture_returns_session_dict": """
        @pytest.fixture(scope="session")
        def registry():
            return {}

        @pytest.fixture
        def accounts(registry):
            return registry.setdefault("accounts", [])

        def test_open(accounts):
            accounts.append("acc-1")

        @depends_on("test_open")
        def test_listed(accounts):
            assert accounts == ["acc-1"]
    """,
    "module_global_item": """
        STATE = {}

        def test_write():
            STATE["token"] = "t"

        @depends_on("test_write")
        def test_read():
            assert STATE["token"] == "t"
    """,
    "global_statement": """
        COUNT = 0

        def test_bump():
            global COUNT
            COUNT += 5

        @depends_on("test_bump")
        def test_seen():
            assert COUNT == 5
    """,
    "class_attribute": """
        class TestOrders:
            placed = []

            def test_place(self):
                type(self).placed.append("o1")

            @depends_on("test_place")
            def test_placed(self):
                assert self.placed == ["o1"]
    """,
    "request_cls_attribute": """
        class TestSession:
            @pytest.fixture
            def login(self, request):
                request.cls.token = "secret"

            def test_login(self, login):
                pass

            @depends_on("test_login")
            def test_token(self):
                assert self.token == "secret"
    """,
    "request_module_attribute": """
        def test_set(request):
            request.module.FOUND = 3

        @depends_on("test_set")
        def test_get():
            assert FOUND == 3  # noqa: F821
    """,
    "function_attribute": """
        def remember():
            pass

        def test_store():
            remember.value = 7

        @depends_on("test_store")
        def test_load():
            assert remember.value == 7
    """,
    "helper_in_another_module": """
        import catalogue_helpers

        def test_register():
            catalogue_helpers.register("widget")

        @depends_on("test_register")
        def test_registered():
            assert catalogue_helpers.registered() == ["widget"]
    """,
    "conftest_global_through_fixture": """
        def test_note(notes):
            notes.append("n1")

        @depends_on("test_note")
        def test_noted(notes):
            assert notes == ["n1"]
    """,
    "closure": """
        def make_counter():
            seen = [0]
            def bump():
                seen[0] += 1
                return seen[0]
            return bump

        bump = make_counter()

        def test_first():
            assert bump() == 1

        @depends_on("test_first")
        def test_second():
            assert bump() == 2
    """,
    "module_level_lambda": """
        SEEN = {}
        keep = lambda key, value: SEEN.__setitem__(key, value)  # noqa: E731

        def test_keep():
            keep("k", 1)

        @depends_on("test_keep")
        def test_kept():
            assert SEEN == {"k": 1}
    """,
    "environ_imported_in_test": """
        def test_export():
            import os as environment
            environment.environ["CATALOGUE_EXPORTED"] = "yes"

        @depends_on("test_export")
        def test_exported():
            import os as environment
            assert environment.environ.get("CATALOGUE_EXPORTED") == "yes"
    """,
    "sys_modules": """
        import types

        def test_install():
            sys.modules["catalogue_fake_plugin"] = types.ModuleType("catalogue_fake_plugin")

        @depends_on("test_install")
        def test_import():
            import catalogue_fake_plugin
            assert catalogue_fake_plugin.__name__ == "catalogue_fake_plugin"
    """,
    "working_directory": """
        import atexit
        import shutil
        import tempfile

        HOME = os.getcwd()

        def test_enter():
            where = tempfile.mkdtemp(prefix="catalogue-cwd-")
            # Gone when the process ends, whichever tests ran after this one.
            atexit.register(shutil.rmtree, where, True)
            os.chdir(where)

        @depends_on("test_enter")
        def test_inside():
            here = os.getcwd()
            os.chdir(HOME)
            assert os.path.basename(here).startswith("catalogue-cwd-")
    """,
    "mkdtemp_session_directory": """
        def test_save(scratch):
            with open(os.path.join(scratch, "report.txt"), "w") as f:
                f.write("done")

        @depends_on("test_save")
        def test_load(scratch):
            with open(os.path.join(scratch, "report.txt")) as f:
                assert f.read() == "done"
    """,
    "sqlite_in_memory": """
        import sqlite3

        DB = sqlite3.connect(":memory:")

        def test_insert():
            DB.execute("create table t (x)")
            DB.execute("insert into t values (1)")

        @depends_on("test_insert")
        def test_count():
            assert DB.execute("select count(*) from t").fetchone() == (1,)
    """,
    "mock_patch_started": """
        import calendar
        from unittest import mock

        def test_patch():
            mock.patch("calendar.isleap", return_value=True).start()

        @depends_on("test_patch")
        def test_patched():
            try:
                assert calendar.isleap(2023)
            finally:
                mock.patch.stopall()
    """,
    "heapq": """
        import heapq

        QUEUE = []

        def test_push():
            heapq.heappush(QUEUE, (2, "job"))

        @depends_on("test_push")
        def test_pop():
            assert heapq.heappop(QUEUE) == (2, "job")
    """,
    "itertools_counter": """
        import itertools

        NEXT_ID = itertools.count()

        def test_first_id():
            assert next(NEXT_ID) == 0

        @depends_on("test_first_id")
        def test_second_id():
            assert next(NEXT_ID) == 1
    """,
    "lru_cache": """
        import functools

        CALLS = []

        @functools.lru_cache(maxsize=None)
        def price(item):
            CALLS.append(item)
            return 3

        def test_warm():
            assert price("a") == 3

        @depends_on("test_warm")
        def test_cached():
            assert price("a") == 3 and price.cache_info().hits == 1
    """,
    "generator": """
        TICKETS = (n for n in range(100))

        def test_take():
            assert next(TICKETS) == 0

        @depends_on("test_take")
        def test_take_next():
            assert next(TICKETS) == 1
    """,
    "request_session_attribute": """
        def test_remember(request):
            request.session.catalogue_user = "ada"

        @depends_on("test_remember")
        def test_recall(request):
            assert request.session.catalogue_user == "ada"
    """,
    "method_on_an_object": """
        class Shop:
            def __init__(self):
                self.products = {}

            def add_product(self, name, price):
                self.products[name] = price

        shop = Shop()

        def test_add():
            shop.add_product("gizmo", 5)

        @depends_on("test_add")
        def test_price():
            assert shop.products["gizmo"] == 5
    """,
    "random_state": """
        import random

        SECOND = random.Random(7)
        SECOND.random()
        EXPECTED = SECOND.random()

        def test_seed():
            random.seed(7)
            random.random()

        @depends_on("test_seed")
        def test_draw():
            assert random.random() == EXPECTED
    """,
    "builtins_attribute": """
        import builtins

        def test_inject():
            builtins.catalogue_flag = True

        @depends_on("test_inject")
        def test_injected():
            assert getattr(builtins, "catalogue_flag", False)
    """,
    "queue": """
        import queue

        INBOX = queue.Queue()

        def test_send():
            INBOX.put("hello")

        @depends_on("test_send")
        def test_receive():
            assert INBOX.get_nowait() == "hello"
    """,
    "logging_handler": """
        import logging

        class Keep(logging.Handler):
            records = []

            def emit(self, record):
                self.records.append(record.getMessage())

        def test_attach():
            logging.getLogger("catalogue").addHandler(Keep())

        @depends_on("test_attach")
        def test_logged():
            logging.getLogger("catalogue").warning("hi")
            assert Keep.records == ["hi"]
    """,
    "three_test_chain_module_global": """
        LOG = []

        def test_a():
            LOG.append("a")

        @depends_on("test_a")
        def test_b():
            LOG.append("b")

        @depends_on("test_b")
        def test_c():
            assert LOG == ["a", "b"]
    """,
    # Across modules: one session fixture instance (conftest.py's ``shop``).
    "cross_module_session_writer": """
        def test_stock(shop):
            shop["gizmo"] = 1
    """,
    "cross_module_session_reader": """
        @depends_on("test_p_cross_module_session_writer.py::test_stock")
        def test_sold_out_listed(shop):
            assert shop["gizmo"] == 1
    """,
    # A chain across three modules: its first and last test use the fixture.
    "cross_module_chain_first": """
        def test_open(ledger):
            ledger.append("opened")
    """,
    "cross_module_chain_middle": """
        @depends_on("test_p_cross_module_chain_first.py::test_open")
        def test_audit():
            assert True
    """,
    "cross_module_chain_last": """
        @depends_on("test_p_cross_module_chain_middle.py::test_audit")
        def test_close(ledger):
            assert ledger == ["opened"]
    """,
    # Across modules, no fixture: the writer's source shows it writes the environment.
    "cross_module_environ_writer": """
        def test_configure():
            os.environ["CATALOGUE_REGION"] = "eu"
    """,
    "cross_module_environ_reader": """
        @depends_on("test_p_cross_module_environ_writer.py::test_configure")
        def test_region():
            assert os.environ.get("CATALOGUE_REGION") == "eu"
    """,
}

CONFTEST = """
import shutil
import tempfile

import pytest

NOTES = []


@pytest.fixture
def notes():
    return NOTES


@pytest.fixture(scope="session")
def scratch():
    where = tempfile.mkdtemp(prefix="catalogue-")
    yield where
    shutil.rmtree(where, ignore_errors=True)


@pytest.fixture(scope="session")
def shop():
    return {}


@pytest.fixture(scope="session")
def ledger():
    return []
"""

HELPERS = """
_SEEN = []


def register(name):
    _SEEN.append(name)


def registered():
    return list(_SEEN)
"""

#: Independent tests beside the chains, each this long (recorded as longer).
BUSY = 8
BUSY_SECONDS = 0.1


#: A package whose package-scoped fixture two of its modules use, along an edge.
PACKAGE = {
    "__init__.py": "",
    "conftest.py": """
import pytest


@pytest.fixture(scope="package")
def crate():
    return []
""",
    "test_pack.py": HEAD + """
def test_pack(crate):
    crate.append("vase")
""",
    "test_unpack.py": HEAD + """
@depends_on("package_fixture/test_pack.py::test_pack")
def test_unpack(crate):
    assert crate == ["vase"]
""",
}


def write_project(root: Path) -> int:
    """The inner project; how many tests it holds."""
    package = root / "package_fixture"
    package.mkdir()
    for name, text in PACKAGE.items():
        (package / name).write_text(text, encoding="utf-8")
    tests = 2
    for name, body in PATTERNS.items():
        text = HEAD + textwrap.dedent(body)
        (root / f"test_p_{name}.py").write_text(text, encoding="utf-8")
        tests += text.count("\ndef test_") + text.count("    def test_")
    (root / "conftest.py").write_text(CONFTEST, encoding="utf-8")
    (root / "catalogue_helpers.py").write_text(HELPERS, encoding="utf-8")
    busy = "import time\n\n" + "".join(
        f"def test_busy{k}():\n    time.sleep({BUSY_SECONDS})\n\n\n" for k in range(BUSY))
    (root / "test_busy.py").write_text(busy, encoding="utf-8")
    # Recorded durations: the busy tests long, the chains short, so a
    # placement that may split a chain fills the workers around it.
    recorded = {f"test_busy.py::test_busy{k}": 1.0 for k in range(BUSY)}
    (root / "durations.json").write_text(json.dumps(recorded), encoding="utf-8")
    return tests + BUSY


def outcomes(pytester: pytest.Pytester, junit: str) -> dict[str, str]:
    cases, _ = read_junit(pytester.path / junit)
    return {key: case.outcome for key, case in cases.items()}


def test_the_catalogue_has_thirty_ways_to_pass_state() -> None:
    # Modules of one cross-module pattern count once; the package fixture is one more.
    ways = {name.rsplit("_", 1)[0] if name.startswith("cross_module") else name
            for name in PATTERNS} | {"package_fixture"}
    assert len(ways) >= 30


def test_every_pattern_gives_its_serial_outcome_under_n(
    pytester: pytest.Pytester, dagtester: DagTester
) -> None:
    dagtester.ini("dag_durations = durations.json\n")
    total = write_project(pytester.path)
    serial = dagtester.run("-p", "no:randomly", "--junitxml=serial.xml",
                           own_process="the patterns change the environment, the working "
                           "directory and sys.modules of the process running them")
    serial.assert_outcomes(passed=total)
    expected = outcomes(pytester, "serial.xml")
    assert len(expected) == total
    assert all(outcome == "passed" for outcome in expected.values())
    # Two runs, on two and on three workers: a split chain fails in either.
    # The run on two workers also explains its groups (--dag-explain only
    # adds lines), as test_e2e_state_categories' run does.
    explained: list[str] = []
    for workers, explain in (("2", ("--dag-explain",)), ("3", ())):
        result = dagtester.run(*explain, "-n", workers, f"--junitxml=n{workers}.xml",
                               timeout=240)
        got = outcomes(pytester, f"n{workers}.xml")
        differ = {key: got.get(key) for key, outcome in expected.items()
                  if got.get(key) != outcome}
        assert not differ, (workers, differ, result.stdout.str()[-3000:])
        result.assert_outcomes(passed=total)
        explained += result.stdout.lines if explain else []
    # The cross-module chains are groups, by their declared edges (what their
    # tests share is said, not decided on), in serial order.
    pytest.LineMatcher(explained).fnmatch_lines([
        "dagorder: group of package_fixture/test_pack.py::test_pack (2 tests): "
        "edges from package_fixture/test_pack.py to package_fixture/test_unpack.py; its "
        "tests share package fixture 'crate' of package_fixture; they run in this order, "
        "on one worker:",
        "dagorder: group of test_p_cross_module_chain_first.py::test_open (3 tests): "
        "edges from * its tests share session fixture 'ledger'; they run in this order*",
        "    test_p_cross_module_chain_first.py::test_open",
        "    test_p_cross_module_chain_middle.py::test_audit",
        "    test_p_cross_module_chain_last.py::test_close",
        "dagorder: group of test_p_cross_module_environ_writer.py::test_configure (2 tests): "
        "edges from test_p_cross_module_environ_writer.py to "
        "test_p_cross_module_environ_reader.py; they run in this order, on one worker:",
        "dagorder: no dependency left free*",
    ], consecutive=False)
    assert junit_key("test_busy.py::test_busy0") in expected


def test_with_affinity_none_a_failure_names_the_worker_of_its_prerequisite(
        pytester: pytest.Pytester, dagtester: DagTester) -> None:
    """``none`` states that nothing is shared: the catalogue's chains split,
    and a test that fails after a prerequisite that ran on another worker
    says so in its report, with the remedy."""
    dagtester.ini("dag_durations = durations.json\n")
    write_project(pytester.path)
    result = dagtester.run("-n", "3", "--dag-affinity=none", timeout=240)
    assert result.parseoutcomes().get("failed", 0) > 0
    result.stdout.fnmatch_lines([
        "*- dagorder -*",
        "prerequisite* test_p_*.py::test_* ran on worker gw*, this test on gw*: if it reads "
        "what they left in the process, drop --dag-affinity=none (the default keeps every "
        "declared edge's tests on one worker)",
    ], consecutive=False)
