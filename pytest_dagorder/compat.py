"""Read the markers of pytest-dependency, pytest-depends and pytest-order.

Suites written for those plugins run unedited: their markers become edges of
the same graph as ``depends_on`` (requires-pass) and ``run_after``
(ordering only), resolved and validated once after collection.

* pytest-dependency ``dependency(name=, depends=, scope=)``: requires-pass
  edges, names per scope as that plugin defines them.  Only a test marked
  with ``dependency`` (or every test, with ``automark_dependency``) can be
  depended upon: a dependency on an existing but unmarked test is skipped at
  run time, as pytest-dependency does, with a reason saying what to mark.
* pytest-depends ``depends(on=, name=)``: requires-pass edges.
* pytest-order ``order(index, before=, after=)``: ``before``/``after`` are
  ordering-only edges; ordinals reorder the collected items stably
  (:func:`apply_ordinals`) before the plan is made.

If one of those plugins is installed too, it is blocked (``takeover``) and a
header line says so: two plugins must never both reorder or skip.  Their
``pytest_addoption`` and ``pytest_configure`` have run by then (pytest calls
them for every plugin first); every registration after that is blocked as it
happens (:meth:`Compat.pytest_plugin_registered`).  pytest-dependency's
runtime ``depends()`` keeps working: results are recorded where it looks,
and its skip reasons say why a result is missing (:func:`_check_depend`).
"""

from __future__ import annotations

import importlib.util
import re
import sys
from collections.abc import Generator, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import pytest

from .declarations import ForeignReader, Index, Problem

DEPENDENCY = "dependency"
DEPENDS = "depends"
ORDER = "order"

#: Registration names and module names of the originals, by what users call them.
#: Checked against pytest-dependency 0.6.1, pytest-depends 1.0.1 and pytest-order
#: 1.5.0: their ``pytest11`` entry points are ``dependency``, ``depends`` and
#: ``pytest_order``; ``pytest_plugins = [...]`` registers them under the module
#: name; pytest-order registers its sorter as ``orderingplugin`` from its own
#: ``pytest_configure``, which may run after ours.
ORIGINALS: dict[str, tuple[frozenset[str], frozenset[str]]] = {
    "pytest-dependency": (
        frozenset({"dependency", "pytest_dependency"}),
        frozenset({"pytest_dependency"}),
    ),
    "pytest-depends": (
        frozenset({"depends", "pytest_depends"}),
        frozenset({"pytest_depends"}),
    ),
    "pytest-order": (
        frozenset({"pytest_order", "pytest_order.plugin", "orderingplugin"}),
        frozenset({"pytest_order", "pytest_order.plugin"}),
    ),
}
#: Options of the originals that they still define (pytest adds them before
#: anyone can block the plugin) but that do nothing under takeover:
#: (dest, flag) per plugin, named in the header when given.
IGNORED_OPTIONS: dict[str, tuple[tuple[str, str], ...]] = {
    "pytest-depends": (
        ("failed_dependency_action", "--failed-dependency-action"),
        ("missing_dependency_action", "--missing-dependency-action"),
        ("list_dependency_names", "--list-dependency-names"),
        ("list_processed_dependencies", "--list-processed-dependencies"),
    ),
    "pytest-order": (
        ("indulgent_ordering", "--indulgent-ordering"),
        ("order_scope", "--order-scope"),
        ("order_scope_level", "--order-scope-level"),
        ("order_group_scope", "--order-group-scope"),
        ("sparse_ordering", "--sparse-ordering"),
        ("order_dependencies", "--order-dependencies"),
        ("order_marker_prefix", "--order-marker-prefix"),
        ("error_on_failed_ordering", "--error-on-failed-ordering"),
        ("fail_all_on_failed_ordering", "--fail-all-on-failed-ordering"),
        ("order_after_ff", "--order-after-ff"),
    ),
}
COMPAT_NAME = "dagorder-compat"
SCOPES = ("session", "package", "module", "class")
# pytest-order's ordinal words; negative ones count from the end.
_WORDS = ("first", "second", "third", "fourth", "fifth", "sixth", "seventh", "eighth")
ORDINAL_WORDS: dict[str, int] = {
    **{w: k for k, w in enumerate(_WORDS)},
    "last": -1,
    **{f"{w}_to_last": -(k + 1) for k, w in enumerate(_WORDS) if k},
}


# -- configuration -------------------------------------------------------------


