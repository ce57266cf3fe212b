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
    if pluginmanager.is_blocked("dependency"):
        return False
    return (
        pluginmanager.has_plugin("dependency")
        or importlib.util.find_spec("pytest_dependency") is not None
    )


def depends_defines_options(pluginmanager: pytest.PytestPluginManager) -> bool:
    """Whether pytest-depends itself adds its actions and listings (options and ini keys)."""
    if pluginmanager.is_blocked("depends"):
        return False
    return (
        pluginmanager.has_plugin("depends")
        or importlib.util.find_spec("pytest_depends") is not None
    )


def scope_name(nodeid: str, scope: str) -> str:
    """pytest-dependency's default name of a test in ``scope``."""
    if scope == "module":
        return nodeid.split("::", 1)[-1]
    if scope == "class":
        return nodeid.split("::", 2)[-1]
    return nodeid
