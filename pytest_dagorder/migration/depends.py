"""pytest-depends' ``@pytest.mark.depends(on=..., name=...)`` and its options.

By default a dependency is a requires-pass edge and a name that matches no
test skips the dependent, as pytest-depends does.  Its options keep their
meaning (command line over ini, as it reads them):

* ``--failed-dependency-action`` (``failed_dependency_action``): ``skip``
  (default) blocks the dependent; ``run`` makes the dependency an ordering
  edge only; ``fail`` runs the dependent after its prerequisites and fails
  it when one of them did not pass (serially at call time, from this
  process's results; under ``-n`` the controller's core decides from every
  worker's outcomes and reports the failure without running the test, see
  the checked edges of the core's ``Graph``);
* ``--missing-dependency-action`` (``missing_dependency_action``): ``skip``
  (default), ``run`` (ignore the name) or ``fail`` (the test fails);
* ``--list-dependency-names`` / ``--list-processed-dependencies`` print
  what pytest-depends prints, before the run.
"""

from __future__ import annotations

import re
from collections.abc import Generator
from typing import ClassVar

import pytest

from ..declaring import foreign_wording as wording
from ..declaring.declarations import Declared, Index, Problem
from . import DEPENDS_MARK as MARK
from .common import Reader, Tables, drop_self, names, where
from .takeover import DEPENDS_ACTIONS

ACTIONS = ("run", "skip", "fail")
_PARAMS = re.compile(r"\[.+\]$")


def actions(config: pytest.Config) -> tuple[str, str]:
    """``(failed, missing)``: pytest-depends' two actions, command line over ini."""
    out: list[str] = []
    for name in ("failed_dependency_action", "missing_dependency_action"):
        value = config.getoption(name, None)
        if not value:
            try:
                value = config.getini(name)
            except ValueError:  # pytest-depends not installed: its default
                value = None
        value = str(value or "skip").strip()
        if value not in ACTIONS:
            raise pytest.UsageError(
                f"{name} = {value!r} (ini) is not valid; use one of {', '.join(ACTIONS)}")
        out.append(value)
    return out[0], out[1]


class DependsReader(Reader):
    """``@pytest.mark.depends(on=..., name=...)``: requires-pass edges (or after-edges)."""

    marker = MARK

    def __init__(self, actions_plugin: DependsActions | None = None) -> None:
        super().__init__()
        self.plugin = actions_plugin
        self.failed, self.missing = (
            (actions_plugin.failed, actions_plugin.missing) if actions_plugin else ("skip", "skip"))

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
        missing: list[str] = []
        edges: list[int] = []
        for mark in marks:
            extra = [*map(repr, mark.args), *sorted(set(mark.kwargs) - {"on", "name"})]
            if extra:
                # pytest-depends reads on= and name= and nothing else.
                one = len(extra) == 1
                self.warn(item, (f"{at}: unexpected {'argument' if one else 'arguments'} "
                                 f"{', '.join(extra)} ignored, as pytest-depends ignores "
                                 f"{'it' if one else 'them'}; it reads on= and name="))
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
                    missing.append(target)
                    continue
                edges.extend(drop_self(hits, i))
        (found.after if self.failed != "skip" else found.requires).extend(edges)
        if self.plugin is not None:
            self.plugin.note(item, [index.ids[j] for j in edges] if self.failed == "fail" else [],
                             missing if self.missing == "fail" and not problems else [])
        if missing and self.missing == "skip" and not problems:
            found.skip = wording.foreign_unknown(item.nodeid, missing)
        return found


