"""What a worker and the controller tell each other on the side channel.

The controller of an xdist run does not collect, so each worker ships what
only a collection knows, as facts (:class:`~pytest_dagorder.planning.facts.Facts`:
ids, locations, scopes, the declared edges as the collection resolved them,
fixture use, markers, problems as found, counts), on the side channel opened
in ``pytest_configure_node``; the controller decides everything from them
(``deciding/decide.py``).  This module is the only place that knows the messages'
shape.

Every message is one envelope, ``(kind, data)``: ``kind`` one of the names
below, ``data`` made of the values execnet carries as they are (lists,
tuples, dicts of str, int, bool, None).  Each side reads the envelope with
:func:`route`, which picks the handler of its kind from a table (xdist's
controller likewise calls ``worker_<event>`` for each ``(event, kwargs)`` a
worker sends); a kind the table lacks is a :class:`WireError`, never
dropped.  Each kind has a function that makes its message and one that
reads its data into a named record.

Every worker says :func:`hello` after its collection: the format and
version it speaks, and the :class:`~pytest_dagorder.planning.facts.Census` the
controller decides from whether the run needs the DAG machinery; if it
does, the controller sends :data:`BARRIERS` and the worker installs its
barrier item and the gate that hides it.  A worker running another version
is refused with both versions named (its message may mean something else
even where the shape still fits).  The controller then asks one worker for
its facts (:data:`PLAN_REQUEST`, answered by :func:`encode`).

The same channel later carries the values tests publish (``dag.publish``):
a worker sends :func:`published` for a test that passed, the controller
sends :func:`deliveries` ahead of the tests that read results, and
:func:`closing` ahead of a dispatch whose last test ends scopes.  A
worker's ``pytest.exit()`` travels as :func:`encode_exit`; a worker that
cannot read a message of the controller says so with :func:`refused`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final, TypeGuard, TypeVar

from ... import __version__
from ...declaring.notes import EdgesFileNote, EvidenceNote, FenceNote, ShardNote
from ...planning.facts import Census, Facts

#: Bumped whenever a message changes meaning: a worker that speaks another
#: format is refused at its hello (:func:`check_hello`).
FORMAT = 12
#: Keys of ``workerinput`` the controller fills in ``pytest_configure_node``:
#: the side channel the facts travel on, and the controller's ``--dist``
#: (workers do not see it; a ``pytest.exit()`` is handed on only in the DAG modes).
CHANNEL_KEY = "dagorder_channel"
DIST_KEY = "dagorder_dist"

# -- the kinds ------------------------------------------------------------------

#: Worker -> controller: the format, version and census (:func:`hello`).
HELLO: Final = "hello"
#: Worker -> controller, when asked: the facts of its collection (:func:`encode`).
FACTS: Final = "facts"
#: Worker -> controller: a test called ``pytest.exit()`` (:func:`encode_exit`).
EXIT: Final = "exit"
#: Worker -> controller: a passed test's published values (:func:`published`).
PUBLISHED: Final = "published"
#: Worker -> controller: a message of the controller it could not read (:func:`refused`).
REFUSED: Final = "refused"
#: Controller -> the worker whose facts it follows: the first whose
#: collection came in (every worker collects the same, so gathering and
#: sending them once is enough).
PLAN_REQUEST: Final = "plan-please"
#: Controller -> worker, before its first test: the run needs the barrier
#: item and the gate (see ``deciding/decide.plain_run``); without it the worker
#: stays as xdist made it.
BARRIERS: Final = "barriers"
#: Controller -> worker, ahead of a dispatch: the values its readers lack (:func:`deliveries`).
DELIVERY: Final = "deliveries"
#: Controller -> worker, ahead of a dispatch: scopes its last test ends (:func:`closing`).
CLOSING: Final = "closing"

#: One message: its kind and its data.
Message = tuple[str, Any]
H = TypeVar("H")


class WireError(ValueError):
    """A message that this side cannot read.

    ``worker_version`` is the version the worker announced (None if the
    message did not say).
    """

    def __init__(self, message: str, worker_version: str | None = None) -> None:
        super().__init__(message)
        self.worker_version = worker_version


def route(raw: object, table: Mapping[str, H]) -> tuple[H, Any]:
    """The entry of ``table`` for the kind of the envelope ``raw``, and its data.

    :class:`WireError` if ``raw`` is no envelope or ``table`` has no entry
    for its kind (both sides run the same version, checked at the hello: a
    kind one side does not read is a fault to report, not to pass over).
    """
    kind, data = _opened(raw)
    if kind not in table:
        raise WireError(f"a message of unknown kind {kind!r} on the dagorder channel "
                        f"(expected {', '.join(map(repr, table))})")
    return table[kind], data


def _opened(raw: object) -> Message:
    if type(raw) is tuple and len(raw) == 2 and type(raw[0]) is str:
        return raw[0], raw[1]
    raise WireError(f"a message that is not a (kind, data) pair: {type(raw).__name__}")


# -- hello ----------------------------------------------------------------------

def hello(census: Census) -> Message:
    """The first message of every worker: which format and version it speaks,
    and its collection's census.

    Every worker's is read (a cheap check).  The controller follows the
    facts of one worker, which ships them after this when sent
    :data:`PLAN_REQUEST`; a run that did not ask for the plugin needs no
    facts where the first census shows a plain run: xdist schedules it.
    """
    return (HELLO, {"format": FORMAT, "version": __version__,
                    "census": dataclasses.asdict(census)})


def check_hello(raw: object) -> Census:
    """The census of the hello ``raw``; :class:`WireError` if ``raw`` is not the
    hello of this format and version."""
    data = _checked(raw)
    try:
        values = data["census"]
        if (type(values) is not dict or set(values) != _CENSUS
                or not all(type(v) in (int, bool) for v in values.values())):
            raise TypeError("a census is a dict of counts, by name")
        return Census(**values)
    except (KeyError, TypeError) as exc:
        raise WireError(f"a worker sent a malformed hello ({exc!r}); "
                        "install the same pytest-dagorder version everywhere",
                        data.get("version")) from None


_CENSUS = {f.name for f in dataclasses.fields(Census)}


def _checked(raw: object) -> dict[str, Any]:
    """The data of the hello ``raw``, if its format and version are this process's."""
    try:
        kind, data = _opened(raw)
    except WireError:
        kind, data = "", None
    if kind != HELLO or type(data) is not dict:
        data = {}
    version = data.get("version")
    if data.get("format") != FORMAT or version != __version__:
        theirs = f"pytest-dagorder {version}" if isinstance(version, str) else (
            "an unknown version of pytest-dagorder")
        raise WireError(
            f"a worker runs {theirs}, this process runs pytest-dagorder {__version__}; "
            "install the same version where the workers run",
            version if isinstance(version, str) else None,
        )
    return data


