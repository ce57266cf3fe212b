"""Fixtures of the demo suite.  Nothing here changes pytest's options."""

from __future__ import annotations

import os
from collections.abc import Iterator
from http.server import ThreadingHTTPServer

import pytest
from bank import Bank
from bank_http import BankClient, serve

#: Where the shared bank listens; set by the process that starts the session.
BANK_URL = "DAGORDER_DEMO_BANK_URL"
SERVER = pytest.StashKey[ThreadingHTTPServer]()


def pytest_configure(config: pytest.Config) -> None:
    # One shared bank for the whole session, served by the process that
    # starts it (serial run or xdist controller).  xdist starts its workers
    # after this hook, so they inherit the URL from the environment.
    if hasattr(config, "workerinput") or BANK_URL in os.environ:
        return
    server, url = serve(Bank(latency=0.002))
    os.environ[BANK_URL] = url
    config.stash[SERVER] = server


def pytest_unconfigure(config: pytest.Config) -> None:
    server = config.stash.get(SERVER, None)
    if server is not None:
        server.shutdown()
        server.server_close()
        del os.environ[BANK_URL]


@pytest.fixture(scope="session")
def bank_service() -> BankClient:
    """The shared bank (see bank_http.py): the same accounts on every worker."""
    return BankClient(os.environ[BANK_URL])


@pytest.fixture(scope="session")
def bank() -> Iterator[Bank]:
    """The service under test, one per test process (so one per xdist worker).

    A few milliseconds per call stand in for network round trips.  At the end
    of the session the books must balance, whatever ran in this process.
    """
    service = Bank(latency=0.002)
    yield service
    assert service.total_balance() == service.deposited - service.withdrawn
