"""Every use of a pytest-xdist internal, one function each (see shims/pytest_internals.py).

Checked against pytest-xdist 3.8 (pyproject.toml allows <4).  Each function
says what it touches, checks that it is still there, and otherwise falls
back as docs/limitations.rst lists: a release that renames one degrades
this plugin, never the pytest run.
"""

from __future__ import annotations

from collections.abc import Sequence

import pytest


def xdist_controller_active(config: pytest.Config) -> bool:
    """Whether xdist's DSession runs this session.

    Asked from our ``pytest_sessionstart``, which runs after every plugin's
    ``pytest_configure``, so after xdist's, which registers DSession as
    "dsession"; should that name change, it is found by its class name.
    """
    pm = config.pluginmanager
    return pm.has_plugin("dsession") or any(
        type(p).__name__ == "DSession" for p in pm.get_plugins())


def xdist_node_count(config: pytest.Config) -> int:
    """How many workers xdist starts (``xdist.workermanage.parse_tx_spec_config``,
    which xdist's own schedulers use; where it is gone, the ``--tx`` specs that
    xdist makes of ``-n`` are counted the same way here)."""
    try:
        from xdist.workermanage import parse_tx_spec_config
    except ImportError:
        count = 0
        for spec in config.getoption("tx", None) or ():
            times, star, _ = str(spec).partition("*")
            count += int(times) if star and times.isdigit() else 1
        return count
    return len(parse_tx_spec_config(config))


def xdist_collection_diff(first: Sequence[str], other: Sequence[str],
                          first_id: str, other_id: str) -> str:
    """xdist's own message for workers that collected different tests (where it
    is gone, a short one)."""
    try:
        from xdist.report import report_collection_diff
    except ImportError:
        return (f"Different tests were collected between {first_id} and {other_id}: "
                f"{len(first)} and {len(other)} tests")
    return str(report_collection_diff(list(first), list(other), first_id, other_id))


#: DSession's failure counter behind ``--maxfail`` / ``-x``.
DSESSION_FAILURES = "_handlefailures"


def count_xdist_failure(config: pytest.Config, report: pytest.TestReport) -> bool:
    """Count a failure the controller reports itself towards ``--maxfail`` / ``-x``.

    xdist counts failures only for reports that came from a worker
    (``DSession.worker_testreport`` calls ``_handlefailures``); no hook does
    it.  False where it is gone: such a failure then does not count (the run
    goes on past ``--maxfail``).
    """
    dsession = config.pluginmanager.get_plugin("dsession")
    handle = getattr(dsession, DSESSION_FAILURES, None)
    if not callable(handle):
        return False
    handle(report)
    return True


def hand_over_scheduler(config: pytest.Config, current: object, chosen: object) -> bool:
    """Let DSession call ``chosen`` directly where it holds ``current`` (``DSession.sched``).

    The scheduler a ``pytest_xdist_make_scheduler`` returns is chosen
    before any worker has collected; a stand-in that decides later hands
    every call on.  Swapped in place, the chosen one is what xdist sees
    from then on (its ``-v`` line "scheduling tests via ...", the ``sched``
    of ``pytest_handlecrashitem``).  False where the attribute is gone or
    holds something else: the stand-in then keeps handing calls on.
    """
    dsession = config.pluginmanager.get_plugin("dsession")
    if dsession is None or getattr(dsession, "sched", None) is not current:
        return False
    dsession.sched = chosen
    return True


def queued_indices(config: pytest.Config) -> list[int] | None:
    """The indices an xdist worker holds beyond the one it runs next, in order
    (its ``WorkerInteractor.torun`` queue; the shutdown mark left out).

    No public API tells whether more work is queued.  None where that queue
    is not found (another release): the caller then assumes nothing is.
    """
    interactor = next((p for p in config.pluginmanager.get_plugins()
                       if type(p).__name__ == "WorkerInteractor"), None)
    lock = getattr(getattr(interactor, "torun", None), "lock", None)
    if lock is None:
        return None
    with lock() as items:
        return [i for i in items if type(i) is int]
