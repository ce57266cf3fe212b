"""pytest-dependency's run-time ``depends(request, [...])`` under this plugin,
and every other internal of the plugins taken over, one function each.

pytest-dependency's own plugin is blocked (see :mod:`.takeover`), so nothing
else records results where its ``depends()`` looks for them: this module
does, through its public ``DependencyManager`` classes, and gives the skips
of ``depends()`` reasons that say why a result is missing.

The one module that touches the other plugins' internals.  Checked against
pytest-dependency 0.5 and 0.6.1: ``DependencyManager.get_manager`` /
``getManager``, ``add_result`` / ``addResult``, ``checkDepend`` /
``check_depend``, ``results`` and ``scope``; a result's ``isSuccess()`` and
``results``.  The patch is undone in ``pytest_unconfigure``.  pytest-depends
1.0.1: its module's ``managers`` (:func:`depends_managers`).  pytest-order
1.5.0: its ``Sorter`` and ``pytest_generate_tests`` (:func:`order_sorter`).
Each is looked up by the names in the module constants below and checked
before it is used; anything else found means "not usable", and the caller
falls back (a test can rename a constant to see the fallback).
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Generator, Iterable
from importlib.util import find_spec
from typing import Any, ClassVar

import pytest

from ..declaring import foreign_wording as wording
from ..options.settings import settings_of
from ..shims.pytest_internals import fixture_functions, skip_here
from .dependency_names import MARK, SCOPE_CLS, SCOPES, scope_name

#: pytest-depends' module and its list of ``DependencyManager``, whose
#: ``_items`` is None until the manager's session collected.
DEPENDS_MODULE = "pytest_depends"
DEPENDS_MANAGERS = "managers"
DEPENDS_ITEMS = "_items"
#: pytest-order's sorter (module, class, method) and plugin (module, hook).
ORDER_SORTER = ("pytest_order.sorter", "Sorter", "sort_items")
ORDER_GENERATE = ("pytest_order.plugin", "pytest_generate_tests")


#: The (node, scope, name) of each run-time ``depends()`` call since the
#: finder's probe plugin (``finder/probe_plugin.py``) last emptied the list (at
#: each test's start): declared prerequisites no collected graph shows.  The
#: node is ``request.node``: the test, or the module or class of a wide
#: fixture that called it (set up for the test running).
WAITED = pytest.StashKey[list[tuple[pytest.Item, str, str]]]()


class RuntimeDepends:
    """Feeds pytest-dependency's result stores; patches its ``checkDepend``."""

    NAME: ClassVar[str] = "dagorder-depends"

    def __init__(self) -> None:
        self._restore: list[tuple[type, str, object]] = []

    @pytest.hookimpl(tryfirst=True)
    def pytest_sessionstart(self, session: pytest.Session) -> None:
        self._patch()

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        # The test modules may have imported pytest_dependency only now (its
        # plugin not loaded, e.g. -p no:dependency).
        self._patch()
        # Results are fed only where pytest-dependency can be imported at all:
        # elsewhere no depends() can ask for them, and a wrapper around every
        # report of every test would cost for nothing.
        pm = session.config.pluginmanager
        if not pm.has_plugin(ResultFeed.NAME) and (
                "pytest_dependency" in sys.modules or find_spec("pytest_dependency") is not None):
            pm.register(ResultFeed(), ResultFeed.NAME)

    def pytest_unconfigure(self, config: pytest.Config) -> None:
        while self._restore:
            cls, attr, value = self._restore.pop()
            setattr(cls, attr, value)

    def _patch(self) -> None:
        """Give pytest-dependency's ``depends()`` reasons that say why.

        Its ``DependencyManager.checkDepend`` skips with "test_b depends on
        test_a" whatever happened; :func:`_check_depend` says whether
        ``test_a`` did not pass, has not run in this process (under ``-n``:
        not in the same affinity group) or names no test.
        """
        if self._restore:
            return
        manager_cls = _manager_class()
        if manager_cls is None:
            return
        for attr in ("checkDepend", "check_depend"):
            original = manager_cls.__dict__.get(attr)
            if callable(original):
                self._restore.append((manager_cls, attr, original))
                setattr(manager_cls, attr, _checker(original))


class ResultFeed:
    """Records each report where pytest-dependency's ``depends()`` looks for it."""

    NAME: ClassVar[str] = "dagorder-depends-results"

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_makereport(
        self, item: pytest.Item, call: pytest.CallInfo[None]
    ) -> Generator[None, pytest.TestReport, pytest.TestReport]:
        report = yield
        # Whenever pytest_dependency is imported: its own plugin is never active
        # next to ours (blocked by the takeover, or by -p no:dependency).
        _feed_results(item, report)
        return report


class RuntimeUsers:
    """Which tests live where pytest-dependency's runtime ``depends()`` is used.

    A module that imports ``depends`` (or ``pytest_dependency``), or whose
    tests use a fixture from such a module, checks results at run time in
    its own process: under ``-n`` it keeps its serial result only as one
    affinity group run in collection order.  Namespaces are looked at once.
    """

    def __init__(self) -> None:
        module: Any = sys.modules.get("pytest_dependency")
        self._targets = (module, getattr(module, "depends", None))
        self._seen: dict[int, bool] = {}
        # By id of an item's parent: whether its module uses depends()
        # (siblings share it; finding the module walks up the tree).
        self._module_uses: dict[int, bool] = {}

    def __call__(self, item: pytest.Item) -> bool:
        if self._targets[0] is None:
            return False  # nothing imported pytest_dependency: nobody calls depends()
        key = id(item.parent)
        found = self._module_uses.get(key)
        if found is None:
            module = getattr(item, "module", None)
            found = self._module_uses[key] = module is not None and self._uses(vars(module))
        return found or any(self._uses(getattr(fn, "__globals__", {}))
                            for fn in fixture_functions(item))

    def _uses(self, namespace: dict[str, Any]) -> bool:
        key = id(namespace)
        found = self._seen.get(key)
        if found is None:
            module, depends = self._targets
            found = any(v is module or (depends is not None and v is depends)
                        for v in namespace.values())
            self._seen[key] = found
        return found


