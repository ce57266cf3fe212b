"""The ``dagtester`` fixture (``support.dagtester``) and its modes."""

from __future__ import annotations

import pytest
from support.dagtester import DAG_MODES, MODES, SETUP, SETUP_KEYWORDS, DagTester, setup_of


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
