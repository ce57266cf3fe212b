"""Test durations recorded in pytest's cache, for critical-path priorities.

A run with the DAG scheduler records how long each test it ran took (setup,
call and teardown together) under one cache key; the next run under xdist
orders ready tests by the longest remaining path in *seconds* instead of in
tests.  That is what shortens the makespan of uneven suites: with counts
only, a chain of two slow tests ranks below a chain of three quick ones.

Everything here degrades to "nothing known": no cache (``-p
no:cacheprovider``), a cache entry that is not what we wrote, or
``--dag-ignore-durations``.  Tests without a record get the mean of the
known ones (see :class:`~pytest_dagorder.graph.Graph`).
"""

from __future__ import annotations

from collections.abc import Mapping

import pytest

from .settings import settings_of

CACHE_KEY = "dagorder/durations"


def load(config: pytest.Config) -> dict[str, float]:
    """Recorded seconds per node id; empty if there are none or they are not to be used."""
    cache = getattr(config, "cache", None)
    if cache is None or settings_of(config).ignore_durations:
        return {}
    return _sound(cache.get(CACHE_KEY, None))


def save(config: pytest.Config, measured: Mapping[str, float]) -> None:
    """Merge ``measured`` into the record (tests not run this time keep theirs)."""
    cache = getattr(config, "cache", None)
    if cache is None or not measured:
        return
    record = _sound(cache.get(CACHE_KEY, None))
    # Rounded to 0.1 ms: finer is noise, and the file stays small for big suites.
    record.update((k, round(v, 4)) for k, v in measured.items())
    cache.set(CACHE_KEY, record)


def _sound(raw: object) -> dict[str, float]:
    """The usable part of a cache entry: a hand-edited one must not break the run."""
    if not isinstance(raw, dict):
        return {}
    # Exact types (JSON gives no subclasses; bool is not a duration), and a
    # range test that NaN, infinity and an int too big for a float fail: no
    # call per entry but float().
    return {
        k: float(v)
        for k, v in raw.items()
        if type(k) is str and type(v) in _NUMBERS and 0 <= v < _LONGEST
    }


_NUMBERS = (int, float)
_LONGEST = 1e12  # seconds: longer is no test's duration
