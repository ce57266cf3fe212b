"""End to end: more categories of state passing along a declared edge, beside
the patterns of ``test_e2e_state_catalogue.py``, and the same promise: what
passes serially gives the same per-test outcomes under ``-n``.

Each category has one or a few representative cases, each in modules of its
own so that no case is kept by what its neighbour's source shows: fixtures
overridden in a subdirectory or taken through ``usefixtures``, state kept on
``request.config`` and ``request.session``, state changed by a library call
rather than an assignment, a chain through a third module, an edge out of a
doctest item, the environment written by a conftest.py fixture, and a module
fixture whose teardown commits what another module reads.  The machinery is
the catalogue's: one serial run in a process of its own, then runs on two
and three workers beside independent tests with recorded durations,
compared test by test.  Where a placement free to split a case puts its two
tests on one worker is a matter of timing: each case fails in some runs of
a placement that may split it, not in every one.

A module whose tests declare only some of the tests whose edits they rely
on (shaped like photoidx's ``test_03_photoidx.py``, with pytest-dependency's
markers) passes serially in collection order only: under ``-n`` its group
must run in that order too.

A last test states what pytest-order's ordinals promise in dispatch: a test
marked ``order(-1)`` (whenever's ``test_tz_cache_adjustments`` "modifies the
tz cache which can affect other tests") is handed out after every other.
"""

from __future__ import annotations

import importlib.util
import json
import re
import textwrap
from pathlib import Path

import pytest
from helpers import free_tests, read_junit
from support.dagtester import DagTester

pytestmark = pytest.mark.dag_modes("own")

HEAD = """\
import os
import sys
import time

import pytest

from pytest_dagorder import depends_on, run_after

"""

#: The inner project's root conftest.py: fixtures the cases share.
CONFTEST = """
import os

import pytest


@pytest.fixture(scope="session")
def shop():
    return {}


@pytest.fixture(scope="session")
def accounts():
    return {}


@pytest.fixture(scope="session")
def login(accounts):
    accounts["token"] = "t-1"
    return "t-1"


@pytest.fixture
def region():
    os.environ["CATALOGUE_ZONE"] = "eu"
    return "eu"
"""

