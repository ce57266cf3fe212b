"""The ``dagtester`` fixture (``support.dagtester``) and its modes; the fake controller's
``recorder`` and ``harness`` (``support.xdist_fakes``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Literal

import pytest
from support.dagtester import DAG_MODES, MODES, SETUP, SETUP_KEYWORDS, DagTester, setup_of

if TYPE_CHECKING:
    from support.xdist_fakes import Harness, Recorder

    from pytest_dagorder.planning.facts import Facts


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", f"{DAG_MODES}(*modes): the modes (serial, xdist, xdist4, own) dagtester "
        "runs the test in")
    config.addinivalue_line(
        "markers", f"{SETUP}({', '.join(SETUP_KEYWORDS)}): what every dagtester run of the "
        "test shares")


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "dagtester" in metafunc.fixturenames:
        marker = metafunc.definition.get_closest_marker(DAG_MODES)
        modes = marker.args if marker is not None else MODES
        metafunc.parametrize("dagtester", modes, indirect=True)


@pytest.fixture
def dagtester(pytester: pytest.Pytester, request: pytest.FixtureRequest) -> DagTester:
    return DagTester(pytester, request.param, **setup_of(request.node))


# -- the controller with fake workers (support.xdist_fakes), for the modules that drive it --
# Imported when a test asks: the plugin's modules load in this process only then.


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