def _dependency_defines_options(pluginmanager: pytest.PytestPluginManager) -> bool:
    """Whether pytest-dependency itself adds ``automark_dependency`` and its flag."""
    if pluginmanager.is_blocked("dependency"):
        return False
    return (
        pluginmanager.has_plugin("dependency")
        or importlib.util.find_spec("pytest_dependency") is not None
    )


def addoption(parser: pytest.Parser, pluginmanager: pytest.PytestPluginManager) -> None:
    """pytest-dependency's option names, unless pytest-dependency defines them itself."""
    if _dependency_defines_options(pluginmanager):
        return
    parser.addini(
        "automark_dependency",
        "Treat every test as marked with @pytest.mark.dependency (pytest-dependency)",
        type="bool",
        default=False,
    )
    parser.getgroup("dagorder").addoption(
        "--ignore-unknown-dependency",
        action="store_true",
        default=False,
        help="Ignore pytest-dependency dependencies on tests that are not run or not marked",
    )


def configure(config: pytest.Config) -> None:
    """Register the foreign markers and readers; block the originals if present."""
    from .plugin import READERS  # plugin imports this module

    config.addinivalue_line(
        "markers",
        f"{DEPENDENCY}(name=None, depends=[], scope='module'): pytest-dependency "
        "declaration, read by pytest-dagorder",
    )
    config.addinivalue_line(
        "markers", f"{DEPENDS}(on=[], name=None): pytest-depends declaration, "
        "read by pytest-dagorder",
    )
    config.addinivalue_line(
        "markers", f"{ORDER}(index=None, before=None, after=None): pytest-order "
        "declaration, read by pytest-dagorder",
    )
    automark = _truthy(_ini(config, "automark_dependency"))
    ignore_unknown = bool(config.getoption("ignore_unknown_dependency", False))
    readers: tuple[ForeignReader, ...] = (
        DependencyReader(automark=automark, ignore_unknown=ignore_unknown),
        DependsReader(),
        OrderReader(),
    )
    config.stash[READERS] = readers
    compat = Compat()
    config.pluginmanager.register(compat, COMPAT_NAME)
    compat.take_over(config)


def _ini(config: pytest.Config, name: str) -> object:
    try:
        return config.getini(name)
    except ValueError:  # nobody defined it (the original is installed but not loaded)
        return False


def _truthy(value: object) -> bool:
    if isinstance(value, str):
        return value.strip().lower() in ("1", "yes", "y", "true", "t", "on")
    return bool(value)


class Compat:
    """Takeover of the original plugins and pytest-dependency's runtime ``depends()``."""

    def __init__(self) -> None:
        self.taken: dict[str, None] = {}
        self._restore: list[tuple[type, str, object]] = []

    def take_over(self, config: pytest.Config) -> None:
        """Block every original that is registered (idempotent)."""
        pm = config.pluginmanager
        for name, plugin in list(pm.list_name_plugin()):
            self._block(pm, name, plugin)
        self._patch_dependency()

    def _block(self, pm: pytest.PytestPluginManager, name: str | None, plugin: object) -> None:
        if plugin is None:  # blocked already, e.g. by -p no:NAME: not ours to take over
            return
        module = getattr(plugin, "__name__", None)
        for label, (names, modules) in ORIGINALS.items():
            if name in names or module in modules:
                if name is not None:
                    pm.set_blocked(name)
                for other in names:  # e.g. pytest-order's sorter, registered later
                    if not pm.is_blocked(other) and pm.get_plugin(other) is None:
                        pm.set_blocked(other)
                self.taken[label] = None

    def pytest_plugin_registered(
        self, plugin: object, plugin_name: str | None, manager: pytest.PytestPluginManager
    ) -> None:
        # An original registered after our pytest_configure (a conftest's
        # ``pytest_plugins``, pytest-order's sorter): block it at once.
        if manager.get_plugin(plugin_name or "") is plugin:
            self._block(manager, plugin_name, plugin)

    @pytest.hookimpl(tryfirst=True)
    def pytest_sessionstart(self, session: pytest.Session) -> None:
        # Belt and braces: look again before anything is collected.
        self.take_over(session.config)

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        # The test modules may have imported pytest_dependency only now (its
        # plugin not loaded, e.g. -p no:dependency).
        self._patch_dependency()

    def pytest_unconfigure(self, config: pytest.Config) -> None:
        while self._restore:
            cls, attr, value = self._restore.pop()
            setattr(cls, attr, value)

    def pytest_report_header(self, config: pytest.Config) -> list[str]:
        if not self.taken:
            return []
        lines = [
            f"dagorder: took over from {', '.join(self.taken)}: their markers are "
            "read by pytest-dagorder, their plugins are disabled"
        ]
        ignored = [
            flag
            for label in self.taken
            for dest, flag in IGNORED_OPTIONS.get(label, ())
            if getattr(config.option, dest, None)
        ]
        if ignored:
            lines.append(
                f"dagorder: ignored options of the disabled plugins: {', '.join(ignored)}"
            )
        return lines

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_makereport(
        self, item: pytest.Item, call: pytest.CallInfo[None]
    ) -> Generator[None, pytest.TestReport, pytest.TestReport]:
        report = yield
        # Whenever pytest_dependency is imported: its own plugin is never active
        # next to ours (blocked here, or by -p no:dependency).
        _feed_dependency_results(item, report)
        return report

    def _patch_dependency(self) -> None:
        """Give pytest-dependency's runtime ``depends()`` reasons that say why.

        Its ``DependencyManager.checkDepend`` (0.5, 0.6) skips with "test_b
        depends on test_a" whatever happened; :func:`_check_depend` says
        whether ``test_a`` did not pass, has not run in this process (under
        ``-n``: not in the same affinity group) or names no test.  Undone in
        ``pytest_unconfigure``.
        """
        if self._restore:
            return
        module: Any = sys.modules.get("pytest_dependency")
        manager_cls = getattr(module, "DependencyManager", None)
        if not isinstance(manager_cls, type):
            return
        for attr in ("checkDepend", "check_depend"):
            original = manager_cls.__dict__.get(attr)
            if callable(original):
                self._restore.append((manager_cls, attr, original))
                setattr(manager_cls, attr, _check_depend)


