"""What a worker tells the controller about its collection: one typed message.

The controller of an xdist run does not collect, so each worker ships what
only a collection knows (the plan's graph, where each test sits, its
scopes) on the side channel opened in ``pytest_configure_node``.  This
module is the only place that knows the message's shape: the worker calls
:func:`encode`, the controller :func:`decode`.

The message is one JSON string: execnet serialises nested lists object by
object in Python, which for thousands of tests costs more than the plan.

The same channel later carries the values tests publish (``dag.publish``):
a worker sends :func:`published` for a test that passed, the controller
sends :func:`deliveries` ahead of the tests that read results.  Those go
as execnet's own values (tuples, dicts), not JSON, which would turn tuples
into lists, sets and bytes into errors.
It carries the plugin's version; a worker running another version is
refused with both versions named (its message may mean something else even
where the shape still fits).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from . import __version__
from .settings import AffinityMode

#: Bumped whenever the fields below change meaning.
FORMAT = 2
#: Keys of ``workerinput`` the controller fills in ``pytest_configure_node``:
#: the side channel the payload travels on, the controller's ``--dist``
#: (workers do not see it; only the DAG modes get barrier items), and
#: whether this worker ships its plan unasked.
CHANNEL_KEY = "dagorder_channel"
DIST_KEY = "dagorder_dist"
PLAN_KEY = "dagorder_plan"
#: What the controller sends a worker it did not name in ``PLAN_KEY`` when
#: it needs that worker's plan after all (the named one never collected).
PLAN_REQUEST = "dagorder-plan-please"

Location = tuple[str, int | None, str]


class WireError(ValueError):
    """A message from a worker that this controller cannot read.

    ``worker_version`` is the version the worker announced (None if the
    message did not say).
    """

    def __init__(self, message: str, worker_version: str | None = None) -> None:
        super().__init__(message)
        self.worker_version = worker_version


@dataclass(frozen=True)
class GraphData:
    """The validated graph of the plan: indices into ``ids`` (run first, then deselected)."""

    ids: list[str]
    requires: list[list[int]]
    after: list[list[int]]


@dataclass(frozen=True)
class Payload:
    """A worker's collection, as the controller needs it.

    Indices ``0 .. barrier - 1`` are the tests xdist's ids list names, in the
    same order; ``barrier`` is the hidden item's index.  ``graph`` is None
    when the suite declares no dependencies; ``problems`` are declaration
    problems as (node id, message), reported as collection errors.
    """

    ids: list[str]
    barrier: int
    #: (path, line, domain) of each test, for the skips the controller
    #: reports (None: use :func:`location_of`).
    locations: list[Location | None]
    module_scopes: list[str | None]
    class_scopes: list[str | None]
    xdist_groups: list[str | None]
    graph: GraphData | None = None
    problems: Sequence[tuple[str, str]] = ()
    #: Per test: resources it holds while it runs (empty: none), and whether
    #: it runs alone.  Empty sequences: no test has either.
    resources: Sequence[Sequence[str]] = ()
    exclusive: Sequence[bool] = ()
    #: Per test: its module (or a fixture it uses) calls pytest-dependency's
    #: runtime depends().  Empty: no test does.
    runtime_depends: Sequence[bool] = ()
    #: Per test: it requests the ``dag`` fixture (reads or publishes results).
    #: Empty: no test does.
    dag_users: Sequence[bool] = ()

    def scopes(self, mode: AffinityMode) -> list[str | None]:
        """The scope of each test that ``--dag-affinity=mode`` keeps together."""
        if mode == "module":
            return self.module_scopes
        if mode == "class":
            return self.class_scopes
        return [None] * len(self.ids)


    def in_order(self, ids: Sequence[str]) -> Payload:
        """The same payload, indexed in the order of ``ids`` (what xdist will run).

        A ``pytest_collection_finish`` of a conftest or plugin may reorder
        ``session.items`` after this payload was made; xdist's ids list is the
        order the controller's indices refer to.  Repeated node ids (with
        ``--keep-duplicates``) pair up by occurrence.  ValueError if ``ids``
        names other tests.
        """
        if list(ids) == self.ids:
            return self
        if sorted(ids) != sorted(self.ids):
            raise ValueError("the workers collected other tests than they planned")
        slots: dict[str, list[int]] = {}
        for j, nid in enumerate(ids):
            slots.setdefault(nid, []).append(j)
        taken: dict[str, int] = {}
        new = [0] * len(self.ids)  # old index -> new index
        for k, nid in enumerate(self.ids):
            n = taken.get(nid, 0)
            new[k] = slots[nid][n]
            taken[nid] = n + 1
        old = [0] * len(new)
        for k, j in enumerate(new):
            old[j] = k
        graph = self.graph
        if graph is not None:
            # Prerequisites outside the run (indices past the run) keep theirs.
            to = [*new, *range(len(new), len(graph.ids))]
            back = [*old, *range(len(old), len(graph.ids))]
            graph = GraphData(
                [graph.ids[k] for k in back],
                [[to[p] for p in graph.requires[k]] for k in back],
                [[to[p] for p in graph.after[k]] for k in back],
            )
        return Payload(
            ids=[self.ids[k] for k in old],
            barrier=self.barrier,
            locations=[self.locations[k] for k in old],
            module_scopes=[self.module_scopes[k] for k in old],
            class_scopes=[self.class_scopes[k] for k in old],
            xdist_groups=[self.xdist_groups[k] for k in old],
            graph=graph,
            problems=self.problems,
            resources=[self.resources[k] for k in old] if self.resources else (),
            exclusive=[self.exclusive[k] for k in old] if self.exclusive else (),
            runtime_depends=([self.runtime_depends[k] for k in old]
                             if self.runtime_depends else ()),
            dag_users=[self.dag_users[k] for k in old] if self.dag_users else (),
        )


def location_of(nodeid: str) -> Location:
    """A location from the node id alone, where no worker sent one (no line)."""
    path, _, rest = nodeid.partition("::")
    return path, None, rest.replace("::", ".")


def hello() -> str:
    """The first message of every worker: which format and version it speaks.

    Every worker's is read (a cheap check).  The controller follows the
    plan of one worker: the one it named in ``workerinput`` ships it right
    after this; any other only when sent :data:`PLAN_REQUEST` (every worker
    makes the same plan, so building and encoding it once is enough).
    """
    return json.dumps({"format": FORMAT, "version": __version__})


def check_hello(raw: object) -> None:
    """:class:`WireError` if ``raw`` is not the hello of this format and version."""
    _checked(raw)


@dataclass(frozen=True)
class ExitRequest:
    """A test on a worker called ``pytest.exit(message, returncode)``.

    Sent after the hello (and the plan, if one is shipped): the controller
    ends the session the way pytest ends it (see ``DagScheduling``).
    """

    message: str
    returncode: int | None


def encode_exit(request: ExitRequest) -> str:
    return json.dumps({"format": FORMAT, "version": __version__,
                       "exit": [request.message, request.returncode]})


def decode_exit(raw: object) -> ExitRequest | None:
    """The exit request in ``raw``; None if ``raw`` is something else."""
    try:
        data = _checked(raw)
        message, code = data["exit"]
        return ExitRequest(str(message), None if code is None else int(code))
    except (WireError, KeyError, TypeError, ValueError):
        return None


def encode(payload: Payload) -> str:
    graph = payload.graph
    return json.dumps({
        "format": FORMAT,
        "version": __version__,
        "ids": payload.ids,
        "barrier": payload.barrier,
        "locations": payload.locations,
        "module": payload.module_scopes,
        "class": payload.class_scopes,
        "xdist_group": payload.xdist_groups,
        "graph": None if graph is None else {
            "ids": graph.ids, "requires": graph.requires, "after": graph.after,
        },
        "problems": [list(p) for p in payload.problems],
        "resources": [list(r) for r in payload.resources],
        "exclusive": list(payload.exclusive),
        "runtime_depends": list(payload.runtime_depends),
        "dag_users": list(payload.dag_users),
    }, separators=(",", ":"))


def decode(raw: object) -> Payload:
    """The payload in ``raw``; :class:`WireError` if it is not one this version reads."""
    data = _checked(raw)
    version = data.get("version")
    try:
        return _fields(data)
    except (KeyError, TypeError, ValueError) as exc:
        raise WireError(f"a worker sent a malformed collection message ({exc!r}); "
                        "install the same pytest-dagorder version everywhere",
                        version) from None


def _checked(raw: object) -> dict[str, Any]:
    """The message as a dict, if its format and version are this process's."""
    try:
        data = json.loads(raw) if isinstance(raw, str) else raw
        version = data.get("version") if isinstance(data, dict) else None
    except (TypeError, ValueError):
        data, version = None, None
    if not isinstance(data, dict) or data.get("format") != FORMAT or version != __version__:
        theirs = f"pytest-dagorder {version}" if isinstance(version, str) else (
            "an unknown version of pytest-dagorder")
        raise WireError(
            f"a worker runs {theirs}, this process runs pytest-dagorder {__version__}; "
            "install the same version where the workers run",
            version if isinstance(version, str) else None,
        )
    return data


