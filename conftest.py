"""Root conftest: the end-to-end tests drive pytest through pytester; an inner run
goes in-process unless the test gives a reason for a process of its own:
``tests/helpers.py:runpytest``."""

import os
import sys

import pytest

pytest_plugins = ["pytester"]

#: What xdist puts into a worker's environment.  When this suite itself runs
#: under ``-n``, a pytest run a test starts (pytester) would inherit them and
#: its controller would take itself for a worker.
XDIST_WORKER_VARIABLES = ("PYTEST_XDIST_WORKER", "PYTEST_XDIST_WORKER_COUNT",
                          "PYTEST_XDIST_TESTRUNUID")


#: Marks a test whose inner pytest runs must load every installed plugin (the
#: takeover of pytest-dependency / pytest-depends / pytest-order, reruns).
AUTOLOAD = "autoload"


def pytest_configure(config: pytest.Config) -> None:
    # Output capturing is off while plugins configure: this is the real stderr.
    # (``tests/helpers.py:bounded`` writes a hung inner run's tracebacks there.)
    os.environ["DAGORDER_SUITE_HANG_REPORT_FD"] = str(os.dup(sys.stderr.fileno()))
    config.addinivalue_line(
        "markers", f"{AUTOLOAD}: inner pytest runs load every installed plugin (entry points)")


@pytest.fixture(autouse=True)
def _outside_any_xdist_worker(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in XDIST_WORKER_VARIABLES:
        monkeypatch.delenv(name, raising=False)


@pytest.fixture(autouse=True)
def _inner_runs_load_only_what_they_name(request: pytest.FixtureRequest,
                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """Inner runs load no installed plugin unless the test is marked ``autoload``.

    Importing every installed plugin (hypothesis, the migrating plugins and
    what they import) costs an inner run several times what the run itself
    does; ``tests/helpers.py:base_args`` names the plugin (``-p dagorder``)
    instead, and xdist comes with it (``plugin.pytest_load_initial_conftests``).
    """
    if request.node.get_closest_marker(AUTOLOAD) is None:
        monkeypatch.setenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")
    else:
        monkeypatch.delenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", raising=False)