def _check_depend(manager: Any, depends: Iterable[str], item: pytest.Item) -> None:
    """pytest-dependency's ``DependencyManager.checkDepend`` with clearer reasons."""
    from .plugin import AFFINITY_MODES, setting, skip_here

    for name in depends:
        status = manager.results.get(name)
        if status is not None:
            if status.isSuccess():
                continue
            failed = [f"{w} {o}" for w, o in status.results.items() if o not in (None, "passed")]
            how = f" ({', '.join(failed)})" if failed else ""
            skip_here(f"{item.name} depends on {name}, which did not pass{how}")
        if bool(item.config.getoption("ignore_unknown_dependency", False)):
            continue
        scope = str(manager.scope)
        if not _names_a_test(item, scope, name):
            skip_here(
                f"{item.name} depends on {name}, which names no test of this run marked "
                f"with @pytest.mark.dependency in its {scope} scope"
            )
        if hasattr(item.config, "workerinput"):
            mode = setting(item.config, "affinity", AFFINITY_MODES)
            skip_here(
                f"{item.name} depends on {name}, which did not run in this worker process "
                f"before it: a runtime depends() sees only tests of {item.name}'s own "
                f"affinity group (--dag-affinity={mode}) that an edge runs first; declare the "
                "dependency with @pytest.mark.dependency(depends=[...]) to have it scheduled"
            )
        skip_here(
            f"{item.name} depends on {name}, which has not run yet: a runtime depends() "
            "does not order tests; declare the dependency with "
            "@pytest.mark.dependency(depends=[...]) to have it run first"
        )


def _names_a_test(item: pytest.Item, scope: str, name: str) -> bool:
    """Whether ``name`` is pytest-dependency's name of a test of the run in ``scope``."""
    cls = _SCOPE_CLS.get(scope)
    if cls is None:
        return False
    node = item.getparent(cls)
    if node is None:
        return False
    automark = _truthy(_ini(item.config, "automark_dependency"))
    for other in item.session.items:
        marker = other.get_closest_marker(DEPENDENCY)
        if marker is None and not automark:
            continue
        if other.getparent(cls) is not node:
            continue
        custom = marker.kwargs.get("name") if marker is not None else None
        if name in (custom, _scope_name(other.nodeid, scope)):
            return True
    return False


def _scope_name(nodeid: str, scope: str) -> str:
    """pytest-dependency's default name of a test in ``scope``."""
    if scope == "module":
        return nodeid.split("::", 1)[-1]
    if scope == "class":
        return nodeid.split("::", 2)[-1]
    return nodeid


