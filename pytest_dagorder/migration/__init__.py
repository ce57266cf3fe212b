"""Suites written for pytest-dependency, pytest-depends and pytest-order run unedited.

Their markers become edges of the same graph as ``depends_on`` (requires-pass)
and ``run_after`` (ordering only), resolved and validated once after
collection:

* :mod:`.takeover` blocks the original plugins when they are installed too
  (two plugins must never both reorder or skip) and says so in the header;
* one reader per foreign plugin (:mod:`.dependency`, :mod:`.depends`,
  :mod:`.order`) turns its markers into :class:`~pytest_dagorder.glue.declarations.Declared`
  records and touches nothing else;
* :mod:`.runtime` keeps pytest-dependency's run-time ``depends()`` working.
"""

from __future__ import annotations

import pytest

from ..glue.declarations import ForeignReader
from ..glue.settings import GROUP, Settings
from .dependency import DependencyReader, dependency_defines_options
from .depends import DependsActions, DependsReader
from .order import MARK as ORDER_MARK
from .order import OrderReader, apply_ordinals
from .report import UnknownNames
from .runtime import RuntimeDepends
from .sorting import register as register_sorting
from .sorting import sorting
from .takeover import Takeover

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

DEPENDENCY_MARKER = (
    "dependency(name=None, depends=[], scope='module'): pytest-dependency "
    "declaration, read by pytest-dagorder"
)
DEPENDS_MARKER = "depends(on=[], name=None): pytest-depends declaration, read by pytest-dagorder"
ORDER_MARKER = (
    "order(index=None, before=None, after=None): pytest-order declaration, "
    "read by pytest-dagorder."
)


def addoption(parser: pytest.Parser, pluginmanager: pytest.PytestPluginManager) -> None:
    """pytest-dependency's option names, unless pytest-dependency defines them itself."""
    if dependency_defines_options(pluginmanager):
        return
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


def configure(config: pytest.Config) -> None:
    """Register the foreign markers, block the originals, keep ``depends()`` working."""
    takeover = take_over_early(config)
    takeover.take_over(config)
    # Blocked before its configure, pytest-order registers no marker line:
    # ours says whose marker it is, as its own line did.
    order = ORDER_MARKER + (" Provided by pytest-order." if "pytest-order" in takeover.taken
                            else "")
    for line in (DEPENDENCY_MARKER, DEPENDS_MARKER, order):
        config.addinivalue_line("markers", line)
    config.pluginmanager.register(RuntimeDepends(), RuntimeDepends.NAME)
    if "pytest-order" in takeover.taken:
        register_sorting(config)
    if "pytest-depends" in takeover.taken:
        config.pluginmanager.register(DependsActions(config), DependsActions.NAME)
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


def ordering_failed(config: pytest.Config) -> str | None:
    """pytest-order's usage error on an xdist worker (``--fail-all-on-failed-ordering``)."""
    plugin = sorting(config)
    return plugin.error if plugin is not None else None


def fail_checks(config: pytest.Config) -> dict[str, list[str]]:
    """pytest-depends' ``fail`` action: by node id, the prerequisites that must
    pass, else the test fails (the core decides where outcomes are elsewhere)."""
    actions = config.pluginmanager.get_plugin(DependsActions.NAME)
    return actions.checks() if isinstance(actions, DependsActions) else {}


def sorted_by_pytest_order(config: pytest.Config, items: list[pytest.Item]) -> bool:
    """Whether pytest-order's own sorter ordered ``items`` (see :mod:`.sorting`)."""
    plugin = sorting(config)
    return plugin is not None and plugin.sorted(items)


def reader_warnings(found: tuple[ForeignReader, ...]) -> list[tuple[str, str, int]]:
    """What pytest-order would have warned about, where its sorter did not run."""
    return [text for r in found if isinstance(r, OrderReader) for text in r.warnings]


def readers(config: pytest.Config, settings: Settings, *,
            order_sorted: bool = False) -> tuple[ForeignReader, ...]:
    """One reader per foreign plugin, for one plan."""
    actions = config.pluginmanager.get_plugin(DependsActions.NAME)
    return (
        DependencyReader(automark=settings.automark_dependency,
                         ignore_unknown=settings.ignore_unknown_dependency),
        DependsReader(actions if isinstance(actions, DependsActions) else None),
        OrderReader(sorted_by_pytest_order=order_sorted),
    )
