"""What a test uses while it runs: named resources, or the whole machine.

``@pytest.mark.dag_resource("postgres", "broker")`` names resources a test
uses; at most ``--dag-limit NAME=N`` tests naming the same resource run at
once across all workers (1 when no limit is given).
``@pytest.mark.dag_exclusive`` marks a test that must run alone: nothing
else runs on any worker meanwhile.  Both are read on every item (a suite
needs no dependency declarations to use them); the scheduler core enforces
them, so this module only reads and checks the markers.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import pytest

from ..options.markers import EXCLUSIVE, RESOURCE
from .declarations import Problem


@dataclass(frozen=True)
class Needs:
    """One test's resources (in first-named order) and whether it runs alone."""

    resources: tuple[str, ...] = ()
    exclusive: bool = False


NONE = Needs()


def read_needs(items: Sequence[pytest.Item]) -> tuple[list[Needs], list[Problem]]:
    """The needs of each item, and every malformed marker (reported, nothing runs)."""
    out: list[Needs] = []
    problems: list[Problem] = []
    for item in items:
        keywords = item.keywords  # markers of the item and its parents, by name
        if RESOURCE not in keywords and EXCLUSIVE not in keywords:
            out.append(NONE)  # the common case, without walking the markers
            continue
        names: dict[str, None] = {}
        for mark in item.iter_markers(RESOURCE):
            where = f"@pytest.mark.{RESOURCE} on {item.nodeid}"
            if mark.kwargs or not mark.args:
                problems.append(Problem(item.nodeid, (
                    f"{where}: name one or more resources as strings, e.g. "
                    f"@pytest.mark.{RESOURCE}('postgres')")))
            for arg in mark.args:
                if isinstance(arg, str) and arg.strip():
                    names[arg.strip()] = None
                else:
                    problems.append(Problem(item.nodeid, (
                        f"{where}: {arg!r} is not a resource name; pass non-empty strings")))
        exclusive = False
        for mark in item.iter_markers(EXCLUSIVE):
            exclusive = True
            if mark.args or mark.kwargs:
                problems.append(Problem(item.nodeid, (
                    f"@pytest.mark.{EXCLUSIVE} on {item.nodeid} takes no arguments; "
                    f"use @pytest.mark.{RESOURCE}(...) to share a limited resource")))
        out.append(Needs(tuple(names), exclusive) if names or exclusive else NONE)
    return out, problems


def resources_in_use(needs: Sequence[Sequence[str]]) -> list[str]:
    """Every resource some test names, in first-named order."""
    return list(dict.fromkeys(r for rs in needs for r in rs))


def unused_limits(limits: Mapping[str, int], needs: Sequence[Sequence[str]]) -> list[str]:
    """Names given a limit that no test uses (a typo, most likely), in the given order."""
    used = {r for rs in needs for r in rs}
    return [name for name in limits if name not in used]