def _feed_dependency_results(item: pytest.Item, report: pytest.TestReport) -> None:
    """Record the result where pytest-dependency's own ``depends()`` looks for it.

    Its plugin is blocked, so nothing else fills its per-scope result stores;
    this does what its report hook would do, through its public classes
    (``DependencyManager``; method names differ between its releases).
    """
    module: Any = sys.modules.get("pytest_dependency")
    manager_cls = getattr(module, "DependencyManager", None)
    if manager_cls is None:
        return
    marker = item.get_closest_marker(DEPENDENCY)
    if marker is None and not _truthy(_ini(item.config, "automark_dependency")):
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


# -- shared helpers ---------------------------------------------------------------


def _where(mark: str, item: pytest.Item) -> str:
    return f"@pytest.mark.{mark} on {item.nodeid}"


def _names(value: object) -> list[str] | None:
    """A list of non-empty strings from a list/tuple (or a lone string), else None."""
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, (list, tuple)):
        return None
    if not all(isinstance(v, str) and v.strip() for v in value):
        return None
    return [v.strip() for v in value]


def _unknown(index: Index, item: pytest.Item, mark: str, target: str) -> Problem:
    index.misses.append(target)
    hint = index.suggest(item, target)
    extra = f"; did you mean {', '.join(map(repr, hint))}?" if hint else ""
    return Problem(item.nodeid, f"{_where(mark, item)}: target {target!r} matches no "
                   f"collected test{extra}")


def _drop_self(hits: Iterable[int], i: int) -> list[int]:
    """A target naming a group the test belongs to means the others of the group."""
    hits = list(hits)
    return hits if hits == [i] else [j for j in hits if j != i]


@dataclass
class _Tables:
    """What a reader derived from one :class:`Index` (rebuilt when the index changes)."""

    index: Index
    pos: dict[int, int]  # id(item) -> index in index.items
    names: dict[tuple[str, str, str], list[int]] = field(default_factory=dict)
    registered: set[int] = field(default_factory=set)
    after: dict[int, list[int]] = field(default_factory=dict)
    problems: dict[int, list[Problem]] = field(default_factory=dict)


class _Reader:
    def __init__(self) -> None:
        self._tables: _Tables | None = None

    def tables(self, index: Index) -> _Tables:
        if self._tables is None or self._tables.index is not index:
            t = _Tables(index, {id(it): k for k, it in enumerate(index.items)})
            self.build(t)
            self._tables = t
        return self._tables

    def build(self, t: _Tables) -> None:
        """Fill ``t`` from every item of ``t.index``."""


# -- pytest-dependency ------------------------------------------------------------

_SCOPE_CLS: dict[str, type[pytest.Collector]] = {
    "session": pytest.Session,
    "package": pytest.Package,
    "module": pytest.Module,
    "class": pytest.Class,
}