#: category -> {path: source}; a module named ``test_*.py`` gets HEAD first.
#: Every case passes serially.  Cases of one category are in modules of their
#: own: one module's source must not keep another case's edge.
CATEGORIES: dict[str, dict[str, str]] = {
    # A session fixture overridden in a subdirectory (``def shop(shop)``).
    "fixture_override": {
        "override/conftest.py": """
            import pytest


            @pytest.fixture
            def shop(shop):
                return shop
        """,
        "override/test_c_override_1_stock.py": """
            def test_stock(shop):
                shop["gizmo"] = 1
        """,
        "override/test_c_override_2_sell.py": """
            @depends_on("override/test_c_override_1_stock.py::test_stock")
            def test_sell(shop):
                assert shop["gizmo"] == 1
        """,
    },
    # The writer takes the session fixture through usefixtures, not an argument.
    "usefixtures": {
        "test_c_usefixtures_1_login.py": """
            @pytest.mark.usefixtures("login")
            def test_log_in():
                pass
        """,
        "test_c_usefixtures_2_token.py": """
            @depends_on("test_c_usefixtures_1_login.py::test_log_in")
            def test_token(accounts):
                assert accounts.get("token") == "t-1"
        """,
    },
    "config_attribute": {
        "test_c_config_1_set.py": """
            def test_remember(request):
                request.config.catalogue_user = "ada"
        """,
        "test_c_config_2_get.py": """
            @depends_on("test_c_config_1_set.py::test_remember")
            def test_recall(request):
                assert getattr(request.config, "catalogue_user", None) == "ada"
        """,
    },
    "config_stash": {
        "catalogue_keys.py": """
            import pytest

            USER = pytest.StashKey[str]()
        """,
        "test_c_stash_1_set.py": """
            import catalogue_keys

            def test_stash(request):
                request.config.stash[catalogue_keys.USER] = "ada"
        """,
        "test_c_stash_2_get.py": """
            import catalogue_keys

            @depends_on("test_c_stash_1_set.py::test_stash")
            def test_stashed(request):
                assert request.config.stash.get(catalogue_keys.USER, None) == "ada"
        """,
    },
    "config_pluginmanager": {
        "test_c_pluginmanager_1_register.py": """
            class CataloguePlugin:
                pass  # hashable, as pluggy 1.5 needs of a plugin object

            def test_register(request):
                request.config.pluginmanager.register(CataloguePlugin(), "catalogue-plugin")
        """,
        "test_c_pluginmanager_2_lookup.py": """
            @depends_on("test_c_pluginmanager_1_register.py::test_register")
            def test_registered(request):
                assert request.config.pluginmanager.has_plugin("catalogue-plugin")
        """,
    },
    "session_attribute": {
        "test_c_session_1_set.py": """
            def test_cart(request):
                request.session.catalogue_cart = ["gizmo"]
        """,
        "test_c_session_2_get.py": """
            @depends_on("test_c_session_1_set.py::test_cart")
            def test_cart_kept(request):
                assert getattr(request.session, "catalogue_cart", None) == ["gizmo"]
        """,
    },
    # State changed by a library call, not an assignment.
    "library_logging_level": {
        "test_c_logging_1_set.py": """
            import logging

            def test_verbose():
                logging.getLogger("catalogue.audit").setLevel(logging.DEBUG)
        """,
        "test_c_logging_2_get.py": """
            import logging

            @depends_on("test_c_logging_1_set.py::test_verbose")
            def test_is_verbose():
                assert logging.getLogger("catalogue.audit").level == logging.DEBUG
        """,
    },
    "library_warnings_filter": {
        "test_c_warnings_1_set.py": """
            import warnings

            def test_strict():
                warnings.filterwarnings("error", message="catalogue")
        """,
        "test_c_warnings_2_get.py": """
            import warnings

            @depends_on("test_c_warnings_1_set.py::test_strict")
            def test_is_strict():
                with pytest.raises(UserWarning):
                    warnings.warn("catalogue: an old call", UserWarning)
        """,
    },
    "library_random_seed": {
        "test_c_random_1_seed.py": """
            import random

            def test_seed():
                random.seed(7)
        """,
        "test_c_random_2_draw.py": """
            import random

            EXPECTED = random.Random(7).random()

            @depends_on("test_c_random_1_seed.py::test_seed")
            def test_draw():
                assert random.random() == EXPECTED
        """,
    },
    "library_importlib_reload": {
        "catalogue_mode.py": """
            import os

            MODE = os.environ.get("CATALOGUE_MODE", "production")
        """,
        "test_c_reload_1_switch.py": """
            import importlib

            import catalogue_mode

            def test_switch(monkeypatch):
                monkeypatch.setenv("CATALOGUE_MODE", "testing")
                importlib.reload(catalogue_mode)
        """,
        "test_c_reload_2_mode.py": """
            import catalogue_mode

            @depends_on("test_c_reload_1_switch.py::test_switch")
            def test_mode():
                assert catalogue_mode.MODE == "testing"
        """,
    },
    "library_thread_start": {
        "test_c_thread_1_start.py": """
            import threading

            def test_start_poller():
                # Bounded: the thread ends within a minute whatever happens.
                threading.Thread(target=threading.Event().wait, args=(60,),
                                 name="catalogue-poller", daemon=True).start()
        """,
        "test_c_thread_2_alive.py": """
            import threading

            @depends_on("test_c_thread_1_start.py::test_start_poller")
            def test_poller_alive():
                assert any(t.name == "catalogue-poller" and t.is_alive()
                           for t in threading.enumerate())
        """,
    },
    "library_socket_timeout": {
        "test_c_socket_1_set.py": """
            import socket

            def test_timeout():
                socket.setdefaulttimeout(7.5)
        """,
        "test_c_socket_2_get.py": """
            import socket

            @depends_on("test_c_socket_1_set.py::test_timeout")
            def test_timeout_kept():
                assert socket.getdefaulttimeout() == 7.5
        """,
    },
    # An ordering-only edge (run_after): the same promise.
    "ordering_only_edge": {
        "test_c_decimal_1_set.py": """
            import decimal

            def test_precision():
                decimal.setcontext(decimal.Context(prec=6))
        """,
        "test_c_decimal_2_get.py": """
            import decimal

            @run_after("test_c_decimal_1_set.py::test_precision")
            def test_third():
                assert str(decimal.Decimal(1) / decimal.Decimal(3)) == "0.333333"
        """,
    },
    # a1 -> b (another module) -> a2, where a2 reads what a1 set.
    "chain_through_a_third_module": {
        "test_c_third_a.py": """
            SEEN = []

            def test_a1():
                SEEN.append("a1")

            @depends_on("test_c_third_b.py::test_b")
            def test_a2():
                assert SEEN == ["a1"]
        """,
        "test_c_third_b.py": """
            @depends_on("test_c_third_a.py::test_a1")
            def test_b():
                pass
        """,
    },
    # An edge out of a --doctest-modules item of a library module.
    "doctest_item": {
        "catalogue_cache.py": '''
            """Prices, cached.

            >>> warm("eu")
            'eu'
            """

            CACHE = {}


            def warm(key):
                CACHE[key] = True
                return key
        ''',
        "test_c_doctest_reader.py": """
            import catalogue_cache

            @depends_on("catalogue_cache.py::catalogue_cache")
            def test_warmed():
                assert catalogue_cache.CACHE == {"eu": True}
        """,
    },
    # The same, where the example fills a cache of functools.
    "doctest_item_cache": {
        "catalogue_rates.py": '''
            """Exchange rates, looked up once.

            >>> rate("eu")
            1.1
            """

            import functools


            @functools.lru_cache(maxsize=None)
            def rate(zone):
                return {"eu": 1.1, "us": 1.0}[zone]
        ''',
        "test_c_doctest_cache_reader.py": """
            import catalogue_rates

            @depends_on("catalogue_rates.py::catalogue_rates")
            def test_rate_cached():
                assert catalogue_rates.rate.cache_info().currsize == 1
        """,
    },
    # The environment written by a fixture of conftest.py, not by the module.
    "conftest_fixture_environment": {
        "test_c_conftest_env_1_set.py": """
            def test_pick_region(region):
                assert region == "eu"
        """,
        "test_c_conftest_env_2_get.py": """
            @depends_on("test_c_conftest_env_1_set.py::test_pick_region")
            def test_zone():
                assert os.environ.get("CATALOGUE_ZONE") == "eu"
        """,
    },
    # A module fixture commits in its teardown, while tests of its module are
    # still to come; a dependent in another module reads the committed row.
    "teardown_timing": {
        "test_c_teardown_1_orders.py": """
            import sqlite3

            DB = os.path.join(os.path.dirname(os.path.abspath(__file__)), "orders.db")

            @pytest.fixture(scope="module")
            def orders():
                db = sqlite3.connect(DB)
                db.execute("drop table if exists orders")
                db.execute("create table orders (item)")
                db.commit()
                yield db
                db.commit()
                db.close()

            def test_place(orders):
                orders.execute("insert into orders values ('gizmo')")

            def test_total(orders):
                time.sleep(0.3)
                assert orders.execute("select count(*) from orders").fetchone() == (1,)

            def test_report(orders):
                time.sleep(0.3)
        """,
        "test_c_teardown_2_ship.py": """
            import sqlite3

            DB = os.path.join(os.path.dirname(os.path.abspath(__file__)), "orders.db")

            @depends_on("test_c_teardown_1_orders.py::test_place")
            def test_ship():
                db = sqlite3.connect(DB)
                try:
                    assert db.execute("select count(*) from orders").fetchone() == (1,)
                finally:
                    db.close()
        """,
    },
}

