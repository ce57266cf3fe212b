"""pytest-order's ``@pytest.mark.order(index, before=, after=)``.

``before``/``after`` are ordering-only edges; ordinals reorder the
collected items stably (:func:`apply_ordinals`) before the plan is made, so
an ordinal never beats an edge.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import pytest

from ..declaring.declarations import Declared, Index, Problem
from . import ORDER_MARK as MARK
from .common import Reader, Tables, names, unknown, where

# pytest-order's ordinal words; negative ones count from the end.
_WORDS = ("first", "second", "third", "fourth", "fifth", "sixth", "seventh", "eighth")
ORDINAL_WORDS: dict[str, int] = {
    **{w: k for k, w in enumerate(_WORDS)},
    "last": -1,
    **{f"{w}_to_last": -(k + 1) for k, w in enumerate(_WORDS) if k},
}
_INDEX_KEYS = ("index", "after", "before")


class OrderReader(Reader):
    """``@pytest.mark.order``: ``before``/``after`` as ordering-only edges."""

    marker = MARK

    def __init__(self, *, sorted_by_pytest_order: bool = False) -> None:
        super().__init__()
        #: pytest-order's own sorter made the order (see :mod:`.sorting`): it
        #: warned about what it could not place, and an edge it did not honour
        #: (unknown target, cycle, another scope) is dropped, as it dropped it.
        self.trusted = sorted_by_pytest_order
        # Without that sorter, its warnings (an unknown target, a bad ordinal)
        # are the planner's to give: see Reader.warnings.

    def build(self, t: Tables) -> None:
        index = t.index
        pos: dict[int, int] = {}
        if self.trusted and index.items:
            pos = {id(x): n for n, x in enumerate(index.items[0].session.items)}
        for k, item in enumerate(index.items):
            problems = t.problems.setdefault(k, [])
            for node, mark in item.iter_markers_with_node(MARK):
                if not self.trusted:
                    for p in _ordinal_problems(item, mark):
                        if " is not an ordinal" in p.message:
                            self.warn(item, f"{p.message}; the ordinal is ignored")
                        else:
                            problems.append(p)
                # pytest-order looks a class mark's names up outside the class.
                outside = isinstance(node, pytest.Class)
                for key in ("after", "before"):
                    if key not in mark.kwargs:
                        continue
                    value = mark.kwargs[key]
                    targets = names(value)
                    if targets is None:
                        if self.trusted:
                            continue  # pytest-order warned
                        problems.append(Problem(item.nodeid, (
                            f"{where(MARK, item)}: {key}={value!r} must be a test name "
                            "or a list of them")))
                        continue
                    for target in targets:
                        hits = _order_resolve(index, item, target, outside)
                        if hits is None:
                            if not self.trusted:
                                t.unknown.setdefault(k, []).append(target)
                                tail = unknown(index, item, MARK, target).message
                                self.warn(item, f"{tail}; the relation is ignored")
                            continue
                        for j in hits:
                            if j == k:
                                # pytest-order ignores a test placed relative to
                                # itself (alone, or among the tests a name covers).
                                continue
                            first, then = (j, k) if key == "after" else (k, j)
                            a, b = (pos.get(id(index.items[first])),
                                    pos.get(id(index.items[then])))
                            if a is not None and b is not None and a > b:
                                continue  # pytest-order did not honour it
                            t.after.setdefault(then, []).append(first)

    def __call__(self, item: pytest.Item, index: Index) -> Declared:
        t = self.tables(index)
        i = t.pos[id(item)]
        return Declared(after=list(dict.fromkeys(t.after.get(i, []))),
                        problems=list(t.problems.get(i, [])),
                        unknown=list(t.unknown.get(i, [])))


def _order_resolve(index: Index, item: pytest.Item, target: str,
                   outside_class: bool = False) -> list[int] | None:
    hits = None
    if outside_class:
        mod = item.getparent(pytest.Module)
        for prefix in (f"{mod.nodeid}::" if mod is not None else "", ""):
            hits = hits or index.lookup(prefix + target)
    else:
        hits = index.resolve(item, target)
    if hits is None and ".py::" in target:
        # pytest-order also accepts a module path relative to the test's directory.
        mod = item.getparent(pytest.Module)
        if mod is not None and "/" in mod.nodeid:
            hits = index.lookup(mod.nodeid.rsplit("/", 1)[0] + "/" + target)
    return hits


def _ordinal_value(mark: pytest.Mark) -> object:
    if mark.args:
        return mark.args[0]
    return mark.kwargs.get("index")


def _ordinal_problems(item: pytest.Item, mark: pytest.Mark) -> list[Problem]:
    at = where(MARK, item)
    out: list[Problem] = []
    extra = sorted(set(mark.kwargs) - set(_INDEX_KEYS))
    if len(mark.args) > 1 or extra or (mark.args and "index" in mark.kwargs):
        out.append(Problem(item.nodeid, (
            f"{at}: takes one ordinal (or index=) plus before= and after=; "
            f"got {mark.args!r} {sorted(mark.kwargs)!r}")))
    value = _ordinal_value(mark)
    if value is not None and _ordinal(value) is None:
        out.append(Problem(item.nodeid, (
            f"{at}: {value!r} is not an ordinal; use an integer (negative counts from "
            f"the end) or one of {', '.join(ORDINAL_WORDS)}")))
    return out


def _ordinal(value: object) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str):
        if re.fullmatch(r"-?\d+", value.strip()):
            return int(value)
        return ORDINAL_WORDS.get(value.strip())
    return None


def ordinal_of(item: pytest.Item) -> int | None:
    """The pytest-order ordinal of ``item`` (closest marker that has one), if valid."""
    for mark in item.iter_markers(MARK):
        value = _ordinal_value(mark)
        if value is not None:
            return _ordinal(value)
    return None


def apply_ordinals(items: Sequence[pytest.Item]) -> list[pytest.Item]:
    """``items`` stably sorted by pytest-order ordinals.

    Non-negative ordinals first (ascending), then unordered tests, then
    negative ordinals (``-2`` before ``-1``, which is "last").  Dependencies
    are applied afterwards by the plan, so an ordinal never beats an edge.
    """
    def key(pair: tuple[int, pytest.Item]) -> tuple[int, int, int]:
        k, item = pair
        value = ordinal_of(item)
        if value is None:
            return (1, 0, k)
        return (0 if value >= 0 else 2, value, k)

    if not any(ordinal_of(it) is not None for it in items):
        return list(items)
    return [it for _, it in sorted(enumerate(items), key=key)]
