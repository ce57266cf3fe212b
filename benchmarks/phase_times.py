"""Wall time of the plugin's start-up phases, measured inside each process.

A pytest plugin, not a script: put this directory on ``PYTHONPATH`` and load
it with ``-p phase_times``.  At the end of the session every process (the
serial one, the xdist controller, each worker) writes one line to stderr:
milliseconds spent in the planner's phases (marker census and pytest-order
ordinals, resolving declarations, the graph, the stable order, resources,
item locations), a worker's payload, and the controller's start (decoding
the plan, recorded durations, the graph, affinity groups, the core).
Timers wrap the plugin's functions from outside; nothing in the plugin knows.

Run (a 20,000-test suite: ``python benchmarks/bench_scale.py --rounds 1
--modes=serial --keep DIR`` writes one to ``DIR/dag``)::

    PYTHONPATH=benchmarks python -m pytest -q -p phase_times --collect-only DIR/dag
    PYTHONPATH=benchmarks python -m pytest -q -p phase_times -n 2 DIR/dag
"""

from __future__ import annotations

import functools
import os
import sys
import time
from collections.abc import Callable
from typing import Any

import pytest

_SPENT: dict[str, float] = {}


def _timed(label: str, fn: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(fn)
    def timed(*args: Any, **kwargs: Any) -> Any:
        start = time.perf_counter()
        try:
            return fn(*args, **kwargs)
        finally:
            _SPENT[label] = _SPENT.get(label, 0.0) + time.perf_counter() - start
    return timed


def _wrap(owner: Any, name: str, label: str) -> None:
    raw = vars(owner)[name] if isinstance(owner, type) else getattr(owner, name)
    if isinstance(raw, classmethod):
        setattr(owner, name, classmethod(_timed(label, raw.__func__)))
    else:
        setattr(owner, name, _timed(label, raw))


def pytest_configure(config: pytest.Config) -> None:
    from pytest_dagorder.core import graph
    from pytest_dagorder.deciding import decide
    from pytest_dagorder.declaring import declarations
    from pytest_dagorder.drivers.distributed import scheduling, wire
    from pytest_dagorder.drivers.distributed import worker_facts as payload
    from pytest_dagorder.planning import plan as planning

    for name in ("collect_plan", "make_plan", "resolve_items", "read_needs",
                 "fill_locations", "_collection_order"):
        _wrap(planning, name, name)
    _wrap(declarations.Index, "__init__", "Index")
    _wrap(graph.Graph, "build", "Graph.build")
    _wrap(graph.Graph, "of_positions", "Graph.of_positions")
    _wrap(graph.Graph, "permuted", "Graph.permuted")
    _wrap(payload, "make_facts", "worker facts")
    _wrap(wire, "encode", "wire.encode")
    _wrap(wire, "decode", "wire.decode")
    _wrap(scheduling.DependencyScheduling, "_announce", "controller start")
    _wrap(decide, "affinity_groups", "affinity_groups")
    _wrap(scheduling, "decide", "decide")


def pytest_unconfigure(config: pytest.Config) -> None:
    role = os.environ.get("PYTEST_XDIST_WORKER") or (
        "controller" if config.pluginmanager.has_plugin("dsession") else "main")
    parts = ", ".join(f"{label} {secs * 1000:.0f}" for label, secs in _SPENT.items())
    sys.stderr.write(f"phase ms, {role}: {parts}\n")