# -- the controller's orders -----------------------------------------------------

def plan_request() -> Message:
    """Controller -> worker: ship your facts (:data:`PLAN_REQUEST`)."""
    return (PLAN_REQUEST, None)


def barriers() -> Message:
    """Controller -> worker: install the barrier and its gate (:data:`BARRIERS`)."""
    return (BARRIERS, None)


# -- facts ----------------------------------------------------------------------

def encode(facts: Facts) -> Message:
    """The facts as one message: a dict of their fields, as they are."""
    fields = {f.name: getattr(facts, f.name) for f in _FIELDS}
    for name in _RECORDS:
        # execnet carries a plain tuple, not a named one.
        if fields[name] is not None:
            fields[name] = tuple(fields[name])
    return (FACTS, fields)


_FIELDS = dataclasses.fields(Facts)
#: Per field, the types its value (a list) may hold; checked in bulk, so a
#: message of another shape ends in a WireError, not deep in the controller.
_KINDS: dict[str, tuple[type, ...]] = {
    "ids": (str,), "locations": (tuple, type(None)), "module_scopes": (str, type(None)),
    "class_scopes": (str, type(None)), "requires": (tuple,), "after": (tuple,),
    "outside": (str,), "problems": (tuple,), "errors": (tuple,), "fail_checks": (tuple,),
    "xdist_groups": (str, type(None)), "resources": (list,), "exclusive": (bool,),
    "shares_nothing": (bool,), "runtime_depends": (bool,), "dag_users": (bool,),
    "documents": (str, type(None)), "module_fixtures": (bool,),
    "fixtures": (list, type(None)), "ordinals": (int, type(None)),
    "fence_verdicts": (str, type(None)),
    "time_limits": (float, type(None)),
}
_SCALARS: dict[str, type] = {"graph": bool, "ordering_failure": str, "deselected": int,
                             "shard_left": int, "complete": bool, "pulled_back": int,
                             "lf_blocked": int}
#: The fields that are a named record (sent as a plain tuple of its values), or None.
_RECORDS: dict[str, type[EdgesFileNote | ShardNote | EvidenceNote | FenceNote]] = {
    "edges_file": EdgesFileNote, "shard": ShardNote, "evidence": EvidenceNote,
    "fence_evidence": FenceNote}


def decode(raw: object) -> Facts:
    """The facts in ``raw``; :class:`WireError` if it is not a facts message this
    version reads (its version was checked at the hello, on the same channel)."""
    _, fields = route(raw, {FACTS: None})
    try:
        return _facts(fields)
    except (TypeError, ValueError) as exc:
        raise WireError(f"a worker sent a malformed collection message ({exc!r}); "
                        "install the same pytest-dagorder version everywhere") from None


