"""Tier 1: pacing's pure helpers (how much a worker is handed, how far behind the controller is)."""

from __future__ import annotations

from pytest_dagorder.pacing import Lag, Pacing


def test_lag_is_measured_from_the_least_gap_seen_per_worker() -> None:
    """A worker on a machine whose clock runs 100 s ahead: its gaps are all
    about -100 s, and only what one exceeds the least by is lag."""
    lag = Lag(cap=5.0)
    assert lag.observe("gw0", now=1000.0, stamp=1100.0) == 0.0
    assert lag.observe("gw1", now=1000.0, stamp=999.99) == 0.0
    assert lag.observe("gw0", now=1001.5, stamp=1101.0) == 0.5
    assert abs(lag.observe("gw1", now=1002.0, stamp=1001.49) - 0.5) < 1e-9
    # A smaller gap is the new baseline: no lag, and later gaps count from it.
    assert lag.observe("gw0", now=1003.0, stamp=1103.01) == 0.0
    assert abs(lag.observe("gw0", now=1004.0, stamp=1103.51) - 0.5) < 1e-9


def test_lag_is_capped_and_forgotten_with_its_worker() -> None:
    lag = Lag(cap=2.0)
    lag.observe("gw0", now=10.0, stamp=10.0)
    # A clock stepped back by an hour on the worker: capped, not 3,600 s.
    assert lag.observe("gw0", now=11.0, stamp=11.0 - 3600) == 2.0
    lag.forget("gw0")
    assert lag.observe("gw0", now=12.0, stamp=8.0) == 0.0  # a replacement starts afresh


def test_pacing_batches_fast_tasks_by_time_and_cap() -> None:
    pace = Pacing(fast=0.02, seconds=0.5, cap=1000, initial=0.02)
    assert not pace.is_fast and pace.batch() == 1
    changes = [pace.record(0.001) for _ in range(30)]
    assert changes.count(True) == 1 and pace.is_fast
    assert 400 <= pace.batch() <= 500
    for _ in range(60):
        pace.record(0.0)
    assert pace.batch() == 1000  # the cap, however fast
