"""pytest-depends' ``@pytest.mark.depends(on=..., name=...)``: requires-pass edges."""

from __future__ import annotations

import pytest

from ..declarations import Declared, Index, Problem
from .common import Reader, Tables, drop_self, names, unknown, where

MARK = "depends"


class DependsReader(Reader):
    """``@pytest.mark.depends(on=..., name=...)``: requires-pass edges."""

    marker = MARK

    def build(self, t: Tables) -> None:
        for k, item in enumerate(t.index.items):
            for mark in item.iter_markers(MARK):
                for n in names(mark.kwargs.get("name")) or []:
                    t.names.setdefault(("", "", n), []).append(k)

    def __call__(self, item: pytest.Item, index: Index) -> Declared:
        marks = list(item.iter_markers(MARK))
        if not marks:
            return Declared()
        t = self.tables(index)
        i = t.pos[id(item)]
        at = where(MARK, item)
        found = Declared()
        problems = found.problems
        for mark in marks:
            extra = sorted(set(mark.kwargs) - {"on", "name"})
            if mark.args or extra:
                got = [*map(repr, mark.args), *extra]
                problems.append(Problem(item.nodeid, (
                    f"{at}: unexpected argument(s) {', '.join(got)}; "
                    "use on=['test_a'] and name='...'")))
            name = mark.kwargs.get("name")
            if name is not None and names(name) is None:
                problems.append(Problem(item.nodeid, f"{at}: name={name!r} must be a string"))
            on = mark.kwargs.get("on", [])
            targets = names(on)
            if targets is None:
                problems.append(Problem(item.nodeid, (
                    f"{at}: on={on!r} must be a test name or a list of them")))
                continue
            for target in targets:
                hits = (t.names.get(("", "", target)) or index.lookup(target)
                        or index.resolve(item, target))
                if hits is None:
                    found.unknown.append(target)
                    problems.append(unknown(index, item, MARK, target))
                    continue
                found.requires.extend(drop_self(hits, i))
        return found