#: Shaped like photoidx's ``test_03_photoidx.py``: one module fixture (an
#: index file a chain of calls edits), and tests that each declare only some
#: of the tests whose edits they rely on (``test_rmtag_by_tag`` relies on
#: running before ``test_rmtag_all``; ``test_ls_untagged``, ``test_lstags``
#: and ``test_lstags_by_tags`` on running after it).  Serially, in collection
#: order, all pass.
PHOTOIDX = '''
import json

import pytest

PHOTOS = {"p1": "2016-02-28", "p2": "2016-02-29", "p3": "2016-03-05",
          "p4": "2016-03-08", "p5": "2016-03-09"}


@pytest.fixture(scope="module")
def index(tmp_path_factory):
    return tmp_path_factory.mktemp("photos") / "index.json"


def load(index):
    return json.loads(index.read_text())


def save(index, photos):
    index.write_text(json.dumps(photos, sort_keys=True))


def addtag(index, tag, names):
    photos = load(index)
    for name in names:
        if tag not in photos[name]["tags"]:
            photos[name]["tags"] = sorted([*photos[name]["tags"], tag])
    save(index, photos)


def rmtag(index, tag, names):
    photos = load(index)
    for name in names:
        photos[name]["tags"] = [t for t in photos[name]["tags"] if t != tag]
    save(index, photos)


def ls(index, *tags, selected=False):
    photos = load(index)
    return sorted(name for name, photo in photos.items()
                  if all((t[1:] not in photo["tags"]) if t.startswith("!") else
                         (t in photo["tags"]) for t in tags)
                  and (photo["selected"] or not selected))


def lstags(index, *names):
    photos = load(index)
    return sorted({t for name in (names or photos) for t in photos[name]["tags"]})


def select(index, names, on=True):
    photos = load(index)
    for name in names:
        photos[name]["selected"] = on
    save(index, photos)


@pytest.mark.dependency()
def test_create(index):
    save(index, {name: {"date": date, "tags": [], "selected": False}
                 for name, date in PHOTOS.items()})
    assert ls(index) == sorted(PHOTOS)


@pytest.mark.dependency(depends=["test_create"])
def test_ls_all(index):
    assert ls(index) == ["p1", "p2", "p3", "p4", "p5"]


@pytest.mark.dependency(depends=["test_create"])
def test_addtag_all(index):
    addtag(index, "all", PHOTOS)
    assert ls(index, "all") == sorted(PHOTOS)


@pytest.mark.dependency(depends=["test_create"])
def test_addtag_by_date(index):
    addtag(index, "hakone", [n for n, d in PHOTOS.items() if d == "2016-03-05"])
    assert ls(index, "hakone") == ["p3"]


@pytest.mark.dependency(depends=["test_create"])
def test_addtag_by_place(index):
    addtag(index, "tokyo", ["p1", "p2"])
    assert ls(index, "tokyo") == ["p1", "p2"]


@pytest.mark.dependency(depends=["test_create"])
def test_addtag_by_files(index):
    addtag(index, "shrine", ["p2", "p3"])
    assert ls(index, "shrine") == ["p2", "p3"]


@pytest.mark.dependency(depends=["test_create", "test_addtag_all", "test_addtag_by_date",
                                 "test_addtag_by_place"])
def test_rmtag_by_tag(index):
    rmtag(index, "all", ls(index, "tokyo") + ls(index, "hakone"))
    assert ls(index, "all") == ["p4", "p5"]


@pytest.mark.dependency(depends=["test_create", "test_addtag_all"])
def test_rmtag_all(index):
    rmtag(index, "all", PHOTOS)
    assert ls(index, "all") == []


@pytest.mark.dependency(depends=["test_create", "test_addtag_by_files"])
def test_ls_by_single_tag(index):
    assert ls(index, "shrine") == ["p2", "p3"]


@pytest.mark.dependency(depends=["test_create", "test_addtag_by_place",
                                 "test_addtag_by_files"])
def test_ls_by_tags(index):
    assert ls(index, "tokyo", "shrine") == ["p2"]


@pytest.mark.dependency(depends=["test_create", "test_addtag_by_place",
                                 "test_addtag_by_files"])
def test_ls_by_negated_tag(index):
    assert ls(index, "tokyo", "!shrine") == ["p1"]


@pytest.mark.dependency(depends=["test_create", "test_addtag_by_date", "test_addtag_by_place",
                                 "test_addtag_by_files"])
def test_ls_untagged(index):
    assert [n for n in ls(index) if not lstags(index, n)] == ["p4", "p5"]


@pytest.mark.dependency(depends=["test_create", "test_addtag_by_place"])
def test_ls_by_date_and_tag(index):
    assert [n for n in ls(index, "tokyo") if PHOTOS[n] == "2016-02-28"] == ["p1"]


@pytest.mark.dependency(depends=["test_create", "test_addtag_by_date", "test_addtag_by_place",
                                 "test_addtag_by_files"])
def test_lstags(index):
    assert lstags(index) == ["hakone", "shrine", "tokyo"]


@pytest.mark.dependency(depends=["test_create", "test_addtag_by_place",
                                 "test_addtag_by_files"])
def test_lstags_by_tags(index):
    assert lstags(index, *ls(index, "tokyo")) == ["shrine", "tokyo"]


@pytest.mark.dependency(depends=["test_create"])
def test_select_by_files(index):
    select(index, ["p4"])
    assert ls(index, selected=True) == ["p4"]


@pytest.mark.dependency(depends=["test_create", "test_addtag_by_files",
                                 "test_select_by_files"])
def test_select_by_tag(index):
    select(index, ls(index, "shrine"))
    assert ls(index, selected=True) == ["p2", "p3", "p4"]


@pytest.mark.dependency(depends=["test_create", "test_select_by_tag"])
def test_deselect_by_files(index):
    select(index, ["p3"], on=False)
    assert ls(index, selected=True) == ["p2", "p4"]


@pytest.mark.dependency(depends=["test_create", "test_addtag_by_date", "test_addtag_by_place",
                                 "test_addtag_by_files", "test_rmtag_all"])
def test_stats(index):
    photos = load(index)
    assert {t: sum(t in p["tags"] for p in photos.values()) for t in lstags(index)} == {
        "hakone": 1, "shrine": 2, "tokyo": 2}


@pytest.mark.dependency(depends=["test_create", "test_addtag_by_date", "test_addtag_by_place",
                                 "test_addtag_by_files", "test_rmtag_all"])
def test_stats_by_tag(index):
    assert len(ls(index, "tokyo")) == 2 and lstags(index, *ls(index, "tokyo")) == [
        "shrine", "tokyo"]
'''

