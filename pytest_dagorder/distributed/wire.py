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
from dataclasses import dataclass, replace
from typing import Any, overload

from .. import __version__
from ..core.affinity import DocumentKind
from ..glue.settings import AffinityMode

#: Bumped whenever the fields below change meaning (5: ``plain``, no barrier
#: item on workers whose suite declares nothing; 6: ``state_scopes``;
#: 7: ``documents``, and ``plain`` in the hello; 8: ``module_fixtures``;
#: 9: a state scope is its group's reasons, and groups cross modules).
FORMAT = 9
#: Keys of ``workerinput`` the controller fills in ``pytest_configure_node``:
#: the side channel the payload travels on, and the controller's ``--dist``
#: (workers do not see it; only the DAG modes get barrier items).
CHANNEL_KEY = "dagorder_channel"
DIST_KEY = "dagorder_dist"
#: What the controller sends the worker whose plan it follows: the first
#: whose collection came in (every worker makes the same plan, so building
#: and encoding it once is enough).
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
    locations: Sequence[Location | None]
    module_scopes: list[str | None]
    class_scopes: list[str | None]
    xdist_groups: list[str | None]
    graph: GraphData | None = None
    problems: Sequence[tuple[str, str]] = ()
    #: Per test: resources it uses while it runs (empty: none), and whether
    #: it runs alone.  Empty sequences: no test has either.
    resources: Sequence[Sequence[str]] = ()
    exclusive: Sequence[bool] = ()
    #: Per test: its module (or a fixture it uses) calls pytest-dependency's
    #: runtime depends().  Empty: no test does.
    runtime_depends: Sequence[bool] = ()
    #: Per test: it requests the ``dag`` fixture (reads or publishes results).
    #: Empty: no test does.
    dag_users: Sequence[bool] = ()
    #: pytest-depends' ``--failed-dependency-action=fail``: by node id, the
    #: prerequisites that must have passed, else the test fails unrun.
    fail_checks: Sequence[tuple[str, Sequence[str]]] = ()
    #: A usage error the worker met while planning (pytest-order's
    #: ``--fail-all-on-failed-ordering``): the session ends with it (exit 4).
    usage_error: str = ""
    #: The suite declares nothing the controller must order or limit: the
    #: workers have no barrier item (``barrier`` is never sent) and run as
    #: under plain xdist; the controller always sends the next test ahead.
    plain: bool = False
    #: Lines the plan adds to the controller's header (the --dag-shard line).
    header: Sequence[str] = ()
    #: The worker collected every test under its arguments and deselected none
    #: (a durations file may then forget the tests it did not see).
    whole: bool = False
    #: How many collected tests the worker deselected (``-k``, ``--dag-shard``, ...).
    deselected: int = 0
    #: ``--dag-shard`` left the part empty although the selection has tests.
    empty_part: bool = False
    #: Per test, under ``--dag-affinity=state``: its group, as the reasons it
    #: was formed (None: in none), as the worker found them (see
    #: ``core/affinity.py``, ``state_groups``).  Empty: no test is.
    state_scopes: Sequence[str | None] = ()
    #: Under ``--continue-on-collection-errors``: problems of tests the plan
    #: left out, as (node id, message): reported as collection errors, and
    #: the rest runs (``problems`` end the session).
    errors: Sequence[tuple[str, str]] = ()
    #: Per test: None for a test function, else what document it is an item
    #: of (see ``core/affinity.document_files``).  Empty: every test is a
    #: test function.
    documents: Sequence[DocumentKind | None] = ()
    #: Per test: it uses a fixture of module or package scope (one a module
    #: switch tears down), so a worker keeps its module's tests together.
    #: Empty: no test does.
    module_fixtures: Sequence[bool] = ()

    def scopes(self, mode: AffinityMode) -> list[str | None]:
        """The scope of each test that ``--dag-affinity=mode`` keeps together."""
        if mode == "state":
            return list(self.state_scopes) or [None] * len(self.ids)
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
        # Whole-run fields carry over as they are; per-test ones (empty
        # where no test has one) follow the new order.
        per_test: dict[str, Any] = {
            name: [getattr(self, name)[k] for k in old]
            for name in PER_TEST_FIELDS if getattr(self, name)}
        return replace(self, graph=graph, **per_test)


#: The :class:`Payload` fields that hold one entry per test, in ``ids`` order
#: (``in_order`` reorders them; every other field is about the whole run).
PER_TEST_FIELDS = ("ids", "locations", "module_scopes", "class_scopes", "xdist_groups",
                   "resources", "exclusive", "runtime_depends", "dag_users", "state_scopes",
                   "documents", "module_fixtures")


