"""What a test costs the learning pass in a child forked from a collected
session, as its probe server forks one for each alone check: an empty child,
then the named tests one per child with pytest's report of a failure, then
with ``--tb=no``'s (what the probe children use).  A pytest plugin; it runs
no test in the session itself.

    cd SUITE && PYTHONPATH=CHECKOUT/benchmarks SUITE_VENV/bin/python -m pytest \\
        -p fork_cost -p no:randomly -p no:cacheprovider -p no:dagorder ARGS

``FORK_COST_TEST`` names the test function to run (default ``test_edgeCrossing``,
bpypolyskel's test that fails alone), ``FORK_COST_CHILDREN`` how many children
a case forks (default 20).  Block every plugin that would skip the test for
not having seen its prerequisites (``-p no:dagorder -p no:dependency``): the
probe's alone check lets it run.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable

import pytest


def _measure(label: str, body: Callable[[int], None], children: int) -> None:
    began, before = time.monotonic(), os.times()
    for k in range(children):
        pid = os.fork()
        if pid == 0:
            try:
                body(k)
            finally:
                os._exit(0)
        os.waitpid(pid, 0)
    after = os.times()
    cpu = (after.children_user + after.children_system
           - before.children_user - before.children_system)
    print(f"{label}: {(time.monotonic() - began) / children * 1000:.1f} ms wall, "
          f"{cpu / children * 1000:.1f} ms CPU a child; load {os.getloadavg()[0]:.1f}",
          file=sys.stderr)


@pytest.hookimpl(tryfirst=True)
def pytest_runtestloop(session: pytest.Session) -> bool:
    name = os.environ.get("FORK_COST_TEST", "test_edgeCrossing")
    children = int(os.environ.get("FORK_COST_CHILDREN", "20"))
    items = [it for it in session.items if it.name == name][:children]
    if not items:
        raise pytest.UsageError(f"fork_cost: no collected test is named {name!r}")

    def run(style: str) -> Callable[[int], None]:
        def body(k: int) -> None:
            item = items[k % len(items)]
            item.config.option.tbstyle = style
            item.config.hook.pytest_runtest_protocol(item=item, nextitem=None)
        return body

    for _ in range(2):
        _measure("empty child", lambda k: None, children)
        _measure(f"{name}, --tb=auto", run("auto"), children)
        _measure(f"{name}, --tb=no", run("no"), children)
    return True
