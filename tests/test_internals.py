"""Each pytest / pluggy / xdist internal the plugin touches, taken away: the fallback.

``pytest_dagorder.shims.pytest_internals`` looks every internal up by the names in its
module constants and checks it is there before relying on it.  Each test
here takes one away, either for real (the attribute replaced by one of
another shape, where pytest itself does not need it) or by renaming the
constant, which is what a release renaming the internal looks like from
the plugin's side, and shows the run degrading to the fallback
docs/limitations.rst lists instead of crashing.  A control run beside it
shows the behaviour the internal buys.

Inner runs that need a rename in every process (xdist workers are
subprocesses) get it from a conftest.py, loaded by each process before the
plugin's drivers are registered.
"""

from __future__ import annotations

import inspect
import sys
import textwrap
from types import SimpleNamespace
from typing import Any, cast

import pytest
from helpers import assert_after, base_args
from support.dagtester import DagTester

from pytest_dagorder.drivers.distributed.exit_forwarding import ExitForwarder
from pytest_dagorder.migration import runtime, takeover
from pytest_dagorder.shims import pytest_internals as internals
from pytest_dagorder.shims import xdist_internals

TIMEOUT = 120.0

#: Each test gives ``-n`` or ``-p no:xdist`` itself.
pytestmark = [pytest.mark.dag_modes("own"), pytest.mark.dagtester(timeout=TIMEOUT)]

CHAIN = """
    def test_a():
        mark("a")


    @depends_on("test_a")
    def test_b():
        mark("b")


    @depends_on("test_b")
    def test_c():
        mark("c")
"""

A_FAILS = """
    def test_a():
        mark("a")
        assert False


    @depends_on("test_a")
    def test_b():
        mark("b")


    def test_x():
        mark("x")
"""


#: The first line of the conftest.py :func:`rename_internals` writes.
RENAMES = "import pytest_dagorder.shims.pytest_internals as internals"


def rename_internals(dagtester: DagTester, **names: object) -> None:
    """A conftest.py that makes ``internals`` look for other names (a release renamed them).

    The test's runs then go in a process of their own: in-process the
    plugin's module would stay patched for the outer run."""
    lines = [RENAMES, ""]
    lines += [f"internals.{name} = {value!r}" for name, value in names.items()]
    dagtester.pytester.makeconftest("\n".join(lines) + "\n")
    dagtester.own_process = "its conftest.py renames the plugin's internals"


def assert_clean(result: pytest.RunResult) -> None:
    out = result.stdout.str() + result.stderr.str()
    assert "INTERNALERROR" not in out
    assert "Traceback" not in out


# -- _pytest.assertion.rewrite: the plugin's modules load unrewritten -----------------


def test_rewriting_is_paused_while_the_hook_class_is_found() -> None:
    hook = internals._lookup(internals.REWRITE_MODULE, internals.REWRITE_HOOK)
    assert isinstance(hook, type)
    before = list(sys.meta_path)
    assert any(isinstance(f, hook) for f in before)  # this suite runs under pytest
    with internals.assertion_rewriting_paused():
        assert not any(isinstance(f, hook) for f in sys.meta_path)
    assert sys.meta_path == before


@pytest.mark.parametrize("gone", ["class", "module"])
def test_rewriting_is_left_alone_when_pytest_moved_it(
        monkeypatch: pytest.MonkeyPatch, gone: str) -> None:
    if gone == "class":
        monkeypatch.setattr(internals, "REWRITE_HOOK", "AssertionRewritingFinder")
    else:
        # An import of the module fails, as after a move.
        monkeypatch.setitem(sys.modules, internals.REWRITE_MODULE, None)
    before = list(sys.meta_path)
    with internals.assertion_rewriting_paused():
        assert sys.meta_path == before
    assert sys.meta_path == before