def _manager_class() -> type | None:
    module: Any = sys.modules.get("pytest_dependency")
    manager_cls = getattr(module, "DependencyManager", None)
    return manager_cls if isinstance(manager_cls, type) else None


def _checker(original: Callable[..., None]) -> Callable[[Any, Iterable[str], pytest.Item], None]:
    """``checkDepend`` for the class: ours in a session this plugin runs, the
    original in any other session of the process (one started in-process
    from a test, with this plugin switched off), which the patch must not change."""
    def check_depend(manager: Any, depends: Iterable[str], item: pytest.Item) -> None:
        if item.config.pluginmanager.has_plugin(RuntimeDepends.NAME):
            _check_depend(manager, depends, item)
        else:
            original(manager, depends, item)
    return check_depend


def _check_depend(manager: Any, depends: Iterable[str], item: pytest.Item) -> None:
    """pytest-dependency's ``DependencyManager.checkDepend`` with clearer reasons."""
    settings = settings_of(item.config)
    depends = list(depends)
    waited = item.config.stash.get(WAITED, None)
    if waited is not None:
        waited.extend((item, str(manager.scope), n) for n in depends)
    for name in depends:
        status = manager.results.get(name)
        if status is not None:
            if status.isSuccess():
                continue
            failed = [f"{w} {o}" for w, o in status.results.items() if o not in (None, "passed")]
            how = f" ({', '.join(failed)})" if failed else ""
            skip_here(wording.depends_not_passed(item.name, name, how))
        if settings.ignore_unknown_dependency:
            continue
        scope = str(manager.scope)
        if not _names_a_test(item, scope, name, settings.automark_dependency):
            skip_here(wording.depends_no_test(item.name, name, scope))
        if hasattr(item.config, "workerinput"):
            skip_here(wording.depends_other_process(item.name, name, settings.affinity))
        skip_here(wording.depends_not_run_yet(item.name, name))


def _names_a_test(item: pytest.Item, scope: str, name: str, automark: bool) -> bool:
    """Whether ``name`` is pytest-dependency's name of a test of the run in ``scope``."""
    return named_test(item, scope, name, automark) is not None


def named_test(item: pytest.Item, scope: str, name: str, automark: bool) -> str | None:
    """The node id of the test of the run that ``name`` names in ``scope``, as
    pytest-dependency's ``depends()`` of ``item`` reads it (None: none)."""
    cls = SCOPE_CLS.get(scope)
    if cls is None:
        return None
    node = item.getparent(cls)
    if node is None:
        return None
    for other in item.session.items:
        marker = other.get_closest_marker(MARK)
        if marker is None and not automark:
            continue
        if other.getparent(cls) is not node:
            continue
        custom = marker.kwargs.get("name") if marker is not None else None
        if name in (custom, scope_name(other.nodeid, scope)):
            return other.nodeid
    return None


def _feed_results(item: pytest.Item, report: pytest.TestReport) -> None:
    """Record the result where pytest-dependency's own ``depends()`` looks for it."""
    manager_cls: Any = _manager_class()
    if manager_cls is None:
        return
    marker = item.get_closest_marker(MARK)
    if marker is None and not settings_of(item.config).automark_dependency:
        return
    name = marker.kwargs.get("name") if marker is not None else None
    get = getattr(manager_cls, "get_manager", None) or getattr(manager_cls, "getManager", None)
    if get is None:
        return
    for scope in SCOPES:
        manager = get(item, scope=scope)
        add = getattr(manager, "add_result", None) or getattr(manager, "addResult", None)
        if add is not None:
            add(item, name, report)


def depends_managers() -> list[object] | None:
    """pytest-depends' module-level list of managers, as found (None: not
    imported, or not a list: nothing to undo)."""
    module = sys.modules.get(DEPENDS_MODULE)
    found = getattr(module, DEPENDS_MANAGERS, None)
    return found if isinstance(found, list) else None


def depends_manager_fresh(manager: object) -> bool:
    """Whether a pytest-depends manager has not collected yet (False: in use,
    or of another shape, so left alone)."""
    return getattr(manager, DEPENDS_ITEMS, False) is None


def order_sorter() -> tuple[type, Callable[[pytest.Metafunc], None] | None] | None:
    """pytest-order's ``Sorter`` and its ``pytest_generate_tests``, if installed
    and usable (None: the fallback orders by ordinals)."""
    sorter_mod, sorter_name, method = ORDER_SORTER
    plugin_mod, hook = ORDER_GENERATE
    try:
        sorters: Any = importlib.import_module(sorter_mod)
        plugin: Any = importlib.import_module(plugin_mod)
    except Exception:  # not installed, or broken: the fallback orders
        return None
    sorter = getattr(sorters, sorter_name, None)
    if not isinstance(sorter, type) or not callable(getattr(sorter, method, None)):
        return None
    generate = getattr(plugin, hook, None)
    return sorter, generate if callable(generate) else None
