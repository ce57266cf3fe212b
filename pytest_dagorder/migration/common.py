"""What the three readers share: argument checks, lookups, per-index tables."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

import pytest

from ..declaring.declarations import Index, Problem


def where(mark: str, item: pytest.Item) -> str:
    return f"@pytest.mark.{mark} on {item.nodeid}"


def names(value: object) -> list[str] | None:
    """A list of non-empty strings from a list/tuple (or a lone string), else None."""
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, (list, tuple)):
        return None
    if not all(isinstance(v, str) and v.strip() for v in value):
        return None
    return [v.strip() for v in value]


def unknown(index: Index, item: pytest.Item, mark: str, target: str) -> Problem:
    hint = index.suggest(item, target)
    extra = f"; did you mean {', '.join(map(repr, hint))}?" if hint else ""
    return Problem(item.nodeid, f"{where(mark, item)}: target {target!r} matches no "
                   f"collected test{extra}")


def drop_self(hits: Iterable[int], i: int) -> list[int]:
    """A target naming a group the test belongs to means the others of the group."""
    hits = list(hits)
    return hits if hits == [i] else [j for j in hits if j != i]


@dataclass
class Tables:
    """What a reader derived from one :class:`Index` (rebuilt when the index changes)."""

    index: Index
    pos: dict[int, int]  # id(item) -> index in index.items
    names: dict[tuple[str, str, str], list[int]] = field(default_factory=dict)
    registered: set[int] = field(default_factory=set)
    after: dict[int, list[int]] = field(default_factory=dict)
    problems: dict[int, list[Problem]] = field(default_factory=dict)
    unknown: dict[int, list[str]] = field(default_factory=dict)


class Reader:
    """Base of the readers: the per-index tables, built once per index."""

    #: See ForeignReader: by default a cycle is an error, as in pytest-dagorder.
    skips_cycles = False

    def __init__(self) -> None:
        self._tables: Tables | None = None
        #: What the original plugin lets pass and this reader ignores with a
        #: warning, for the planner to emit: (text, file, line, node id).
        self.warnings: dict[tuple[str, str, int, str], None] = {}

    def warn(self, item: pytest.Item, text: str) -> None:
        """A warning placed at the test (its file and line), not in this plugin."""
        path, line, _ = item.location
        self.warnings[text, path, (line or 0) + 1, item.nodeid] = None

    def tables(self, index: Index) -> Tables:
        if self._tables is None or self._tables.index is not index:
            t = Tables(index, {id(it): k for k, it in enumerate(index.items)})
            self.build(t)
            self._tables = t
        return self._tables

    def build(self, t: Tables) -> None:
        """Fill ``t`` from every item of ``t.index``."""