def test_the_plugin_loads_and_runs_when_the_rewriter_moved(dagtester: DagTester) -> None:
    dagtester.modules(test_m=CHAIN)
    code = textwrap.dedent(f"""\
        import sys
        import pytest_dagorder.shims.pytest_internals as internals
        internals.REWRITE_MODULE = "_pytest.assertion.gone"
        import pytest
        sys.exit(pytest.main({[*base_args(), "-p", "no:xdist", "-q"]!r}))
    """)
    result = dagtester.pytester.run(sys.executable, "-c", code, timeout=TIMEOUT)
    assert result.ret == 0, result.stdout.str()
    result.stdout.fnmatch_lines(["3 passed*"])
    assert sorted(dagtester.ran()) == ["a", "b", "c"]


# -- Skipped(_use_item_location=True): where a skip is reported -----------------------


def test_a_skip_points_at_the_test(dagtester: DagTester) -> None:
    dagtester.modules(test_m=A_FAILS)
    result = dagtester.run("-p", "no:xdist", "-rs")
    result.assert_outcomes(passed=1, failed=1, skipped=1)
    result.stdout.fnmatch_lines(["SKIPPED [[]1] test_m.py:*: prerequisite test_a failed*"])


def test_a_skip_without_the_location_flag_points_into_the_plugin(
        dagtester: DagTester, monkeypatch: pytest.MonkeyPatch) -> None:
    """pytest's skip exception without ``_use_item_location``: a plain skip, no crash."""
    real = pytest.skip.Exception

    class Skipped(real):  # type: ignore[valid-type,misc]
        def __init__(self, msg: str = "unknown reason") -> None:
            super().__init__(msg)

    monkeypatch.setattr(pytest.skip, "Exception", Skipped)
    assert internals.ITEM_LOCATION_FLAG not in inspect.signature(pytest.skip.Exception).parameters
    dagtester.modules(test_m=A_FAILS)
    result = dagtester.run("-p", "no:xdist", "-rs")
    result.assert_outcomes(passed=1, failed=1, skipped=1)
    result.stdout.fnmatch_lines(["SKIPPED [[]1] *internals.py:*: prerequisite test_a failed*"])
    assert_clean(result)
    assert sorted(dagtester.ran()) == ["a", "x"]


# -- SetupState.teardown_exact and pluggy's hook relay: plain xdist scheduling --------


def test_barriers_need_nothing_missing_here(request: pytest.FixtureRequest) -> None:
    assert internals.barriers_blocker(request.config) is None


@pytest.mark.parametrize(("names", "missing"), [
    ({"SETUP_STATE": ("SetupState", "_setupstate", "teardown_upto")},
     "pytest's SetupState.teardown_upto"),
    ({"PROTOCOL_HOOK": "pytest_runtest_protocol_v2"},
     "pluggy's HookRelay.pytest_runtest_protocol_v2"),
    ({"NODE_ID": "node_id"}, "pytest's Item.node_id property"),
    ({"REPORT_HOOKS": ("pytest_runtest_makereport", "pytest_runtest_logreport_v2")},
     "pluggy's HookRelay.pytest_runtest_logreport_v2"),
], ids=["teardown_exact", "hook-relay", "nodeid", "report-hooks"])
def test_without_an_internal_the_barriers_need_xdist_schedules_plainly(
        dagtester: DagTester, names: dict[str, object], missing: str) -> None:
    rename_internals(dagtester, **names)
    dagtester.modules(test_m=CHAIN, test_n="def test_n():\n    mark('n')\n")
    result = dagtester.run("-n", "2")
    assert result.ret == 0
    result.assert_outcomes(passed=4)
    assert sorted(dagtester.ran()) == ["a", "b", "c", "n"]
    result.stdout.fnmatch_lines([
        f"pytest-dagorder: {missing} not found *: -n runs use plain xdist scheduling, "
        "dependencies are not enforced; run without -n, or upgrade pytest-dagorder",
    ])
    # No DAG header: xdist's own scheduling.
    result.stdout.no_fnmatch_line("dagorder: *dependencies*")
    assert_clean(result)


