"""Which tests ``--lf`` re-runs because a prerequisite kept them from running.

pytest's last-failed set forgets a skipped test; the plugin keeps a test
skipped for a prerequisite that did not pass in that set
(:func:`~.internals.keep_in_lastfailed`), so that pytest's own ``--lf``
selects it again.  This module remembers which entries of the set are such
tests, under its own cache key, so that the next ``--lf`` can say how many
of the tests it re-runs were blocked rather than failed.  Written at
session end by the process that saw every report (the serial runner, the
xdist controller); read by the planner (serially, on each xdist worker).
Without a cache (``-p no:cacheprovider``) nothing is remembered.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence

import pytest

CACHE_KEY = "dagorder/blocked"


def blocked_last_time(config: pytest.Config) -> frozenset[str]:
    """Node ids the last runs skipped for a prerequisite and have not settled since."""
    cache = getattr(config, "cache", None)
    if cache is None:
        return frozenset()
    saved = cache.get(CACHE_KEY, None)
    if not isinstance(saved, list):
        return frozenset()
    return frozenset(nid for nid in saved if isinstance(nid, str))


def remember_blocked(config: pytest.Config, blocked: Sequence[str],
                     settled: Collection[str]) -> None:
    """Store ``blocked`` (skipped this run for a prerequisite), plus those stored
    before that this run did not settle (``settled``: the tests of this run that
    ended one way or another), in the order they came."""
    cache = getattr(config, "cache", None)
    if cache is None:
        return
    saved = cache.get(CACHE_KEY, None)
    kept = [nid for nid in saved if isinstance(nid, str) and nid not in settled] if isinstance(
        saved, list) else []
    now = list(dict.fromkeys([*kept, *blocked]))
    if now != saved and (now or saved is not None):
        cache.set(CACHE_KEY, now)
