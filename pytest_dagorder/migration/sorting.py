"""pytest-order's own sorter, where pytest-order is installed and taken over.

Its order is more than ordinals: scopes (``--order-scope``,
``--order-scope-level``, ``--order-group-scope``), sparse ordinals, marker
prefixes, ``--indulgent-ordering`` and ``--order-after-ff`` (where in the
hook chain it sorts), warnings for what it cannot place, and
``--error-on-failed-ordering`` / ``--fail-all-on-failed-ordering``.  Rather
than re-derive all of it, the sorter of the installed pytest-order makes the
base order, at the place in the hook chain its blocked plugin would have;
the plan then keeps that order and adds the edges it agrees with (see
:class:`~.order.OrderReader`).  Without pytest-order installed,
:func:`~.order.apply_ordinals` orders by ordinals alone.

pytest-order's internals are found by :func:`.runtime.order_sorter`:
``pytest_order.sorter.Sorter(config, items).sort_items()`` and its plugin
module's ``pytest_generate_tests`` (several ordinal markers on one test
become parameters).  Anything else found there means "not usable": the
fallback orders by ordinals.
"""

from __future__ import annotations

from collections.abc import Callable, Generator
from typing import ClassVar

import pytest

from .runtime import order_sorter
from .takeover import SORTING_PLUGIN

#: The options pytest-order's sorter reads (``Settings``), checked before it is used.
_OPTIONS = ("sparse_ordering", "order_dependencies", "order_marker_prefix", "order_scope",
            "order_scope_level", "order_group_scope", "error_on_failed_ordering",
            "fail_all_on_failed_ordering", "indulgent_ordering", "order_after_ff")

#: Where pytest-order puts ``fail_after_cannot_order`` for a test it could not place.
FAIL_FIXTURE = "fail_after_cannot_order"


class OrderSorting:
    """Runs pytest-order's sorter; records whether it did (the plan asks :meth:`sorted`)."""

    NAME: ClassVar[str] = SORTING_PLUGIN

    def __init__(self, sorter: type, generate: Callable[[pytest.Metafunc], None] | None) -> None:
        self._sorter = sorter
        self._generate = generate
        self._sorted: list[pytest.Item] | None = None  # the list it sorted last
        self.error: str | None = None  # --fail-all-on-failed-ordering on an xdist worker

    def sorted(self, items: list[pytest.Item]) -> bool:
        return self._sorted is items

    def sort(self, config: pytest.Config, items: list[pytest.Item]) -> None:
        if not items or not self._has_work(config, items):
            return
        try:
            items[:] = self._sorter(config, items).sort_items()
        except (pytest.UsageError, Warning) as exc:
            # A warning the sorter gives (an order marker it cannot read) is
            # raised here when the warnings filter makes it an error
            # (``filterwarnings = error``): pytest-order alone then ends in an
            # internal error; this run ends as for a usage error, naming the tests.
            message = str(exc) if isinstance(exc, pytest.UsageError) else (
                unreadable_order(exc, items))
            if not hasattr(config, "workerinput"):
                # Serially pytest reports it (exit 4), as with pytest-order.
                raise pytest.UsageError(message) from None
            # An xdist worker cannot stop the run with a usage error (the
            # controller would call it an internal error): the plan reports it.
            self.error = message
        self._sorted = items

    @staticmethod
    def _has_work(config: pytest.Config, items: list[pytest.Item]) -> bool:
        """Whether pytest-order could move anything: an ``order`` or ``dependency``
        marker (``--order-dependencies``), or a marker prefix (cheap to rule
        out on big runs that use none)."""
        if config.getoption("order_marker_prefix", None):
            return True
        return any("order" in kw or "dependency" in kw for kw in (it.keywords for it in items))

    def pytest_generate_tests(self, metafunc: pytest.Metafunc) -> None:
        if self._generate is not None:
            self._generate(metafunc)

    @pytest.fixture(name=FAIL_FIXTURE)
    def fail_after_cannot_order(self) -> None:
        pytest.fail("The test could not be ordered")


class _Default(OrderSorting):
    @pytest.hookimpl(trylast=True)  # after other plugins, as pytest-order by default
    def pytest_collection_modifyitems(self, config: pytest.Config,
                                      items: list[pytest.Item]) -> None:
        self.sort(config, items)


class _Indulgent(OrderSorting):
    @pytest.hookimpl(tryfirst=True)  # --indulgent-ordering: before other plugins
    def pytest_collection_modifyitems(self, config: pytest.Config,
                                      items: list[pytest.Item]) -> None:
        self.sort(config, items)


class _AfterFF(OrderSorting):
    @pytest.hookimpl(wrapper=True, tryfirst=True)  # --order-after-ff: after --ff/--nf
    def pytest_collection_modifyitems(
        self, config: pytest.Config, items: list[pytest.Item]
    ) -> Generator[None, object, object]:
        result = yield
        self.sort(config, items)
        return result


def unreadable_order(warning: Warning, items: list[pytest.Item]) -> str:
    """The message for a warning of pytest-order's sorter that the warnings filter
    made an error: the warning, and the tests whose ``order`` marker it may mean."""
    said = str(warning)
    marked = [it.nodeid for it in items
              if any(repr(arg) in said or str(arg) in said
                     for mark in it.iter_markers("order")
                     for arg in (*mark.args, *mark.kwargs.values()) if isinstance(arg, str))]
    where = f" (an order marker of {', '.join(marked)})" if marked else ""
    return (f"pytest-order could not read an order marker: {said}{where}; the warnings "
            "filter makes its warning an error: give the marker an int, 'first', "
            "'last', before= or after=")


def register(config: pytest.Config) -> OrderSorting | None:
    """Sort as pytest-order would, where it is installed (None: it is not)."""
    found = order_sorter()
    # Its sorter reads its options: they exist only if its pytest_addoption ran.
    if found is None or not all(hasattr(config.option, dest) for dest in _OPTIONS):
        return None
    cls: type[OrderSorting] = _Default
    if config.getoption("indulgent_ordering", False):
        cls = _Indulgent
    elif config.getoption("order_after_ff", False):
        cls = _AfterFF
    plugin = cls(*found)
    config.pluginmanager.register(plugin, OrderSorting.NAME)
    return plugin


def sorting(config: pytest.Config) -> OrderSorting | None:
    plugin = config.pluginmanager.get_plugin(OrderSorting.NAME)
    return plugin if isinstance(plugin, OrderSorting) else None
