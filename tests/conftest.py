"""The ``dagtester`` fixture (``support.dagtester``) and its modes."""

from __future__ import annotations

import pytest
from helpers import write_ini
from support.dagtester import MODES, DagTester

#: Marks a test that runs in only some modes: ``@pytest.mark.dag_modes("serial")``.
DAG_MODES = "dag_modes"


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", f"{DAG_MODES}(*modes): the modes (serial, xdist) dagtester runs the test in")


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "dagtester" in metafunc.fixturenames:
        marker = metafunc.definition.get_closest_marker(DAG_MODES)
        modes = marker.args if marker is not None else MODES
        metafunc.parametrize("dagtester", modes, indirect=True)


@pytest.fixture
def dagtester(pytester: pytest.Pytester, request: pytest.FixtureRequest) -> DagTester:
    write_ini(pytester)
    return DagTester(pytester, request.param)
