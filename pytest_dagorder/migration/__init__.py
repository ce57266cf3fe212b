"""Suites written for pytest-dependency, pytest-depends and pytest-order run unedited.

Their markers become edges of the same graph as ``depends_on`` (requires-pass)
and ``run_after`` (ordering only), resolved and validated once after
collection:

* :mod:`.takeover` blocks the original plugins when they are installed too
  (two plugins must never both reorder or skip) and says so in the header;
* one reader per foreign plugin (:mod:`.dependency`, :mod:`.depends`,
  :mod:`.order`) turns its markers into :class:`~pytest_dagorder.declaring.declarations.Declared`
  records and touches nothing else;
* :mod:`.runtime` keeps pytest-dependency's run-time ``depends()`` working.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import TYPE_CHECKING

import pytest

from ..options.settings import GROUP
from ..shims.late_loading import Later
from .dependency_names import MARK as DEPENDENCY_MARK
from .dependency_names import dependency_defines_options, depends_defines_options
from .report import UnknownNames
from .runtime import RuntimeDepends
from .takeover import DEPENDS_ACTIONS, SORTING_PLUGIN, Takeover

if TYPE_CHECKING:
    from ..declaring.declarations import ForeignReader
    from ..options.settings import Settings
    from . import common, dependency, depends, order, sorting
    from .depends import DependsActions
    from .sorting import OrderSorting
else:  # each only where a test carries its plugin's marker, or the plugin was taken over
    common = Later("pytest_dagorder.migration.common")
    dependency = Later("pytest_dagorder.migration.dependency")
    depends = Later("pytest_dagorder.migration.depends")
    order = Later("pytest_dagorder.migration.order")
    sorting = Later("pytest_dagorder.migration.sorting")

__all__ = [
    "ORDER_MARK",
    "addoption",
    "apply_ordinals",
    "configure",
    "ordering_failed",
    "reader_warnings",
    "readers",
    "sorted_by_pytest_order",
    "take_over_early",
]

# The markers' names, so that a plan can tell which readers it needs: each
# reader (and pytest-order's sorter, pytest-depends' actions) loads only in a
# run whose tests carry its marker (or whose plugin was taken over), under the
# same pause of assertion rewriting as the plugin's own modules (see plugin.py).
# Defined here only; the readers' modules take their names from here.
ORDER_MARK = "order"
DEPENDS_MARK = "depends"

DEPENDENCY_MARKER = (
    "dependency(name=None, depends=[], scope='module'): pytest-dependency "
    "declaration, read by pytest-dagorder"
)
DEPENDS_MARKER = "depends(on=[], name=None): pytest-depends declaration, read by pytest-dagorder"
ORDER_MARKER = (
    "order(index=None, before=None, after=None): pytest-order declaration, "
    "read by pytest-dagorder."
)


#: pytest-depends' options: (ini key or None, flag); its two actions are both.
DEPENDS_OPTIONS = (
    ("failed_dependency_action", "--failed-dependency-action"),
    ("missing_dependency_action", "--missing-dependency-action"),
    (None, "--list-dependency-names"),
    (None, "--list-processed-dependencies"),
)


def addoption(parser: pytest.Parser, pluginmanager: pytest.PytestPluginManager) -> None:
    """The originals' option names, unless they define them themselves: a suite
    whose configuration names them keeps working once the original is gone."""
    if not dependency_defines_options(pluginmanager):
        _add_dependency_options(parser)
    if not depends_defines_options(pluginmanager):
        _add_depends_options(parser)


def _add_dependency_options(parser: pytest.Parser) -> None:
    parser.addini(
        "automark_dependency",
        "Treat every test as marked with @pytest.mark.dependency (pytest-dependency)",
        type="bool",
        default=False,
    )
    parser.getgroup(GROUP).addoption(
        "--ignore-unknown-dependency",
        action="store_true",
        default=False,
        help="Ignore pytest-dependency dependencies on tests that are not run or not marked",
    )


def _add_depends_options(parser: pytest.Parser) -> None:
    group = parser.getgroup(GROUP)
    for key, flag in DEPENDS_OPTIONS:
        if key is None:
            group.addoption(flag, action="store_true", default=False,
                            help="pytest-depends' listing, printed before the run")
            continue
        what = key.split("_", 1)[0]
        parser.addini(key, f"pytest-depends: the action for a {what} dependency "
                           "(run, skip or fail)", default="skip")
        group.addoption(flag, choices=("run", "skip", "fail"), default=None,
                        help=f"pytest-depends: the action for a {what} dependency "
                             "(over the ini key)")


def _depends_options_used(config: pytest.Config) -> bool:
    """Whether a pytest-depends option we defined (it is not installed) asks for
    something other than its defaults; only then do its actions need a plugin."""
    for key, flag in DEPENDS_OPTIONS:
        dest = flag.lstrip("-").replace("-", "_")
        if config.getoption(dest, None) not in (None, False, "skip"):
            return True
        if key is not None and str(config.getini(key) or "skip").strip() != "skip":
            return True
    return False


def configure(config: pytest.Config) -> None:
    """Register the foreign markers, block the originals, keep ``depends()`` working."""
    takeover = take_over_early(config)
    takeover.take_over(config)
    # Blocked before its configure, pytest-order registers no marker line:
    # ours says whose marker it is, as its own line did.
    order_line = ORDER_MARKER + (" Provided by pytest-order." if "pytest-order" in takeover.taken
                                 else "")
    for line in (DEPENDENCY_MARKER, DEPENDS_MARKER, order_line):
        config.addinivalue_line("markers", line)
    config.pluginmanager.register(RuntimeDepends(), RuntimeDepends.NAME)
    if "pytest-order" in takeover.taken:
        sorting.register(config)
    if "pytest-depends" in takeover.taken or (
            not depends_defines_options(config.pluginmanager) and _depends_options_used(config)):
        config.pluginmanager.register(depends.DependsActions(config),
                                      depends.DependsActions.NAME)
    config.pluginmanager.register(UnknownNames(), UnknownNames.NAME)


def take_over_early(config: pytest.Config) -> Takeover:
    """Block the originals once their options exist, before any ``pytest_configure`` runs.

    Called from ``pytest_load_initial_conftests`` (and again from our
    configure, for a plugin registered later): a blocked original's
    configure never runs, so it leaves no state behind (pytest-depends'
    manager stack) and cannot fail on its own ini values first.
    """
    found = config.pluginmanager.get_plugin(Takeover.NAME)
    if isinstance(found, Takeover):
        return found
    takeover = Takeover()
    config.pluginmanager.register(takeover, Takeover.NAME)
    takeover.take_over(config)
    return takeover


def _sorting(config: pytest.Config) -> OrderSorting | None:
    """pytest-order's sorter, registered only where pytest-order was taken over."""
    if not config.pluginmanager.has_plugin(SORTING_PLUGIN):
        return None
    return sorting.sorting(config)