class DependsActions:
    """pytest-depends' ``fail`` actions at call time, and its two listings."""

    NAME: ClassVar[str] = DEPENDS_ACTIONS

    def __init__(self, config: pytest.Config) -> None:
        self.failed, self.missing = actions(config)
        self.list_names = bool(config.getoption("list_dependency_names", False))
        self.list_processed = bool(config.getoption("list_processed_dependencies", False))
        self.verbose = config.get_verbosity() > 1
        # By node id: prerequisites to check, names that matched nothing.
        self._check: dict[str, list[str]] = {}
        self._missing: dict[str, list[str]] = {}
        self._passed: dict[str, bool] = {}  # outcomes of this process (fail action only)

    def note(self, item: pytest.Item, check: list[str], missing: list[str]) -> None:
        if check:
            self._check[item.nodeid] = check
        if missing:
            self._missing[item.nodeid] = missing

    def checks(self) -> dict[str, list[str]]:
        """By node id, the prerequisites a test fails for unless they passed."""
        return dict(self._check)

    @pytest.hookimpl(trylast=True)
    def pytest_collection_modifyitems(self, items: list[pytest.Item]) -> None:
        # Where pytest-depends prints them: before pytest's "collected N items".
        if self.list_names or self.list_processed:
            listed = Listing(items)
            if self.list_names:
                listed.print_names(self.verbose)
            if self.list_processed:
                listed.print_processed()

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_call(self, item: pytest.Item) -> None:
        nodeid = item.nodeid
        missing = self._missing.get(nodeid)
        if missing:
            pytest.fail(f"{nodeid} depends on {', '.join(missing)}, which was not found",
                        pytrace=False)
        failed = [p for p in self._check.get(nodeid, ()) if not self._passed.get(p, True)]
        if failed:
            pytest.fail(f"{nodeid} depends on {', '.join(failed)}", pytrace=False)

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_makereport(
        self, item: pytest.Item, call: pytest.CallInfo[None]
    ) -> Generator[None, pytest.TestReport, pytest.TestReport]:
        report = yield
        if self.failed == "fail":
            ok = self._passed.get(report.nodeid, True)
            self._passed[report.nodeid] = ok and report.outcome == "passed"
        return report


class Listing:
    """pytest-depends' names (node id, without parameters, its module and class,
    custom names) and its dependencies resolved by them, for its two listings."""

    def __init__(self, items: list[pytest.Item]) -> None:
        self.items = items
        self.by_name: dict[str, list[str]] = {}
        for item in items:
            for name in self._names(item):
                self.by_name.setdefault(name, []).append(item.nodeid)

    @staticmethod
    def _names(item: pytest.Item) -> list[str]:
        nodeid = item.nodeid
        out = [nodeid]
        bare = _PARAMS.sub("", nodeid)
        out.append(bare)
        while "::" in bare:
            bare = bare.rsplit("::", 1)[0]
            out.append(bare)
        for mark in item.iter_markers(MARK):
            out += names(mark.kwargs.get("name")) or []
        return list(dict.fromkeys(out))

    def print_names(self, verbose: bool) -> None:
        print("Available dependency names:")
        for name, ids in sorted(self.by_name.items()):
            if len(ids) == 1:
                if name != ids[0]:
                    print(f"  {name} -> {ids[0]}")
                elif verbose:
                    print(f"  {name}")
                continue
            print(f"  {name} ->")
            for nodeid in sorted(ids):
                print(f"    {nodeid}")

    def print_processed(self) -> None:
        print("Dependencies:")
        for item in sorted(self.items, key=lambda it: it.nodeid):
            lines: list[str] = []
            for mark in item.iter_markers(MARK):
                for target in names(mark.kwargs.get("on", [])) or []:
                    name = target if target in self.by_name else _absolute(target, item.nodeid)
                    hits = self.by_name.get(name)
                    lines += hits if hits else [f"{target} (MISSING)"]
            if lines:
                print(f"  {item.nodeid} depends on")
                for line in sorted(set(lines)):
                    print(f"    {line}")


def _absolute(name: str, nodeid: str) -> str:
    """A relative name (``test_x``, ``Class::test_x``) as a node id, seen from ``nodeid``."""
    parts = name.split("::")
    if len(parts) == 1:
        return f"{nodeid.rsplit('::', 1)[0]}::{name}"
    if "." not in parts[0]:
        return f"{nodeid.split('::', 1)[0]}::{name}"
    return name