def _fields(data: dict[str, Any]) -> Payload:
    g = data["graph"]
    return Payload(
        ids=[str(x) for x in data["ids"]],
        barrier=int(data["barrier"]),
        locations=[None if loc is None else (str(loc[0]), None if loc[1] is None else int(loc[1]),
                                             str(loc[2]))
                   for loc in data["locations"]],
        module_scopes=list(data["module"]),
        class_scopes=list(data["class"]),
        xdist_groups=list(data["xdist_group"]),
        graph=None if g is None else GraphData(
            [str(x) for x in g["ids"]],
            [[int(p) for p in r] for r in g["requires"]],
            [[int(p) for p in a] for a in g["after"]],
        ),
        problems=[(str(n), str(m)) for n, m in data["problems"]],
        resources=[[str(r) for r in rs] for rs in data["resources"]] or (),
        exclusive=[bool(x) for x in data["exclusive"]] or (),
        runtime_depends=[bool(x) for x in data["runtime_depends"]] or (),
        dag_users=[bool(x) for x in data["dag_users"]] or (),
    )


# -- published values ------------------------------------------------------------

PUBLISHED = "dagorder-published"
DELIVERY = "dagorder-results"


def published(nodeid: str, values: dict[str, object]) -> tuple[str, str, dict[str, object]]:
    """Worker -> controller: ``nodeid`` passed, having published ``values``."""
    return (PUBLISHED, nodeid, values)


def read_published(raw: object) -> tuple[str, dict[str, object]]:
    """(node id, values) of a :func:`published` message; WireError if it is not one."""
    if (isinstance(raw, tuple) and len(raw) == 3 and raw[0] == PUBLISHED
            and isinstance(raw[1], str) and isinstance(raw[2], dict)):
        return raw[1], raw[2]
    raise WireError(f"unexpected message on the dagorder channel: {type(raw).__name__}")


def deliveries(ready: list[str], values: dict[str, dict[str, object]]) -> tuple[
        str, list[str], dict[str, dict[str, object]]]:
    """Controller -> worker, ahead of a dispatch: the values of prerequisites it
    lacks (by node id), and the tests of the dispatch (``ready``) that may now read."""
    return (DELIVERY, ready, values)


def read_deliveries(raw: object) -> tuple[list[str], dict[str, dict[str, object]]]:
    if (isinstance(raw, tuple) and len(raw) == 3 and raw[0] == DELIVERY
            and isinstance(raw[1], list) and isinstance(raw[2], dict)):
        return raw[1], raw[2]
    raise WireError(f"unexpected message on the dagorder channel: {type(raw).__name__}")
