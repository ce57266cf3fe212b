"""Root conftest: the end-to-end tests drive pytest through pytester, each inner run
in a subprocess of its own (``runpytest_subprocess``)."""

import pytest

pytest_plugins = ["pytester"]

#: What xdist puts into a worker's environment.  When this suite itself runs
#: under ``-n``, a pytest run a test starts (pytester) would inherit them and
#: its controller would take itself for a worker.
XDIST_WORKER_VARIABLES = ("PYTEST_XDIST_WORKER", "PYTEST_XDIST_WORKER_COUNT",
                          "PYTEST_XDIST_TESTRUNUID")


@pytest.fixture(autouse=True)
def _outside_any_xdist_worker(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in XDIST_WORKER_VARIABLES:
        monkeypatch.delenv(name, raising=False)
