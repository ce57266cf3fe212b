"""pytest-timeout's limit of each test whose timer ends the whole process.

pytest-timeout's ``thread`` method ends the process (``os._exit``) when a
test runs past its limit: under xdist the worker crashes, and all the
controller learns is that.  The worker reads each test's limit here, as
pytest-timeout reads it (its ``timeout`` marker, then ``--timeout``, the
``PYTEST_TIMEOUT`` variable and the ini ``timeout``; the method likewise),
without importing it; the controller then names the limit in the
dependents' skip reasons when the crashed test ran that long
(``drivers/distributed/scheduling.py``).
"""

from __future__ import annotations

import os
import signal
from collections.abc import Sequence

import pytest

#: pytest-timeout's marker and the names its plugin is registered under
#: (its entry point; ``-p pytest_timeout``).
TIMEOUT_MARK = "timeout"
PLUGIN_NAMES = ("timeout", "pytest_timeout")
#: The method whose timer ends the process; pytest-timeout's default where
#: there is no SIGALRM.
THREAD = "thread"
DEFAULT_METHOD = "signal" if hasattr(signal, "SIGALRM") else THREAD


def _seconds(value: object) -> float | None:
    """A limit as pytest-timeout takes it (a number or a numeric string; 0: none)."""
    if value is None or value == "":
        return None
    try:
        seconds = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return None  # pytest-timeout itself reports a bad value
    return seconds if seconds > 0 else None


def _ini(config: pytest.Config, name: str) -> object:
    try:
        return config.getini(name)
    except ValueError:  # not registered: pytest-timeout is not loaded
        return None


def _session_settings(config: pytest.Config) -> tuple[float | None, str]:
    """The limit and method every test has unless its marker says otherwise."""
    seconds = _seconds(config.getoption("timeout", None))
    if seconds is None:
        seconds = _seconds(os.environ.get("PYTEST_TIMEOUT"))
    if seconds is None:
        seconds = _seconds(_ini(config, "timeout"))
    method = config.getoption("timeout_method", None) or _ini(config, "timeout_method")
    return seconds, str(method or DEFAULT_METHOD)


def thread_limits(config: pytest.Config, items: Sequence[pytest.Item], *,
                  marked: bool = True) -> list[float | None]:
    """Per item, its pytest-timeout limit in seconds where its method is
    ``thread`` (None: no limit, or one that fails the test instead of ending
    the process); empty where no item has one.  ``marked``: some item may
    have a ``timeout`` marker (False: none is looked up)."""
    if not any(config.pluginmanager.has_plugin(name) for name in PLUGIN_NAMES):
        return []
    seconds, method = _session_settings(config)
    if not marked:
        return [] if seconds is None or method != THREAD else [seconds] * len(items)
    limits: list[float | None] = []
    for item in items:
        mine, how = seconds, method
        marker = item.get_closest_marker(TIMEOUT_MARK)
        if marker is not None:
            given = marker.kwargs.get("timeout", marker.args[0] if marker.args else None)
            if given is not None:
                mine = _seconds(given)
            how = str(marker.kwargs.get("method", marker.args[1] if len(marker.args) > 1
                                        else None) or method)
        limits.append(mine if how == THREAD else None)
    return limits if any(limit is not None for limit in limits) else []