class DependencyReader(_Reader):
    """``@pytest.mark.dependency``: pytest-dependency's names per scope, requires-pass."""

    def __init__(self, *, automark: bool, ignore_unknown: bool) -> None:
        super().__init__()
        self.automark = automark
        self.ignore_unknown = ignore_unknown

    def build(self, t: _Tables) -> None:
        for k, item in enumerate(t.index.items):
            marker = item.get_closest_marker(DEPENDENCY)
            if marker is None and not self.automark:
                continue
            t.registered.add(k)
            custom = marker.kwargs.get("name") if marker is not None else None
            nodeid = item.nodeid
            for scope, cls in _SCOPE_CLS.items():
                node = item.getparent(cls)
                if node is None:
                    continue
                if isinstance(custom, str):
                    name = custom
                elif scope == "module":
                    name = nodeid.split("::", 1)[-1]
                elif scope == "class":
                    name = nodeid.split("::", 2)[-1]
                else:
                    name = nodeid
                t.names.setdefault((scope, node.nodeid, name), []).append(k)

    def __call__(
        self, item: pytest.Item, index: Index
    ) -> tuple[list[int], list[int], list[Problem]]:
        marker = item.get_closest_marker(DEPENDENCY)
        if marker is None:
            return [], [], []
        t = self.tables(index)
        i = t.pos[id(item)]
        where = _where(DEPENDENCY, item)
        problems: list[Problem] = []
        if marker.args:
            problems.append(Problem(item.nodeid, (
                f"{where}: takes keyword arguments only (name=, depends=, scope=), "
                f"got positional {', '.join(map(repr, marker.args))}")))
        extra = sorted(set(marker.kwargs) - {"name", "depends", "scope"})
        if extra:
            problems.append(Problem(item.nodeid, (
                f"{where}: unexpected keyword argument(s) {', '.join(extra)}; "
                "use name=, depends= and scope=")))
        name = marker.kwargs.get("name")
        if name is not None and not (isinstance(name, str) and name):
            problems.append(Problem(item.nodeid, f"{where}: name={name!r} must be a string"))
        scope = marker.kwargs.get("scope", "module")
        depends = marker.kwargs.get("depends") or []
        targets = None if isinstance(depends, str) else _names(depends)
        if targets is None:
            problems.append(Problem(item.nodeid, (
                f"{where}: depends={depends!r} must be a list of test names, "
                "e.g. depends=['test_a']")))
            targets = []
        if scope not in _SCOPE_CLS:
            problems.append(Problem(item.nodeid, (
                f"{where}: scope={scope!r} is not one of {', '.join(map(repr, SCOPES))}")))
            return [], [], problems
        node = item.getparent(_SCOPE_CLS[scope])
        if node is None:
            if targets:
                problems.append(Problem(item.nodeid, (
                    f"{where}: scope={scope!r} but the test is not in a {scope}")))
            return [], [], problems
        requires: list[int] = []
        unmarked: list[str] = []
        for target in targets:
            hits = t.names.get((scope, node.nodeid, target))
            if hits is None:
                found = self._by_node_id(index, node, scope, target)
                if found and all(j in t.registered for j in found):
                    hits = found
                elif found:
                    unmarked.append(target)
                    continue
            if hits is None:
                if not self.ignore_unknown:
                    problems.append(_unknown(index, item, DEPENDENCY, target))
                continue
            if self.ignore_unknown:
                # Its documented meaning: a dependency that is not run is ignored.
                chosen = {id(x) for x in item.session.items}
                hits = [j for j in hits if id(index.items[j]) in chosen]
            requires.extend(_drop_self(hits, i))
        if unmarked and not self.ignore_unknown and not problems:
            names = ", ".join(map(repr, unmarked))
            item.add_marker(pytest.mark.skip(reason=(
                f"{item.name} depends on {names}, which is not marked with "
                "@pytest.mark.dependency (mark it, or set automark_dependency = true)")))
        return requires, [], problems

    @staticmethod
    def _by_node_id(index: Index, node: pytest.Collector, scope: str, target: str) -> list[int]:
        """Items a name reaches as a node id in ``scope`` (base names, classes too)."""
        prefix = f"{node.nodeid}::" if scope in ("module", "class") else ""
        hits = index.lookup(prefix + target) or []
        if scope == "package":
            hits = [j for j in hits if node in index.items[j].listchain()]
        return hits


# -- pytest-depends -----------------------------------------------------------------


class DependsReader(_Reader):
    """``@pytest.mark.depends(on=..., name=...)``: requires-pass edges."""

    def build(self, t: _Tables) -> None:
        for k, item in enumerate(t.index.items):
            for mark in item.iter_markers(DEPENDS):
                name = mark.kwargs.get("name")
                for n in _names(name) or []:
                    t.names.setdefault(("", "", n), []).append(k)

    def __call__(
        self, item: pytest.Item, index: Index
    ) -> tuple[list[int], list[int], list[Problem]]:
        marks = list(item.iter_markers(DEPENDS))
        if not marks:
            return [], [], []
        t = self.tables(index)
        i = t.pos[id(item)]
        where = _where(DEPENDS, item)
        requires: list[int] = []
        problems: list[Problem] = []
        for mark in marks:
            extra = sorted(set(mark.kwargs) - {"on", "name"})
            if mark.args or extra:
                got = [*map(repr, mark.args), *extra]
                problems.append(Problem(item.nodeid, (
                    f"{where}: unexpected argument(s) {', '.join(got)}; "
                    "use on=['test_a'] and name='...'")))
            name = mark.kwargs.get("name")
            if name is not None and _names(name) is None:
                problems.append(Problem(item.nodeid, f"{where}: name={name!r} must be a string"))
            on = mark.kwargs.get("on", [])
            targets = _names(on)
            if targets is None:
                problems.append(Problem(item.nodeid, (
                    f"{where}: on={on!r} must be a test name or a list of them")))
                continue
            for target in targets:
                hits = t.names.get(("", "", target)) or index.lookup(target)
                if hits is None:
                    hits = index.resolve(item, target)
                if hits is None:
                    problems.append(_unknown(index, item, DEPENDS, target))
                    continue
                requires.extend(_drop_self(hits, i))
        return requires, [], problems