def test_the_same_suite_is_scheduled_as_a_dag_with_them(dagtester: DagTester) -> None:
    dagtester.modules(test_m=CHAIN, test_n="def test_n():\n    mark('n')\n")
    result = dagtester.run("-n", "2")
    result.assert_outcomes(passed=4)
    result.stdout.fnmatch_lines(["dagorder: *dependencies*"])
    result.stdout.no_fnmatch_line("*plain xdist scheduling*")
    assert_after(dagtester.ran(), [("a", "b"), ("b", "c")])


def test_a_serial_run_does_not_need_them(dagtester: DagTester) -> None:
    rename_internals(dagtester, PROTOCOL_HOOK="pytest_runtest_protocol_v2",
                     SETUP_STATE=("SetupState", "_setupstate", "teardown_upto"))
    dagtester.modules(test_m=A_FAILS)
    result = dagtester.run("-p", "no:xdist")
    result.assert_outcomes(passed=1, failed=1, skipped=1)
    result.stdout.no_fnmatch_line("*plain xdist scheduling*")


def test_a_session_without_the_fixture_stack_fails_the_barrier_as_a_teardown() -> None:
    session = cast(pytest.Session, SimpleNamespace())
    with pytest.raises(RuntimeError, match=r"no _setupstate\.teardown_exact; run with -p no:"):
        internals.teardown_towards(session, None)


def test_a_hook_caller_the_relay_does_not_hold_is_not_replaced(
        request: pytest.FixtureRequest) -> None:
    made: list[object] = []
    assert not internals.replace_hook_caller(request.config, "pytest_no_such_hook", made.append)
    assert made == []
    assert not hasattr(request.config.pluginmanager.hook, "pytest_no_such_hook")


# -- session.items swapped for a list that hides the barrier ---------------------------


def test_the_tail_is_indexed_but_not_listed() -> None:
    tests = cast(list[pytest.Item], ["t0", "t1"])
    tail = cast(pytest.Item, "barrier")
    session = cast(pytest.Session, SimpleNamespace(items=list(tests)))
    internals.index_past_end(session, tail)
    assert isinstance(session.items, internals.ItemsWithTail)
    assert (len(session.items), list(session.items)) == (2, tests)
    assert session.items[2] is tail
    assert session.items[0:5] == tests


def test_another_plugins_list_type_is_kept_and_the_tail_appended() -> None:
    class Theirs(list[Any]):
        pass

    session = cast(pytest.Session, SimpleNamespace(items=Theirs(["t0"])))
    internals.index_past_end(session, cast(pytest.Item, "barrier"))
    assert type(session.items) is Theirs
    assert list(session.items) == ["t0", "barrier"]


def test_a_dag_runs_under_xdist_when_a_plugin_owns_session_items(
        dagtester: DagTester) -> None:
    dagtester.pytester.makeconftest("""
        import pytest

        class Items(list):
            pass

        def pytest_collection_finish(session):
            session.items = Items(session.items)
    """)
    dagtester.modules(test_m=CHAIN, test_n="""
        @pytest.fixture(scope="module")
        def res():
            yield
            mark("res-down")


        @depends_on("test_m.py::test_c")
        def test_n(res):
            mark("n")
    """)
    result = dagtester.run("-n", "2")
    result.assert_outcomes(passed=4)
    assert_after(dagtester.ran(), [("a", "b"), ("b", "c"), ("c", "n"), ("n", "res-down")])
    assert_clean(result)


# -- Item.location computed in bulk ---------------------------------------------------


def test_locations_are_left_to_pytest_when_location_is_no_cached_property(
        dagtester: DagTester, monkeypatch: pytest.MonkeyPatch) -> None:
    items = dagtester.pytester.getitems("""
        def test_one():
            pass

        class TestTwo:
            def test_two(self):
                pass
    """)
    expected = [it.location for it in items]
    cached = inspect.getattr_static(pytest.Item, "location")
    monkeypatch.setattr(pytest.Item, "location", property(cached.func))
    for it in items:
        del it.__dict__["location"]  # what the cached property had stored
    internals.fill_locations(items)  # a plain property cannot be set: left alone
    assert [it.location for it in items] == expected
    assert all("location" not in vars(it) for it in items)


