"""The sentences a user reads about the xdist driver: its header, its refusal,
its fallback.

Beside the driver that says them, so the core words nothing of xdist;
tests/test_wording.py pins each text.
"""

from __future__ import annotations


def dist_refused(dist: str, declared: str) -> str:
    """Why ``--dist each`` (or another mode not scheduled as a DAG) cannot run declarations."""
    return (f"--dist {dist} cannot honour depends_on/run_after declarations "
            f"({declared} declares one): it runs "
            "every test once on every worker, while a dependency graph runs each test "
            "once, after its prerequisites; use --dist load, loadgroup, loadfile, "
            "loadscope or worksteal, or run with -p no:dagorder for plain xdist")


def plain_xdist(missing: str) -> str:
    """The one line a run shows when an internal the ``-n`` takeover needs is gone."""
    return (f"pytest-dagorder: {missing} not found (a pytest or pluggy release this plugin "
            "does not know): -n runs use plain xdist scheduling, dependencies are not "
            "enforced; run without -n, or upgrade pytest-dagorder")


def past_time_limit(seconds: float) -> str:
    """Why a test crashed its worker: pytest-timeout's thread method ended the process."""
    return (f"past its pytest-timeout limit of {seconds:g} s, "
            "whose thread method ends the process")
