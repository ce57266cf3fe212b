"""The sentences a user reads about the ``dag`` fixture's side of a pytest run.

Beside the glue that says them, so the core words nothing of xdist;
tests/test_wording.py pins each text.
"""

from __future__ import annotations


def result_timeout(reader: str, seconds: float) -> str:
    return (f"{reader}: the results of its prerequisites did not arrive from the xdist "
            f"controller within {seconds:g} s")