def test_a_run_goes_on_when_location_is_no_cached_property(
        dagtester: DagTester, monkeypatch: pytest.MonkeyPatch) -> None:
    cached = inspect.getattr_static(pytest.Item, "location")
    monkeypatch.setattr(pytest.Item, "location", property(cached.func))
    dagtester.modules(test_m=A_FAILS)
    result = dagtester.run("-p", "no:xdist", "-rs")
    result.assert_outcomes(passed=1, failed=1, skipped=1)
    result.stdout.fnmatch_lines(["SKIPPED [[]1] test_m.py:*: prerequisite test_a failed*"])


# -- terminalreporter.stats: the deselected count --------------------------------------


@pytest.mark.parametrize(("names", "deselected"), [({}, 0), ({"TERMINAL_STATS": "counts"}, 1)],
                         ids=["stats", "renamed"])
def test_pulled_back_prerequisites_leave_the_deselected_count(
        dagtester: DagTester, names: dict[str, object], deselected: int) -> None:
    if names:
        rename_internals(dagtester, **names)
    dagtester.modules(test_m=CHAIN)
    result = dagtester.run("-p", "no:xdist", "-k", "b or c", "--dag-with-prerequisites")
    result.assert_outcomes(passed=3, deselected=deselected)
    assert sorted(dagtester.ran()) == ["a", "b", "c"]


@pytest.mark.parametrize(("names", "deselected"), [({}, 1), ({"TERMINAL_STATS": "counts"}, 0)],
                         ids=["stats", "renamed"])
def test_the_controller_counts_what_the_workers_deselected(
        dagtester: DagTester, names: dict[str, object], deselected: int) -> None:
    if names:
        rename_internals(dagtester, **names)
    dagtester.modules(test_m=CHAIN)
    result = dagtester.run("-n", "2", "-k", "test_a or test_b")
    result.assert_outcomes(passed=2, deselected=deselected)
    assert_clean(result)


# -- cacheprovider's lastfailed: a blocked test stays for --lf ------------------------


@pytest.mark.parametrize(("names", "blocked"), [
    ({}, 1), ({"LASTFAILED_PLUGIN": "lastfailed"}, 0)], ids=["kept", "renamed"])
def test_lf_keeps_a_blocked_test_only_with_the_cache_providers_set(
        dagtester: DagTester, names: dict[str, object], blocked: int) -> None:
    if names:
        rename_internals(dagtester, **names)
    dagtester.modules(test_m=A_FAILS)
    dagtester.run("-p", "no:xdist", cache=True).assert_outcomes(
        passed=1, failed=1, skipped=1)
    result = dagtester.run("-p", "no:xdist", "--lf", cache=True)
    assert result.ret == 1
    # test_b, blocked again, is in the run only if the set kept it.
    assert result.parseoutcomes().get("skipped", 0) == blocked
    assert sorted(dagtester.ran()) == ["a"]
    assert_clean(result)


def test_a_lastfailed_value_of_another_shape_is_left_alone(dagtester: DagTester) -> None:
    dagtester.modules(test_m=A_FAILS)
    dagtester.run("-p", "no:xdist", cache=True)
    config = dagtester.pytester.parseconfigure()
    assert config.cache is not None
    config.cache.set(internals.LASTFAILED_KEY, ["test_m.py::test_a"])
    internals.keep_in_lastfailed(config, ["test_m.py::test_b"])
    assert config.cache.get(internals.LASTFAILED_KEY, None) == ["test_m.py::test_a"]