#: Independent tests beside the cases, each this long (recorded as longer).
BUSY = 8
BUSY_SECONDS = 0.1

#: The options of every run of the categories' project: doctest items, and
#: the warnings plugin off, or it resets the filters around every test and
#: the warnings case passes nothing along.
RUN_ARGS = ("-p", "no:randomly", "--doctest-modules", "-p", "no:warnings")

#: A dependent of a case: its decorator, then its name.
DEPENDENT = re.compile(r"^@(?:depends_on|run_after)\(.*\)\ndef (test_\w+)", re.MULTILINE)


def write_busy(root: Path, recorded: dict[str, float]) -> int:
    """The independent tests, and the durations file: ``recorded`` and theirs
    (long); how many busy tests there are."""
    busy = "import time\n\n" + "".join(
        f"def test_busy{k}():\n    time.sleep({BUSY_SECONDS})\n\n\n" for k in range(BUSY))
    (root / "test_busy.py").write_text(busy, encoding="utf-8")
    recorded = {**recorded, **{f"test_busy.py::test_busy{k}": 1.0 for k in range(BUSY)}}
    (root / "durations.json").write_text(json.dumps(recorded), encoding="utf-8")
    return BUSY


def write_project(root: Path) -> int:
    """The categories' inner project; how many tests it holds."""
    tests = 0
    recorded: dict[str, float] = {}
    files = {path: text for category in CATEGORIES.values() for path, text in category.items()}
    for path, body in files.items():
        text = textwrap.dedent(body)
        if Path(path).name.startswith("test_"):
            text = HEAD + text
            names = re.findall(r"^def (test_\w+)", text, re.MULTILINE)
            tests += len(names)
            # Recorded durations: a dependent of a case longest of all, the
            # rest of a case shortest, so that a placement free to split a
            # case hands a dependent, once ready, to the first worker that
            # asks, not to the one that ran its prerequisite.
            dependents = set(DEPENDENT.findall(text))
            recorded.update({f"{path}::{name}": 2.0 if name in dependents else 0.01
                             for name in names})
        if ">>> " in text:
            tests += 1  # the module's docstring: one doctest item
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_text(text, encoding="utf-8")
    (root / "conftest.py").write_text(CONFTEST, encoding="utf-8")
    return tests + write_busy(root, recorded)