def _depends_actions(config: pytest.Config) -> DependsActions | None:
    """pytest-depends' actions, registered only where pytest-depends was taken over."""
    if not config.pluginmanager.has_plugin(DEPENDS_ACTIONS):
        return None
    actions = config.pluginmanager.get_plugin(depends.DependsActions.NAME)
    return actions if isinstance(actions, depends.DependsActions) else None


def ordering_failed(config: pytest.Config) -> str | None:
    """pytest-order's usage error on an xdist worker (``--fail-all-on-failed-ordering``)."""
    plugin = _sorting(config)
    return plugin.error if plugin is not None else None


def fail_checks(config: pytest.Config) -> dict[str, list[str]]:
    """pytest-depends' ``fail`` action: by node id, the prerequisites that must
    pass, else the test fails (the core decides where outcomes are elsewhere)."""
    actions = _depends_actions(config)
    return actions.checks() if actions is not None else {}


def sorted_by_pytest_order(config: pytest.Config, items: list[pytest.Item]) -> bool:
    """Whether pytest-order's own sorter ordered ``items`` (see :mod:`.sorting`)."""
    plugin = _sorting(config)
    return plugin is not None and plugin.sorted(items)


def apply_ordinals(items: list[pytest.Item]) -> list[pytest.Item]:
    """pytest-order's ordinals applied (see :func:`.order.apply_ordinals`)."""
    return order.apply_ordinals(items)


def reader_warnings(found: tuple[ForeignReader, ...]) -> list[tuple[str, str, int, str]]:
    """What the readers let pass with a warning: what pytest-order would have
    warned about where its sorter did not run, arguments the originals ignore:
    (text, file, line, node id)."""
    if not found:
        return []
    return [text for r in found if isinstance(r, common.Reader) for text in r.warnings]


def readers(config: pytest.Config, settings: Settings, markers: Collection[str], *,
            order_sorted: bool = False) -> tuple[ForeignReader, ...]:
    """One reader per foreign plugin whose marker some test carries (``markers``), for one plan.

    A reader with nothing to read would be skipped anyway (see
    :func:`~pytest_dagorder.declaring.declarations.resolve_items`).
    """
    found: list[ForeignReader] = []
    if DEPENDENCY_MARK in markers:
        found.append(dependency.DependencyReader(
            automark=settings.automark_dependency,
            ignore_unknown=settings.ignore_unknown_dependency))
    if DEPENDS_MARK in markers:
        found.append(depends.DependsReader(_depends_actions(config)))
    if ORDER_MARK in markers:
        found.append(order.OrderReader(sorted_by_pytest_order=order_sorted))
    return tuple(found)