def location_of(nodeid: str) -> Location:
    """A location from the node id alone, where no worker sent one (no line)."""
    path, _, rest = nodeid.partition("::")
    return path, None, rest.replace("::", ".")


def hello(plain: bool = False) -> str:
    """The first message of every worker: which format and version it speaks, and
    whether its suite declares nothing (see :attr:`Payload.plain`).

    Every worker's is read (a cheap check).  The controller follows the
    plan of one worker, which ships it after this when sent
    :data:`PLAN_REQUEST`; a run that did not ask for the plugin needs no
    plan where the first hello says ``plain``: xdist schedules it.
    """
    return json.dumps({"format": FORMAT, "version": __version__, "plain": plain})


def check_hello(raw: object) -> bool:
    """Whether the suite declares nothing, as the hello ``raw`` says; :class:`WireError`
    if ``raw`` is not the hello of this format and version."""
    return _checked(raw).get("plain") is True


@dataclass(frozen=True)
class ExitRequest:
    """A test on a worker called ``pytest.exit(message, returncode)``.

    Sent after the hello (and the plan, if one is shipped): the controller
    ends the session the way pytest ends it (see ``DependencyScheduling``).
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
    """The payload as one JSON string, without what the node ids already say.

    A test's location is (module path, line, dotted name) and its module
    scope the module path, both read off its node id nearly always: only
    the lines, and the exceptions, are written.  The graph's ids repeat the
    run's (deselected prerequisites follow): only those that follow are
    written.  Sparse lists (class scopes, groups) are written as pairs.
    """
    ids = payload.ids
    graph = payload.graph
    lines: list[int | None] = []
    odd_locations: list[tuple[int, Location | None]] = []
    odd_modules: list[tuple[int, str | None]] = []
    for k, (nid, loc, module) in enumerate(
            zip(ids, payload.locations, payload.module_scopes, strict=True)):
        path, _, name = location_of(nid)
        if loc is not None and loc[0] == path and loc[2] == name:
            lines.append(loc[1])
        else:
            lines.append(None)
            odd_locations.append((k, loc))
        if module != path:
            odd_modules.append((k, module))
    graph_data: dict[str, object] | None = None
    if graph is not None:
        graph_data = {"requires": graph.requires, "after": graph.after}
        if graph.ids[:len(ids)] == ids:
            graph_data["extra"] = graph.ids[len(ids):]
        else:
            graph_data["ids"] = graph.ids
    return json.dumps({
        "format": FORMAT,
        "version": __version__,
        "ids": ids,
        "barrier": payload.barrier,
        "lines": lines,
        "odd_locations": odd_locations,
        "odd_modules": odd_modules,
        "class": _sparse(payload.class_scopes),
        "xdist_group": _sparse(payload.xdist_groups),
        "state": _sparse(payload.state_scopes),
        "documents": _sparse(payload.documents),
        "module_fixtures": [k for k, x in enumerate(payload.module_fixtures) if x],
        "graph": graph_data,
        "problems": [list(p) for p in payload.problems],
        "resources": [list(r) for r in payload.resources],
        "exclusive": list(payload.exclusive),
        "runtime_depends": list(payload.runtime_depends),
        "dag_users": list(payload.dag_users),
        "fail_checks": [[nid, list(ps)] for nid, ps in payload.fail_checks],
        "usage_error": payload.usage_error,
        "plain": payload.plain,
        "header": list(payload.header),
        "whole": payload.whole,
        "deselected": payload.deselected,
        "empty_part": payload.empty_part,
        "errors": [list(p) for p in payload.errors],
    }, separators=(",", ":"))


def _sparse(values: Sequence[str | None]) -> list[tuple[int, str]]:
    return [(k, v) for k, v in enumerate(values) if v is not None]


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
    # Checked in bulk (types) rather than converted one by one: a message of
    # this version is well-formed unless something is badly wrong, and then
    # a TypeError/ValueError/KeyError here says so (see decode).
    ids = _typed(data["ids"], str)
    n = len(ids)
    lines = _typed(data["lines"], int, type(None))
    if len(lines) != n:
        raise ValueError("one line per test")
    odd: dict[int, Location | None] = {
        int(k): None if loc is None else (
            str(loc[0]), None if loc[1] is None else int(loc[1]), str(loc[2]))
        for k, loc in data["odd_locations"]}
    # A module scope is the path location_of reads off the node id.
    modules: list[str | None] = [nid.partition("::")[0] for nid in ids]
    for k, module in data["odd_modules"]:
        modules[k] = None if module is None else str(module)
    g = data["graph"]
    graph = None
    if g is not None:
        requires = [_typed(r, int) for r in g["requires"]]
        after = [_typed(a, int) for a in g["after"]]
        graph = GraphData(
            [*ids, *_typed(g["extra"], str)] if "extra" in g else _typed(g["ids"], str),
            requires, after)
    return Payload(
        ids=ids,
        barrier=int(data["barrier"]),
        locations=Locations(ids, lines, odd),
        module_scopes=modules,
        class_scopes=_dense(data["class"], n),
        xdist_groups=_dense(data["xdist_group"], n),
        graph=graph,
        problems=[(str(nid), str(msg)) for nid, msg in data["problems"]],
        resources=[[str(r) for r in rs] for rs in data["resources"]] or (),
        exclusive=[bool(x) for x in data["exclusive"]] or (),
        runtime_depends=[bool(x) for x in data["runtime_depends"]] or (),
        dag_users=[bool(x) for x in data["dag_users"]] or (),
        fail_checks=[(str(nid), _typed(ps, str)) for nid, ps in data["fail_checks"]] or (),
        usage_error=str(data["usage_error"]),
        plain=bool(data["plain"]),
        header=_typed(data["header"], str) or (),
        whole=data["whole"] is True,
        deselected=int(data["deselected"]),
        empty_part=data["empty_part"] is True,
        state_scopes=_dense(data["state"], n) if data["state"] else (),
        errors=[(str(nid), str(msg)) for nid, msg in data["errors"]] or (),
        documents=_documents(data["documents"], n),
        module_fixtures=_flags(data["module_fixtures"], n),
    )


class Locations(Sequence["Location | None"]):
    """The tests' locations as decoded: each made from its node id and line
    when read (the controller reads one only for a skip it reports itself)."""

    def __init__(self, ids: list[str], lines: list[int | None],
                 odd: dict[int, Location | None]) -> None:
        self._ids = ids
        self._lines = lines
        self._odd = odd

    def __len__(self) -> int:
        return len(self._ids)

    @overload
    def __getitem__(self, k: int) -> Location | None: ...

    @overload
    def __getitem__(self, k: slice) -> list[Location | None]: ...

    def __getitem__(self, k: int | slice) -> Location | list[Location | None] | None:
        if isinstance(k, slice):
            return [self[j] for j in range(*k.indices(len(self)))]
        k = range(len(self))[k]  # negative indices, and IndexError
        if k in self._odd:
            return self._odd[k]
        path, _, name = location_of(self._ids[k])
        return path, self._lines[k], name

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Sequence):
            return NotImplemented
        return len(self) == len(other) and all(
            a == b for a, b in zip(self, other, strict=True))

    __hash__ = None  # type: ignore[assignment]  # mutable-style equality, like a list


def _typed(values: Any, *kinds: type) -> list[Any]:
    """``values`` itself, if it is a list of only ``kinds`` (TypeError otherwise)."""
    if type(values) is not list or not set(map(type, values)) <= set(kinds):
        raise TypeError(f"expected a list of {' or '.join(k.__name__ for k in kinds)}")
    return values


def _flags(indices: Any, n: int) -> Sequence[bool]:
    """Per test, whether its index is among ``indices`` (empty: none is)."""
    if not _typed(indices, int):
        return ()
    out = [False] * n
    for k in indices:
        if not 0 <= k < n:
            raise ValueError(f"test index {k} out of range")
        out[k] = True
    return out


def _dense(pairs: Any, n: int) -> list[str | None]:
    out: list[str | None] = [None] * n
    for k, value in pairs:
        out[k] = str(value)
    return out


def _documents(pairs: Any, n: int) -> list[DocumentKind | None] | tuple[()]:
    if not pairs:
        return ()
    out: list[DocumentKind | None] = [None] * n
    for k, kind in pairs:
        if kind not in ("file", "module"):
            raise ValueError(f"unknown document kind {kind!r}")
        out[k] = kind
    return out


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


#: Controller -> worker, ahead of a dispatch: scopes that end with its last test.
CLOSING = "dagorder-closing"


def closing(nodeid: str, scopes: list[str]) -> tuple[str, str, list[str]]:
    """Controller -> worker, ahead of a dispatch that ends with ``nodeid``: no test
    of ``scopes`` (node ids of its class and module, innermost first) is left for
    any worker, so its teardown may end them, as pytest's would before another
    module."""
    return (CLOSING, nodeid, scopes)


def read_closing(raw: object) -> tuple[str, list[str]] | None:
    """(node id, scopes) of a :func:`closing` message; None if it is not one."""
    if (isinstance(raw, tuple) and len(raw) == 3 and raw[0] == CLOSING
            and isinstance(raw[1], str) and isinstance(raw[2], list)):
        return raw[1], [str(s) for s in raw[2]]
    return None
