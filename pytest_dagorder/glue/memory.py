"""Bulk work without the cyclic garbage collector's passes.

The plugin builds its plan, and on an xdist controller its core, once per
process right after collection: tens of thousands of small objects, nearly
all acyclic (reference counting frees them) and most of them kept for the
whole run.  Every allocation counts towards CPython's collection thresholds,
and a pass over the oldest generation walks every tracked object of the
process, the collected session included: on a large suite the plan alone
set off full passes that plain pytest never makes (docs/performance.md).
Pausing the
collector for that work, and resuming it afterwards without forcing a
collection, removes those passes and changes nothing else.

The switch is process-wide (execnet's receiver thread shares it), so it is
the pytest side's policy, not the core's: the core only schedules.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def collector_paused() -> Iterator[None]:
    """No cyclic garbage collection inside; as before afterwards (nesting is fine)."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()