@pytest.mark.parametrize(("names", "collected"), [
    ({}, "collected 6 items / 4 deselected / 2 selected"),
    ({"LASTFAILED_COLLECTION": "lastfailed-collection"}, "collected 2 items")],
    ids=["whole", "renamed"])
def test_lf_with_a_shard_collects_everything_only_with_the_cache_providers_helper(
        dagtester: DagTester, names: dict[str, object], collected: str) -> None:
    if names:
        rename_internals(dagtester, **names)
    dagtester.modules(test_m=A_FAILS, test_n=CHAIN)
    dagtester.run("-p", "no:xdist", cache=True).assert_outcomes(
        passed=4, failed=1, skipped=1)
    result = dagtester.run("-p", "no:xdist", "--lf", "--dag-shard=1/1", cache=True)
    # Both run what failed (test_b stays blocked); only the whole collection
    # gives a part that does not move with what failed last.
    result.stdout.fnmatch_lines([collected + "*"])
    assert sorted(dagtester.ran()) == ["a"]
    assert_clean(result)


# -- pulled-in files: made by the collection hooks ------------------------------------


def run_unit_pulling_in(dagtester: DagTester, module: str) -> pytest.RunResult:
    """Run ``tests/unit``, whose test needs ``tests/integration/<module>.py::test_i``:
    the prerequisite is pulled in and both pass."""
    dagtester.modules(tests__unit__test_u=f"""
        @depends_on("tests/integration/{module}.py::test_i")
        def test_u():
            mark("u")
    """, **{f"tests__integration__{module}": """
        def test_i():
            mark("i")
    """})
    result = dagtester.run("-p", "no:xdist", "tests/unit", "--dag-with-prerequisites")
    result.assert_outcomes(passed=2)
    assert sorted(dagtester.ran()) == ["i", "u"]
    return result


def test_a_file_outside_the_session_is_made_by_the_collection_hooks(
        dagtester: DagTester) -> None:
    """A conftest's own module class collects a pulled-in file, as it would in the session."""
    dagtester.pytester.makeconftest("""
        import pytest

        class Recorded(pytest.Module):
            def collect(self):
                with open(self.config.rootpath / "made.txt", "a") as f:
                    f.write(self.path.name + "\\n")
                return super().collect()

        def pytest_pycollect_makemodule(module_path, parent):
            return Recorded.from_parent(parent, path=module_path)
    """)
    run_unit_pulling_in(dagtester, "test_i")
    made = (dagtester.path / "made.txt").read_text().split()
    assert made == ["test_u.py", "test_i.py"]


def test_a_target_outside_python_files_is_collected_as_if_named(
        dagtester: DagTester) -> None:
    """As a file named on the command line: still through the conftest's module hook."""
    dagtester.pytester.makeconftest("""
        def pytest_pycollect_makemodule(module_path, parent):
            with open(parent.config.rootpath / "made.txt", "a") as f:
                f.write(module_path.name + "\\n")
    """)
    result = run_unit_pulling_in(dagtester, "check_i")
    assert (dagtester.path / "made.txt").read_text().split() == ["test_u.py", "check_i.py"]
    assert_clean(result)


# -- Function._fixtureinfo: which fixtures a test uses ---------------------------------


def test_a_tests_fixture_functions_without_fixtureinfo_are_none(
        dagtester: DagTester, monkeypatch: pytest.MonkeyPatch) -> None:
    (item,) = dagtester.pytester.getitems("""
        import pytest

        @pytest.fixture
        def resource():
            return 1

        def test_one(resource):
            pass
    """)
    assert [f.__name__ for f in internals.fixture_functions(item)] == ["resource"]
    monkeypatch.setattr(internals, "FIXTURE_INFO", "_fixtures")
    assert internals.fixture_functions(item) == []


