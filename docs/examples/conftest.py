"""Fixtures of the demo suite.  Nothing here changes pytest's options."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from bank import Bank


@pytest.fixture(scope="session")
def bank() -> Iterator[Bank]:
    """The service under test, one per test process (so one per xdist worker).

    A few milliseconds per call stand in for network round trips.  At the end
    of the session the books must balance, whatever ran in this process.
    """
    service = Bank(latency=0.002)
    yield service
    assert service.total_balance() == service.deposited - service.withdrawn