def _facts(fields: Any) -> Facts:
    if type(fields) is not dict or set(fields) != {f.name for f in _FIELDS}:
        raise ValueError("the fields of a collection message")
    for name, kinds in _KINDS.items():
        value = fields[name]
        if type(value) is not list or not {type(v) for v in value} <= set(kinds):
            raise TypeError(f"{name}: expected a list of "
                            f"{' or '.join(k.__name__ for k in kinds)}")
    for name, kind in _SCALARS.items():
        if type(fields[name]) is not kind:
            raise TypeError(f"{name}: expected {kind.__name__}")
    for name, record in _RECORDS.items():
        value = fields[name]
        size = len(record._fields)
        if value is not None and (type(value) is not tuple or len(value) != size):
            raise TypeError(f"{name}: expected a tuple of {size} or None")
    n = len(fields["ids"])
    for name in PER_TEST:
        if fields[name] and len(fields[name]) != n:
            raise ValueError(f"{name}: one entry per test")
    positions = n + len(fields["outside"])
    for name in ("requires", "after"):
        edges = fields[name]
        if fields["graph"] and len(edges) != positions and (edges or name == "requires"):
            raise ValueError(f"{name}: one entry per position")
        if any(type(p) is not int or not 0 <= p < positions for ps in edges for p in ps):
            raise ValueError(f"{name}: positions out of range")
    if any(kind not in (None, "file", "module") for kind in fields["documents"]):
        raise ValueError("an unknown document kind")
    lifted = fields["lifted"]
    if type(lifted) is not tuple or any(
            type(pair) is not tuple or len(pair) != 2
            or any(type(p) is not int or not 0 <= p < positions for p in pair)
            for pair in lifted):
        raise ValueError("lifted: pairs of positions")
    records = {name: None if fields[name] is None else record(*fields[name])
               for name, record in _RECORDS.items()}
    return Facts(**{**fields, **records})


#: The per-test fields (checked for their length).
PER_TEST = ("locations", "module_scopes", "class_scopes", "xdist_groups", "resources",
            "exclusive", "shares_nothing", "runtime_depends", "dag_users", "documents",
            "module_fixtures", "fixtures", "ordinals", "fence_verdicts", "time_limits")


# -- during the run ---------------------------------------------------------------

@dataclass(frozen=True)
class ExitRequest:
    """A test on a worker called ``pytest.exit(message, returncode)``.

    Sent after the hello (and the facts, if they are shipped): the controller
    ends the session the way pytest ends it (see ``DependencyScheduling``).
    """

    message: str
    returncode: int | None


def encode_exit(request: ExitRequest) -> Message:
    return (EXIT, (request.message, request.returncode))


def read_exit(data: object) -> ExitRequest:
    """The request in the data of an :data:`EXIT` message."""
    if _pair(data, str, int) or _pair(data, str, type(None)):
        return ExitRequest(data[0], data[1])
    raise _malformed(EXIT)


@dataclass(frozen=True)
class Published:
    """A test that passed on a worker (``nodeid``) and the values it published."""

    nodeid: str
    values: dict[str, object]


def published(nodeid: str, values: dict[str, object]) -> Message:
    """Worker -> controller: ``nodeid`` passed, having published ``values``."""
    return (PUBLISHED, (nodeid, values))


def read_published(data: object) -> Published:
    """The record in the data of a :data:`PUBLISHED` message."""
    if _pair(data, str, dict):
        return Published(data[0], data[1])
    raise _malformed(PUBLISHED)


@dataclass(frozen=True)
class Delivery:
    """Values of prerequisites a worker lacks (by node id), and the tests of the
    coming dispatch that may now read them (``ready``)."""

    ready: list[str]
    values: dict[str, dict[str, object]]


def deliveries(ready: list[str], values: dict[str, dict[str, object]]) -> Message:
    """Controller -> worker, ahead of a dispatch: the values of prerequisites it
    lacks (by node id), and the tests of the dispatch (``ready``) that may now read."""
    return (DELIVERY, (ready, values))


def read_deliveries(data: object) -> Delivery:
    """The record in the data of a :data:`DELIVERY` message."""
    if _pair(data, list, dict):
        return Delivery(data[0], data[1])
    raise _malformed(DELIVERY)


@dataclass(frozen=True)
class Closing:
    """The scopes (node ids of its class and module, innermost first) that end
    with test ``nodeid``."""

    nodeid: str
    scopes: list[str]


def closing(nodeid: str, scopes: list[str]) -> Message:
    """Controller -> worker, ahead of a dispatch that ends with ``nodeid``: no test
    of ``scopes`` (node ids of its class and module, innermost first) is left for
    any worker, so its teardown may end them, as pytest's would before another
    module."""
    return (CLOSING, (nodeid, scopes))


def read_closing(data: object) -> Closing:
    """The record in the data of a :data:`CLOSING` message."""
    if _pair(data, str, list):
        return Closing(data[0], [str(s) for s in data[1]])
    raise _malformed(CLOSING)


def refused(error: WireError) -> Message:
    """Worker -> controller: a message of the controller's it could not read."""
    return (REFUSED, str(error))


def read_refused(data: object) -> WireError:
    """The error a worker reported in a :data:`REFUSED` message."""
    return WireError(f"the worker could not read the controller: {data}")


def _pair(data: object, first: type, second: type) -> TypeGuard[tuple[Any, Any]]:
    """Whether ``data`` is a pair of exactly these types, as every reader's data is."""
    return (type(data) is tuple and len(data) == 2 and type(data[0]) is first
            and type(data[1]) is second)


def _malformed(kind: str) -> WireError:
    return WireError(f"a malformed {kind!r} message on the dagorder channel")
