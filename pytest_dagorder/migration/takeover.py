"""Block pytest-dependency, pytest-depends and pytest-order when they are installed too.

Two plugins must never both reorder or skip.  They are blocked in
``pytest_load_initial_conftests``, once their ``pytest_addoption`` has run
(their options and ini keys exist and are read by us) and before any
``pytest_configure``; a plugin registered later (a conftest's
``pytest_plugins``) is blocked as it registers
(:meth:`Takeover.pytest_plugin_registered`), after its configure ran, so
pytest-depends' configure-time state is undone (:class:`DependsManagers`).
A header line says what was taken over.
"""

from __future__ import annotations

from typing import ClassVar

import pytest

from .runtime import depends_manager_fresh, depends_managers

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
#: pytest-order's options: honoured by its own sorter (see :mod:`.sorting`);
#: named in the header as ignored only when that sorter cannot be used.
#: pytest-dependency's and pytest-depends' options are all honoured.
IGNORED_OPTIONS: dict[str, tuple[tuple[str, str], ...]] = {
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
#: Registered when pytest-order's sorter is used (then its options are honoured).
SORTING_PLUGIN = "dagorder-order-sorting"
#: Registered where pytest-depends was taken over (its ``depends`` actions).
DEPENDS_ACTIONS = "dagorder-depends-actions"


class DependsManagers:
    """Undoes what pytest-depends' ``pytest_configure`` did for a session it was blocked in.

    It pushes a manager onto its module-level ``managers`` list and pops it
    in ``pytest_unconfigure``, which never runs once it is blocked: the list
    would grow per in-process session, and a pytest-depends session around
    ours would use our session's manager (INTERNALERROR).  The list and a
    manager's state are read through :func:`.runtime.depends_managers` and
    :func:`.runtime.depends_manager_fresh`; anything else found there is
    left alone.
    """

    def __init__(self) -> None:
        self.managers = depends_managers()
        # Managers that belong to sessions under way (they collected already).
        self.kept = {id(m) for m in self.managers or () if not depends_manager_fresh(m)}

    def undo(self) -> None:
        """Drop the managers pushed for this session (unused: blocked before it collected)."""
        if self.managers is not None:
            self.managers[:] = [m for m in self.managers
                                if id(m) in self.kept or not depends_manager_fresh(m)]


class Takeover:
    """Blocks the originals (idempotent) and names them in the header."""

    NAME: ClassVar[str] = "dagorder-compat"

    def __init__(self) -> None:
        self.taken: dict[str, None] = {}
        self._depends: DependsManagers | None = None

    def pytest_unconfigure(self, config: pytest.Config) -> None:
        if self._depends is not None:
            self._depends.undo()

    def take_over(self, config: pytest.Config) -> None:
        """Block every original that is registered."""
        pm = config.pluginmanager
        for name, plugin in list(pm.list_name_plugin()):
            self._block(pm, name, plugin)

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
                if label == "pytest-depends" and self._depends is None:
                    self._depends = DependsManagers()

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

    def pytest_report_header(self, config: pytest.Config) -> list[str]:
        if not self.taken:
            return []
        lines = [
            f"dagorder: took over from {', '.join(self.taken)}: their markers are "
            "read by pytest-dagorder, their plugins are disabled"
        ]
        honoured = config.pluginmanager.has_plugin(SORTING_PLUGIN)
        ignored = [
            flag
            for label in self.taken
            for dest, flag in IGNORED_OPTIONS.get(label, ())
            if getattr(config.option, dest, None) and not honoured
        ]
        if ignored:
            lines.append(
                f"dagorder: ignored options of the disabled plugins: {', '.join(ignored)}"
            )
        return lines
