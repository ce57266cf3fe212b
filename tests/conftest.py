"""The ``dagtester`` fixture (``support.dagtester``) and its modes; the fake controller's
``recorder`` and ``harness`` (``support.xdist_fakes``)."""

from __future__ import annotations

import ast
import functools
import importlib
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Literal

import pytest
from helpers import import_the_plugin
from support.dagtester import DAG_MODES, MODES, SETUP, SETUP_KEYWORDS, DagTester, setup_of

if TYPE_CHECKING:
    from support.xdist_fakes import Harness, Recorder

    from pytest_dagorder.planning.facts import Facts

import_the_plugin()


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", f"{DAG_MODES}(*modes): the modes (serial, xdist, xdist4, own) dagtester "
        "runs the test in")
    config.addinivalue_line(
        "markers", f"{SETUP}({', '.join(SETUP_KEYWORDS)}): what every dagtester run of the "
        "test shares")
    config.addinivalue_line(
        "markers", f"{CORE}: set by this conftest, never by hand: the test starts no pytest "
        "run and its module imports only the plugin's rooms that import neither pytest nor "
        "xdist (.ci/run's lowest-versions pass leaves these out)")


#: The marker of the tests the versions of pytest, pluggy, xdist and execnet
#: cannot change: :func:`pytest_collection_modifyitems` sets it.
CORE = "core"
#: The plugin's rooms that import neither pytest nor xdist (tests/test_layers.py checks).
PURE_ROOMS = ("core", "runners", "render")


@functools.cache
def imports_only_pure_rooms(path: Path) -> bool:
    """Whether every import of the plugin in the module at ``path`` (anywhere in
    it, module level or in a function) is of a pure room (:data:`PURE_ROOMS`),
    and it imports no ``subprocess`` (which could start a pytest run); a name
    imported from the package itself counts by the module it is defined in."""
    def pure(module: str) -> bool:
        parts = module.split(".")
        if parts[0] == "subprocess":
            return False
        return parts[0] != "pytest_dagorder" or (len(parts) > 1 and parts[1] in PURE_ROOMS)

    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            if not all(pure(alias.name) for alias in node.names):
                return False
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            if node.module != "pytest_dagorder":
                if not pure(node.module):
                    return False
                continue
            package = importlib.import_module("pytest_dagorder")
            for alias in node.names:
                defined_in = getattr(getattr(package, alias.name, None), "__module__", "")
                if not defined_in.startswith("pytest_dagorder.") or not pure(defined_in):
                    return False
    return True


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark :data:`CORE` the tests that request no ``pytester`` (so start no
    pytest run through it) in modules that import only the pure rooms and no
    ``subprocess``: what they exercise imports neither pytest nor xdist, so
    the versions of those cannot change their outcome."""
    for item in items:
        if ("pytester" not in getattr(item, "fixturenames", ())
                and imports_only_pure_rooms(item.path)):
            item.add_marker(CORE)


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "dagtester" in metafunc.fixturenames:
        marker = metafunc.definition.get_closest_marker(DAG_MODES)
        modes = marker.args if marker is not None else MODES
        metafunc.parametrize("dagtester", modes, indirect=True)


@pytest.fixture
def dagtester(pytester: pytest.Pytester, request: pytest.FixtureRequest) -> DagTester:
    return DagTester(pytester, request.param, **setup_of(request.node))


# -- the controller with fake workers (support.xdist_fakes), for the modules that drive it --
# support.xdist_fakes is imported when a test asks for it.


@pytest.fixture
def recorder() -> Recorder:
    """What the fake controller logged and reported."""
    from support.xdist_fakes import Recorder

    return Recorder()


@pytest.fixture
def harness(pytester: pytest.Pytester, recorder: Recorder) -> Callable[..., Harness]:
    """A factory: ``harness(facts, *args, nodes=2, policy="skip")``."""
    from support.xdist_fakes import Harness, make_config

    def make(facts: Facts, *args: str, nodes: int = 2,
             policy: Literal["skip", "stop", "run"] = "skip") -> Harness:
        config = make_config(pytester, recorder, f"--dag-on-failure={policy}", *args,
                             nodes=nodes)
        return Harness(config, recorder, facts, policy=policy)

    return make
