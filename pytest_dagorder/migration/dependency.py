"""pytest-dependency's ``@pytest.mark.dependency(name=, depends=, scope=)``: requires-pass edges.

Names per scope as that plugin defines them.  Only a test marked with
``dependency`` (or every test, with ``automark_dependency``) can be depended
upon: a dependency on an existing but unmarked test is skipped at run time,
as pytest-dependency does, with a reason saying what to mark.
"""

from __future__ import annotations

import pytest

from ..declaring import foreign_wording as wording
from ..declaring.declarations import Declared, Index, Problem
from .common import Reader, Tables, drop_self, names, where
from .dependency_names import MARK, SCOPE_CLS, SCOPES, scope_name


class DependencyReader(Reader):
    """``@pytest.mark.dependency``: pytest-dependency's names per scope, requires-pass."""

    marker = MARK
    # pytest-dependency never reorders: on a cycle, a test whose prerequisite
    # comes later is skipped, and its dependents with it.
    skips_cycles = True

    def __init__(self, *, automark: bool, ignore_unknown: bool) -> None:
        super().__init__()
        self.automark = automark
        self.ignore_unknown = ignore_unknown

    def build(self, t: Tables) -> None:
        for k, item in enumerate(t.index.items):
            marker = item.get_closest_marker(MARK)
            if marker is None and not self.automark:
                continue
            t.registered.add(k)
            custom = marker.kwargs.get("name") if marker is not None else None
            for scope, cls in SCOPE_CLS.items():
                node = item.getparent(cls)
                if node is None:
                    continue
                name = custom if isinstance(custom, str) else scope_name(item.nodeid, scope)
                t.names.setdefault((scope, node.nodeid, name), []).append(k)

    def __call__(self, item: pytest.Item, index: Index) -> Declared:
        marker = item.get_closest_marker(MARK)
        if marker is None:
            return Declared()
        t = self.tables(index)
        at = where(MARK, item)
        found = Declared()
        problems = found.problems
        extra = [*map(repr, marker.args),
                 *sorted(set(marker.kwargs) - {"name", "depends", "scope"})]
        if extra:
            # pytest-dependency reads its three keywords and nothing else.
            one = len(extra) == 1
            self.warn(item, (f"{at}: unexpected {'argument' if one else 'arguments'} "
                             f"{', '.join(extra)} ignored, as pytest-dependency ignores "
                             f"{'it' if one else 'them'}; it reads name=, depends= and scope="))
        name = marker.kwargs.get("name")
        if name is not None and not (isinstance(name, str) and name):
            problems.append(Problem(item.nodeid, f"{at}: name={name!r} must be a string"))
        scope = marker.kwargs.get("scope", "module")
        depends = marker.kwargs.get("depends") or []
        # A string is read letter by letter there: a test no letter names, so
        # pytest-dependency always skips it (or, ignoring unknown names, runs it).
        letters = depends if isinstance(depends, str) else None
        targets = [] if letters is not None else names(depends)
        if letters is not None and not self.ignore_unknown:
            found.skip = wording.foreign_letters(item.name, letters)
        elif letters is not None:
            self.warn(item, wording.foreign_letters(item.name, letters, ignore_unknown=True))
        if targets is None:
            problems.append(Problem(item.nodeid, (
                f"{at}: depends={depends!r} must be a list of test names, "
                "e.g. depends=['test_a']")))
            targets = []
        if scope not in SCOPE_CLS:
            problems.append(Problem(item.nodeid, (
                f"{at}: scope={scope!r} is not one of {', '.join(map(repr, SCOPES))}")))
            return found
        node = item.getparent(SCOPE_CLS[scope])
        if node is None:
            if targets:
                problems.append(Problem(item.nodeid, (
                    f"{at}: scope={scope!r} but the test is not in a {scope}")))
            return found
        unmarked, missing, itself = self._look_up(t, index, item, scope, node, targets, found)
        if found.skip is not None or problems:
            pass
        elif missing:
            found.skip = wording.foreign_unknown(item.name, missing, scope,
                                                 self._class_hint(t, item, scope, missing))
        elif itself:
            found.skip = wording.foreign_itself(item.name, itself)
        elif unmarked and not self.ignore_unknown:
            found.skip = wording.depends_unmarked(item.name, ", ".join(map(repr, unmarked)))
        return found

    def _look_up(self, t: Tables, index: Index, item: pytest.Item, scope: str,
                 node: pytest.Collector, targets: list[str],
                 found: Declared) -> tuple[list[str], list[str], list[str]]:
        """Resolve ``item``'s ``targets`` in ``scope`` (``node``) into
        ``found.requires`` (and ``found.unknown``); the targets that name only
        unmarked tests, no test, and the test itself."""
        i = t.pos[id(item)]
        unmarked: list[str] = []
        missing: list[str] = []
        itself: list[str] = []
        for target in targets:
            hits = t.names.get((scope, node.nodeid, target))
            if hits is None:
                by_id = self._by_node_id(index, node, scope, target)
                if by_id and all(j in t.registered for j in by_id):
                    # A full node id still reaches a test that has a name=; a
                    # base name (every instance, a class) or a short name of a
                    # named test is no name of pytest-dependency's.
                    hits = by_id if target in index.ids else None
                elif by_id:
                    unmarked.append(target)
                    continue
            if hits is None:
                if not self.ignore_unknown:
                    # pytest-dependency skips the dependent: so do we, with a
                    # reason, and the summary lists the names (see .report).
                    found.unknown.append(target)
                    missing.append(target)
                continue
            if self.ignore_unknown:
                # Its documented meaning: a dependency that is not run is ignored.
                chosen = {id(x) for x in item.session.items}
                hits = [j for j in hits if id(index.items[j]) in chosen]
            if hits == [i]:
                # pytest-dependency looks the test's own outcome up before it
                # has one: such a test is always skipped, never an error.
                itself.append(target)
                continue
            found.requires.extend(drop_self(hits, i))
        return unmarked, missing, itself

    @staticmethod
    def _class_hint(t: Tables, item: pytest.Item, scope: str, missing: list[str]) -> str:
        """For a method's name written bare in module scope: the spellings that work."""
        cls = item.getparent(pytest.Class)
        if scope != "module" or cls is None:
            return ""
        for target in missing:
            if ("class", cls.nodeid, target) in t.names:
                return (f"; in module scope write {cls.name}::{target!s}, "
                        "or give the marker scope='class'")
        return ""

    @staticmethod
    def _by_node_id(index: Index, node: pytest.Collector, scope: str, target: str) -> list[int]:
        """Items a name reaches as a node id in ``scope`` (base names, classes too)."""
        prefix = f"{node.nodeid}::" if scope in ("module", "class") else ""
        hits = index.lookup(prefix + target) or []
        if scope == "package":
            hits = [j for j in hits if node in index.items[j].listchain()]
        return hits
