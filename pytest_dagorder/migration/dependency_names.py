"""pytest-dependency's marker, scopes and option owner: what its run-time
``depends()`` support and the option definitions need, without the reader.
"""

from __future__ import annotations

import importlib.util

import pytest

MARK = "dependency"
SCOPES = ("session", "package", "module", "class")
SCOPE_CLS: dict[str, type[pytest.Collector]] = {
    "session": pytest.Session,
    "package": pytest.Package,
    "module": pytest.Module,
    "class": pytest.Class,
}


def dependency_defines_options(pluginmanager: pytest.PytestPluginManager) -> bool:
    """Whether pytest-dependency itself adds ``automark_dependency`` and its flag."""
    return _defines_options(pluginmanager, "dependency", "pytest_dependency")


def depends_defines_options(pluginmanager: pytest.PytestPluginManager) -> bool:
    """Whether pytest-depends itself adds its actions and listings (options and ini keys)."""
    return _defines_options(pluginmanager, "depends", "pytest_depends")


def _defines_options(pluginmanager: pytest.PytestPluginManager, plugin: str, module: str) -> bool:
    """Whether the original's plugin (by its entry-point name) will add its options:
    registered or installed, and not blocked (``-p no:NAME``)."""
    if pluginmanager.is_blocked(plugin):
        return False
    return pluginmanager.has_plugin(plugin) or importlib.util.find_spec(module) is not None


def scope_name(nodeid: str, scope: str) -> str:
    """pytest-dependency's default name of a test in ``scope``."""
    if scope == "module":
        return nodeid.split("::", 1)[-1]
    if scope == "class":
        return nodeid.split("::", 2)[-1]
    return nodeid