def outcomes(pytester: pytest.Pytester, junit: str) -> dict[str, str]:
    cases, _ = read_junit(pytester.path / junit)
    return {key: case.outcome for key, case in cases.items()}


def differences(pytester: pytest.Pytester, expected: dict[str, str],
                junit: str) -> dict[str, str | None]:
    """The tests whose outcome in ``junit`` is not the ``expected`` one."""
    got = outcomes(pytester, junit)
    return {key: got.get(key) for key, outcome in expected.items() if got.get(key) != outcome}


def original_plugin(module: str, name: str) -> tuple[str, ...]:
    """The options that load a migrating plugin where it is installed (its
    markers are read the same without it)."""
    return ("-p", name) if importlib.util.find_spec(module) is not None else ()


def test_every_category_gives_its_serial_outcome_under_n(
        pytester: pytest.Pytester, dagtester: DagTester) -> None:
    dagtester.ini("dag_durations = durations.json\n")
    total = write_project(pytester.path)
    serial = dagtester.run(*RUN_ARGS, "--junitxml=serial.xml",
                           own_process="the cases change the environment, the warning "
                           "filters, the logging levels and the threads of the process "
                           "running them")
    serial.assert_outcomes(passed=total)
    expected = outcomes(pytester, "serial.xml")
    assert len(expected) == total
    # Two runs, on two and on three workers: a split chain fails in either.
    explained = []
    for workers, explain in (("2", ("--dag-explain",)), ("3", ())):
        result = dagtester.run(*RUN_ARGS, *explain, "-n", workers,
                               f"--junitxml=n{workers}.xml", timeout=240)
        differ = differences(pytester, expected, f"n{workers}.xml")
        assert not differ, (workers, differ, result.stdout.str()[-3000:])
        explained += result.stdout.lines if explain else []
    # Where the timing put a case's two tests on one worker, the rule still
    # shows: no declared edge is left free.
    pytest.LineMatcher(explained).fnmatch_lines(["dagorder: no dependency left free*"])


