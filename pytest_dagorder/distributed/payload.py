"""What a worker ships: its plan, as the controller reads it (:class:`~.wire.Payload`).

Made in the worker once its collection is final; nothing here sends.
"""

from __future__ import annotations

import dataclasses

import pytest

from ..core.affinity import DocumentKind
from ..glue.dag_fixture import uses_dag
from ..glue.internals import wide_fixtures
from ..glue.markers import SHARES_NOTHING
from ..glue.planning import Plan, state_scopes
from ..glue.resources import NONE
from ..glue.settings import settings_of
from ..glue.sharding import xdist_group
from ..migration import fail_checks, ordering_failed
from ..migration.runtime import RuntimeUsers
from . import wire


def make_payload(config: pytest.Config, plan: Plan | None, planned: list[pytest.Item],
                 final: list[pytest.Item], ids: list[str], *, plain: bool,
                 kinds: list[DocumentKind | None]) -> wire.Payload:
    """The plan, indexed like ``final`` (what this worker runs from); ``ids``
    are the node ids of ``planned``; ``plain``: see :func:`declares_nothing`;
    ``kinds``: :func:`documents` of ``planned``."""
    graph: wire.GraphData | None = None
    problems: list[tuple[str, str]] = []
    if plan is not None:
        problems = [(p.nodeid, p.message) for p in plan.problems]
        if plan.graph is not None and not plan.problems:
            g = plan.graph
            nodeids = ([*ids, *(it.nodeid for it in plan.deselected)]
                       if plan.items == planned else plan.nodeids)
            graph = wire.GraphData(nodeids, [list(r) for r in g.requires],
                                   [list(a) for a in g.after])
    grouped = plan is None or "xdist_group" in plan.marker_names
    payload = wire.Payload(
        ids=ids,
        barrier=len(planned),
        # Computed in bulk by the planner (internals.fill_locations).
        locations=[_location(it) for it in planned],
        module_scopes=_scopes(planned, pytest.Module),
        class_scopes=_scopes(planned, pytest.Class),
        xdist_groups=([xdist_group(it) for it in planned] if grouped
                      else [None] * len(planned)),
        graph=graph,
        problems=problems,
        plain=plain,
    )
    if plan is not None and (plan.notes or plan.whole or plan.dropped):
        payload = dataclasses.replace(payload, header=list(plan.notes), whole=plan.whole,
                                      deselected=plan.dropped, empty_part=plan.empty_part)
    if plan is not None and plan.errors:
        payload = dataclasses.replace(
            payload, errors=[(p.nodeid, p.message) for p in plan.errors])
    if usage := ordering_failed(config):
        payload = dataclasses.replace(payload, usage_error=usage)
    if checks := fail_checks(config):
        payload = dataclasses.replace(payload, fail_checks=list(checks.items()))
    if (graph is not None and plan is not None and plan.graph is not None
            and settings_of(config).affinity == "state"):
        labels = state_scopes(plan.items, plan.graph,
                              stated=SHARES_NOTHING in plan.marker_names,
                              stateless=settings_of(config).stateless_fixtures)
        if any(labels):
            # Graph positions are plan.items'; the payload's, planned's.
            where = dict(zip(map(id, plan.items), labels, strict=True))
            payload = dataclasses.replace(
                payload, state_scopes=[where.get(id(it)) for it in planned])
    if any(kinds):
        payload = dataclasses.replace(payload, documents=kinds)
    if any(keeps := _module_fixture_users(planned)):
        payload = dataclasses.replace(payload, module_fixtures=keeps)
    if any(users := [uses_dag(it) for it in planned]):
        payload = dataclasses.replace(payload, dag_users=users)
    uses = RuntimeUsers()
    runtime = [uses(it) for it in planned]
    if any(runtime):
        payload = dataclasses.replace(payload, runtime_depends=runtime)
    if plan is not None and plan.needs:
        needs = [plan.needs.get(id(it), NONE) for it in planned]
        payload = dataclasses.replace(
            payload, resources=[list(n.resources) for n in needs],
            exclusive=[n.exclusive for n in needs])
    try:
        return payload.in_order(ids if final == planned else [it.nodeid for it in final])
    except ValueError:
        return wire.Payload([], 0, [], [], [], [], None, [("", (
            "a pytest_collection_finish hook added or removed tests after "
            "pytest-dagorder made its plan; select tests in "
            "pytest_collection_modifyitems instead"))])


def declares_nothing(plan: Plan | None, items: list[pytest.Item]) -> bool:
    """Whether the run needs nothing of the DAG scheduler but its order by durations.

    No edge (``depends_on``, ``run_after``, the foreign markers that become
    edges), no problem to report, no resource or exclusive test, no
    ``xdist_group``, no test using the ``dag`` fixture or pytest-dependency's
    runtime ``depends()``: every test is ready from the start, so the
    controller never withholds one and the worker needs no barrier.
    """
    if plan is None or plan.graph is not None or plan.problems or plan.needs:
        return False
    if "xdist_group" in plan.marker_names:
        return False
    uses = RuntimeUsers()
    return not any(uses_dag(it) or uses(it) for it in items)


def documents(items: list[pytest.Item]) -> list[DocumentKind | None]:
    """Per item, None for a test function, else what document it is an item of.

    ``"module"``: the collector above it stands for a Python module
    (``--doctest-modules``' items, Sybil's on any file: ``getparent(pytest.Module)``
    finds one), whose docstrings it runs; ``"file"``: any other item a plugin
    collects from a file (YAML tests, a lint check).
    """
    out: list[DocumentKind | None] = []
    by_parent: dict[int, DocumentKind] = {}
    for item in items:
        if isinstance(item, pytest.Function):
            out.append(None)
            continue
        key = id(item.parent)
        kind = by_parent.get(key)
        if kind is None:
            kind = by_parent[key] = "file" if item.getparent(pytest.Module) is None else "module"
        out.append(kind)
    return out


def _location(item: pytest.Item) -> tuple[str, int | None, str]:
    path, line, domain = item.location
    return str(path), line, str(domain)


#: Fixture scopes a move to another module tears down (a session's stays).
_MODULE_WIDE = frozenset({"module", "package"})


def _module_fixture_users(items: list[pytest.Item]) -> list[bool]:
    """Per item, whether it uses a fixture of module or package scope (its own
    or an autouse one; unknown: assumed so)."""
    out: list[bool] = []
    for item in items:
        wide = wide_fixtures(item)
        out.append(wide is None or any(scope in _MODULE_WIDE for _, scope, _ in wide))
    return out


def _scopes(items: list[pytest.Item], kind: type[pytest.Collector]) -> list[str | None]:
    """Per item, the node id of its closest ``kind`` collector (looked up once per parent)."""
    by_parent: dict[int, str | None] = {}
    out: list[str | None] = []
    for item in items:
        key = id(item.parent)
        if key not in by_parent:
            node = item.getparent(kind)
            by_parent[key] = None if node is None else node.nodeid
        out.append(by_parent[key])
    return out