def test_requested_fixtures_follow_what_the_test_names_and_without_fixtureinfo_are_unknown(
        dagtester: DagTester, monkeypatch: pytest.MonkeyPatch) -> None:
    items = dagtester.pytester.getitems("""
        import pytest

        @pytest.fixture(scope="session")
        def store():
            return {}

        @pytest.fixture(scope="module")
        def box(store):
            return store

        @pytest.fixture
        def inner(box):
            return box

        @pytest.fixture(scope="session", autouse=True)
        def logging_set_up():
            pass

        @pytest.fixture(scope="session")
        def worker_id():  # as xdist's: a string
            return "gw0"

        def test_one(inner, tmp_path, worker_id):
            pass

        def test_factory(tmp_path_factory):
            pass
    """)
    found = {item.name: internals.requested_fixtures(item) for item in items}
    # Through other fixtures; not the autouse one, not the factory behind
    # tmp_path (a directory per test), not worker_id.
    assert [(name, scope) for name, scope, _ in found["test_one"] or ()] == [
        ("box", "module"), ("store", "session")]
    assert [name for name, _, _ in found["test_factory"] or ()] == ["tmp_path_factory"]
    monkeypatch.setattr(internals, "FIXTURE_INFO", "_fixtures")
    assert internals.requested_fixtures(items[0]) is None


# -- xdist's helpers ---------------------------------------------------------------------


def test_the_worker_count_is_read_from_the_tx_specs_without_xdists_helper(
        monkeypatch: pytest.MonkeyPatch) -> None:
    import xdist.workermanage

    config = cast(pytest.Config, SimpleNamespace(
        getoption=lambda name, default=None: ["3*popen", "ssh=host"] if name == "tx" else default,
        getvalue=lambda name: ["3*popen", "ssh=host"]))
    assert xdist_internals.xdist_node_count(config) == 4
    monkeypatch.delattr(xdist.workermanage, "parse_tx_spec_config")
    assert xdist_internals.xdist_node_count(config) == 4


def test_the_collection_diff_has_a_message_without_xdists_helper(
        monkeypatch: pytest.MonkeyPatch) -> None:
    import xdist.report

    monkeypatch.delattr(xdist.report, "report_collection_diff")
    text = xdist_internals.xdist_collection_diff(["a", "b"], ["a"], "gw0", "gw1")
    assert text == "Different tests were collected between gw0 and gw1: 2 and 1 tests"


def test_the_controller_is_found_by_its_class_name(request: pytest.FixtureRequest) -> None:
    class DSession:
        pass

    pm = request.config.pluginmanager
    assert not xdist_internals.xdist_controller_active(request.config) or pm.has_plugin("dsession")
    plugin = DSession()
    pm.register(plugin, "dsession-renamed")
    try:
        assert xdist_internals.xdist_controller_active(request.config)
    finally:
        pm.unregister(plugin)


