"""The sentences a user reads about the ``dag`` fixture's side of a pytest run,
and the xdist run's header (made where every decision is, ``decide.py``).

Beside the glue that says them, so the core words nothing of xdist;
tests/test_wording.py pins each text.
"""

from __future__ import annotations

import os

from ..core.wording import plural


def result_timeout(reader: str, seconds: float) -> str:
    return (f"{reader}: the results of its prerequisites did not arrive from the xdist "
            f"controller within {seconds:g} s")


def edges_file_line(path: str, found: bool, edges: int, resources: int, stale: int) -> str:
    """What the edges file (``--dag-edges``) added to the run, for its header."""
    if not found:
        return f"dagorder: no edges file at {path} yet (--dag-find-missing writes one)"
    note = (f"dagorder: {edges} edge{'s' * (edges != 1)} and {resources} "
            f"resource{'s' * (resources != 1)} from {os.path.basename(path)}")
    if stale:
        note += f" ({stale} entr{'ies' if stale != 1 else 'y'} naming tests not collected here)"
    return note


def xdist_header(tests: int, edges: int, chain: int, affinity: str, groups: int,
                 recorded: int, nodes: int) -> str:
    """``recorded`` of the graph's ``nodes`` have a recorded duration (0: ranked by counts)."""
    ranked = (f"recorded durations of {recorded}/{plural(nodes, 'test')}" if recorded
              else "test counts")
    return (f"dagorder: {plural(tests, 'test')}, "
            f"{plural(edges, 'dependency', 'dependencies')}, longest chain {chain}; "
            f"xdist scheduling, affinity {affinity} ({plural(groups, 'group')}); "
            f"critical path by {ranked}")