def test_a_module_of_partial_declarations_runs_in_its_serial_order_under_n(
        pytester: pytest.Pytester, dagtester: DagTester) -> None:
    """photoidx's shape: the module's tests are one group (they share the
    module fixture), and the group runs in the order the serial run uses,
    which is the only order the partial declarations were checked in; an
    order of readiness or priority inside the group runs ``test_rmtag_all``
    (two tests wait on it) before ``test_rmtag_by_tag``, which relied on it
    coming later."""
    dagtester.ini("dag_durations = durations.json\n")
    (pytester.path / "test_photoidx.py").write_text(PHOTOIDX, encoding="utf-8")
    total = PHOTOIDX.count("\ndef test_") + write_busy(pytester.path, {})
    # pytest-dependency's own plugin loaded where it is installed, its markers
    # taken over, as a suite that has it installed runs (without it, the
    # plugin reads the markers alone).
    args = ("-p", "no:randomly", *original_plugin("pytest_dependency", "dependency"))
    dagtester.run(*args, "--junitxml=serial.xml").assert_outcomes(passed=total)
    expected = outcomes(pytester, "serial.xml")
    assert len(expected) == total
    # The order inside a group does not depend on how many workers there are.
    result = dagtester.run(*args, "-n", "2", "--junitxml=n2.xml", timeout=240)
    differ = differences(pytester, expected, "n2.xml")
    assert not differ, (differ, result.stdout.str()[-3000:])


#: The tests of the last test's module and class, and those of another module.
ORDERED_INIT = 20
ORDERED_OTHER = 40
#: How many tests the other worker may start after the last one started:
#: those it held already when the last was handed out.
HANDED_AHEAD = 2


def test_an_order_minus_one_test_is_handed_out_after_every_other(
        pytester: pytest.Pytester, dagtester: DagTester) -> None:
    """pytest-order's ``order(-1)`` keeps its meaning in dispatch: the test
    is handed out after every test that precedes it serially, as plain
    xdist's queue hands it out.  Shaped like whenever's
    ``TestInit::test_tz_cache_adjustments``: its module's tests use a module
    fixture, so a worker that runs the module goes on with it while any of
    its tests is ready, and the last one is ready from the start."""
    methods = "".join(f"\n    def test_init{k}(self):\n        mark('init{k}', 0.01)\n"
                      for k in range(ORDERED_INIT))
    dagtester.modules(test_init=textwrap.dedent("""
        @pytest.fixture(scope="module", autouse=True)
        def zones():
            return {}

        class TestInit:
            @pytest.mark.order(-1)
            def test_tz_cache_adjustments(self):
                # Modifies the tz cache, which can affect other tests.
                mark("last")
    """) + methods, test_other=free_tests(ORDERED_OTHER, seconds=0.01))
    result = dagtester.run("-p", "no:randomly", *original_plugin("pytest_order", "pytest_order"),
                           "-n", "2", timeout=240)
    total = ORDERED_INIT + ORDERED_OTHER + 1
    result.assert_outcomes(passed=total)
    ran = dagtester.ran()
    assert len(ran) == total
    last = ran["last"]
    started_after = sorted(name for name, test in ran.items()
                           if name != "last" and test.start > last.start)
    # Handed out last, it starts last on its worker; the other worker may
    # still start what it was handed before (plain xdist's queue: one test
    # in about half of the runs).
    assert all(ran[name].pid != last.pid for name in started_after), started_after
    assert len(started_after) <= HANDED_AHEAD, started_after