def test_a_controller_failure_counts_towards_maxfail_only_with_dsessions_counter(
        request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    class DSession:
        def __init__(self) -> None:
            self.counted: list[object] = []

        def _handlefailures(self, rep: object) -> None:
            self.counted.append(rep)

    pm = request.config.pluginmanager
    if pm.has_plugin("dsession"):
        pytest.skip("runs inside an xdist controller")
    plugin = DSession()
    report = pytest.TestReport("t.py::t", ("t.py", 0, "t"), {}, "failed", "boom", "call")
    pm.register(plugin, "dsession")
    try:
        assert xdist_internals.count_xdist_failure(request.config, report)
        assert plugin.counted == [report]
        monkeypatch.setattr(xdist_internals, "DSESSION_FAILURES", "_renamed")
        assert not xdist_internals.count_xdist_failure(request.config, report)
        assert plugin.counted == [report]
    finally:
        pm.unregister(plugin)
    assert not xdist_internals.count_xdist_failure(request.config, report)  # no xdist at all


def test_a_test_is_shown_as_in_its_teardown_and_left_as_pytest_left_it(
        dagtester: DagTester, monkeypatch: pytest.MonkeyPatch) -> None:
    (item,) = dagtester.pytester.getitems("def test_one():\n    pass\n")
    view = internals.teardown_view(item)
    assert sorted(view) == ["_request", "funcargs"]
    cast(Any, item).funcargs["res"] = 1  # what setup fills, in place
    cast(Any, item).funcargs, cast(Any, item)._request = None, False  # the protocol's end
    with internals.as_in_teardown(item, view):
        assert cast(Any, item).funcargs == {"res": 1}
        assert cast(Any, item)._request is view["_request"]
    assert cast(Any, item).funcargs is None and cast(Any, item)._request is False
    # An attribute pytest no longer has is neither read nor set.
    monkeypatch.setattr(internals, "TEARDOWN_STATE", ("funcargs", "_gone"))
    assert sorted(internals.teardown_view(item)) == ["funcargs"]


# -- the plugins taken over: pytest-depends' managers, pytest-order's sorter ----------


def test_pytest_depends_managers_of_another_shape_are_left_alone(
        monkeypatch: pytest.MonkeyPatch) -> None:
    pytest_depends = pytest.importorskip("pytest_depends")
    fresh, used = SimpleNamespace(_items=None), SimpleNamespace(_items=[])
    monkeypatch.setattr(pytest_depends, "managers", [used, fresh])
    undone = takeover.DependsManagers()
    undone.undo()
    assert pytest_depends.managers == [used]  # control: the fresh one is dropped
    monkeypatch.setattr(pytest_depends, "managers", [used, fresh])
    monkeypatch.setattr(runtime, "DEPENDS_MANAGERS", "renamed_managers")
    assert runtime.depends_managers() is None
    takeover.DependsManagers().undo()
    assert pytest_depends.managers == [used, fresh]
    monkeypatch.setattr(runtime, "DEPENDS_MANAGERS", "managers")
    monkeypatch.setattr(runtime, "DEPENDS_ITEMS", "renamed_items")
    takeover.DependsManagers().undo()
    assert pytest_depends.managers == [used, fresh]  # no manager looks fresh: all kept


ORDINALS = """
    @pytest.mark.order(2)
    def test_second():
        mark("second")


    @pytest.mark.order(1)
    def test_first():
        mark("first")
"""


@pytest.mark.autoload
def test_without_pytest_orders_sorter_ordinals_still_order_and_its_options_are_named(
        dagtester: DagTester, monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("pytest_order")
    dagtester.modules(test_o=ORDINALS)
    ignored = "dagorder: ignored options of the disabled plugins: --sparse-ordering"
    for gone in (False, True):
        if gone:
            monkeypatch.setattr(runtime, "ORDER_SORTER",
                                ("pytest_order.sorter", "RenamedSorter", "sort_items"))
            assert runtime.order_sorter() is None
        result = dagtester.run("-p", "no:xdist", "--sparse-ordering")
        assert_clean(result)
        result.assert_outcomes(passed=2)
        ran = dagtester.ran()
        assert ran["first"].end <= ran["second"].start
        assert (ignored in result.stdout.str()) is gone


# -- Session.shouldstop: a test's pytest.exit() under -n ends its worker -------------


class _Channel:
    def __init__(self) -> None:
        self.sent: list[object] = []

    def send(self, message: object) -> None:
        self.sent.append(message)


@pytest.mark.parametrize("flag", [True, False], ids=["shouldstop", "gone"])
def test_pytest_exit_is_passed_on_only_where_the_session_can_stop(flag: bool) -> None:
    """Without the flag the exception ends the worker, as without this plugin,
    and the controller is told nothing it would act on."""
    channel = _Channel()
    session = SimpleNamespace(shouldstop=False) if flag else SimpleNamespace()
    forward = ExitForwarder(channel, cast(pytest.Session, session))
    with pytest.raises(pytest.exit.Exception) as exc:
        pytest.exit("enough")
    assert forward(exc.value) is flag
    assert len(channel.sent) == int(flag)
    assert getattr(session, "shouldstop", None) == ("enough" if flag else None)