# -- pytest-order -------------------------------------------------------------------


class OrderReader(_Reader):
    """``@pytest.mark.order``: ``before``/``after`` as ordering-only edges."""

    def build(self, t: _Tables) -> None:
        index = t.index
        for k, item in enumerate(index.items):
            problems = t.problems.setdefault(k, [])
            for mark in item.iter_markers(ORDER):
                problems.extend(_ordinal_problems(item, mark))
                for key in ("after", "before"):
                    if key not in mark.kwargs:
                        continue
                    value = mark.kwargs[key]
                    targets = _names(value)
                    if targets is None:
                        problems.append(Problem(item.nodeid, (
                            f"{_where(ORDER, item)}: {key}={value!r} must be a test name "
                            "or a list of them")))
                        continue
                    for target in targets:
                        hits = _order_resolve(index, item, target)
                        if hits is None:
                            problems.append(_unknown(index, item, ORDER, target))
                            continue
                        for j in _drop_self(hits, k):
                            if key == "after":
                                t.after.setdefault(k, []).append(j)
                            else:  # before=X: X runs after this test
                                t.after.setdefault(j, []).append(k)

    def __call__(
        self, item: pytest.Item, index: Index
    ) -> tuple[list[int], list[int], list[Problem]]:
        t = self.tables(index)
        i = t.pos[id(item)]
        return [], list(dict.fromkeys(t.after.get(i, []))), list(t.problems.get(i, []))


def _order_resolve(index: Index, item: pytest.Item, target: str) -> list[int] | None:
    hits = index.resolve(item, target)
    if hits is None and ".py::" in target:
        # pytest-order also accepts a module path relative to the test's directory.
        mod = item.getparent(pytest.Module)
        if mod is not None and "/" in mod.nodeid:
            hits = index.lookup(mod.nodeid.rsplit("/", 1)[0] + "/" + target)
            if hits is not None:
                index.misses.remove(target)
    return hits


_INDEX_KEYS = ("index", "after", "before")


def _ordinal_value(mark: pytest.Mark) -> object:
    if mark.args:
        return mark.args[0]
    return mark.kwargs.get("index")


def _ordinal_problems(item: pytest.Item, mark: pytest.Mark) -> list[Problem]:
    where = _where(ORDER, item)
    out: list[Problem] = []
    extra = sorted(set(mark.kwargs) - set(_INDEX_KEYS))
    if len(mark.args) > 1 or extra or (mark.args and "index" in mark.kwargs):
        out.append(Problem(item.nodeid, (
            f"{where}: takes one ordinal (or index=) plus before= and after=; "
            f"got {mark.args!r} {sorted(mark.kwargs)!r}")))
    value = _ordinal_value(mark)
    if value is not None and _ordinal(value) is None:
        out.append(Problem(item.nodeid, (
            f"{where}: {value!r} is not an ordinal; use an integer (negative counts from "
            f"the end) or one of {', '.join(ORDINAL_WORDS)}")))
    return out


def _ordinal(value: object) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str):
        if re.fullmatch(r"-?\d+", value.strip()):
            return int(value)
        return ORDINAL_WORDS.get(value.strip())
    return None


def ordinal_of(item: pytest.Item) -> int | None:
    """The pytest-order ordinal of ``item`` (closest marker that has one), if valid."""
    for mark in item.iter_markers(ORDER):
        value = _ordinal_value(mark)
        if value is not None:
            return _ordinal(value)
    return None


def apply_ordinals(items: Sequence[pytest.Item]) -> list[pytest.Item]:
    """``items`` stably sorted by pytest-order ordinals.

    Non-negative ordinals first (ascending), then unordered tests, then
    negative ordinals (``-2`` before ``-1``, which is "last").  Dependencies
    are applied afterwards by the plan, so an ordinal never beats an edge.
    """
    def key(pair: tuple[int, pytest.Item]) -> tuple[int, int, int]:
        k, item = pair
        value = ordinal_of(item)
        if value is None:
            return (1, 0, k)
        return (0 if value >= 0 else 2, value, k)

    if not any(ordinal_of(it) is not None for it in items):
        return list(items)
    return [it for _, it in sorted(enumerate(items), key=key)]
