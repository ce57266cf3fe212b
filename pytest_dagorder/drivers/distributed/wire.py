"""What a worker and the controller tell each other on the side channel.

The controller of an xdist run does not collect, so each worker ships what
only a collection knows, as facts (:class:`~pytest_dagorder.planning.facts.Facts`:
ids, locations, scopes, the declared edges as the collection resolved them,
fixture use, markers, problems as found, counts), on the side channel opened
in ``pytest_configure_node``; the controller decides everything from them
(``deciding/decide.py``).  This module is the only place that knows the messages'
shape: the worker calls :func:`hello` and :func:`encode`, the controller
:func:`check_hello` and :func:`decode`.  Every message is made of the values
execnet carries as they are (lists, tuples, dicts of str, int, bool, None).

Every worker says :func:`hello` after its collection: the format and
version it speaks, and the :class:`~pytest_dagorder.planning.facts.Census` the
controller decides from whether the run needs the DAG machinery; if it
does, the controller sends :data:`BARRIERS` and the worker installs its
barrier item and the gate that hides it.  A worker running another version
is refused with both versions named (its message may mean something else
even where the shape still fits).

The same channel later carries the values tests publish (``dag.publish``):
a worker sends :func:`published` for a test that passed, the controller
sends :func:`deliveries` ahead of the tests that read results.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
from dataclasses import dataclass
from typing import Any

from ... import __version__
from ...planning.facts import Census, Facts

#: Bumped whenever a message changes meaning (9: a state scope is its
#: group's reasons; 10: facts only, every decision on the controller, the
#: census in the hello and the controller's :data:`BARRIERS`).
FORMAT = 10
#: Keys of ``workerinput`` the controller fills in ``pytest_configure_node``:
#: the side channel the facts travel on, and the controller's ``--dist``
#: (workers do not see it; a ``pytest.exit()`` is handed on only in the DAG modes).
CHANNEL_KEY = "dagorder_channel"
DIST_KEY = "dagorder_dist"
#: What the controller sends the worker whose facts it follows: the first
#: whose collection came in (every worker collects the same, so gathering
#: and sending them once is enough).
PLAN_REQUEST = "dagorder-plan-please"
#: Controller -> worker, before its first test: the run needs the barrier
#: item and the gate (see ``deciding/decide.plain_run``); without it the worker
#: stays as xdist made it.
BARRIERS = "dagorder-barriers"


class WireError(ValueError):
    """A message from a worker that this controller cannot read.

    ``worker_version`` is the version the worker announced (None if the
    message did not say).
    """

    def __init__(self, message: str, worker_version: str | None = None) -> None:
        super().__init__(message)
        self.worker_version = worker_version


def hello(census: Census) -> dict[str, Any]:
    """The first message of every worker: which format and version it speaks,
    and its collection's census.

    Every worker's is read (a cheap check).  The controller follows the
    facts of one worker, which ships them after this when sent
    :data:`PLAN_REQUEST`; a run that did not ask for the plugin needs no
    facts where the first census shows a plain run: xdist schedules it.
    """
    return {"format": FORMAT, "version": __version__,
            "census": dataclasses.astuple(census)}


def check_hello(raw: object) -> Census:
    """The census of the hello ``raw``; :class:`WireError` if ``raw`` is not the
    hello of this format and version."""
    data = _checked(raw)
    try:
        values = data["census"]
        if type(values) is not tuple or not all(type(v) in (int, bool) for v in values):
            raise TypeError("a census is a tuple of counts")
        return Census(*values)
    except (KeyError, TypeError) as exc:
        raise WireError(f"a worker sent a malformed hello ({exc!r}); "
                        "install the same pytest-dagorder version everywhere",
                        data.get("version")) from None


@dataclass(frozen=True)
class ExitRequest:
    """A test on a worker called ``pytest.exit(message, returncode)``.

    Sent after the hello (and the facts, if they are shipped): the controller
    ends the session the way pytest ends it (see ``DependencyScheduling``).
    """

    message: str
    returncode: int | None


def encode_exit(request: ExitRequest) -> dict[str, Any]:
    return {"format": FORMAT, "version": __version__,
            "exit": (request.message, request.returncode)}


def decode_exit(raw: object) -> ExitRequest | None:
    """The exit request in ``raw``; None if ``raw`` is something else."""
    try:
        data = _checked(raw)
        message, code = data["exit"]
        return ExitRequest(str(message), None if code is None else int(code))
    except (WireError, KeyError, TypeError, ValueError):
        return None


def encode(facts: Facts) -> dict[str, Any]:
    """The facts as one message: a dict of their fields, as they are."""
    return {"format": FORMAT, "version": __version__,
            "facts": {f.name: getattr(facts, f.name) for f in _FIELDS}}


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
    "time_limits": (float, type(None)),
}
_SCALARS: dict[str, type] = {"graph": bool, "ordering_failure": str, "deselected": int,
                             "shard_left": int, "complete": bool, "pulled_back": int,
                             "lf_blocked": int}
#: The fields that are a tuple of this many values, or None.
_RECORDS = {"edges_file": 5, "shard": 8, "evidence": 5}


def decode(raw: object) -> Facts:
    """The facts in ``raw``; :class:`WireError` if it is not a message this version reads."""
    data = _checked(raw)
    try:
        return _facts(data["facts"])
    except (KeyError, TypeError, ValueError) as exc:
        raise WireError(f"a worker sent a malformed collection message ({exc!r}); "
                        "install the same pytest-dagorder version everywhere",
                        data.get("version")) from None


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
    for name, size in _RECORDS.items():
        value = fields[name]
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
    return Facts(**fields)


#: The per-test fields (checked for their length).
PER_TEST = ("locations", "module_scopes", "class_scopes", "xdist_groups", "resources",
            "exclusive", "shares_nothing", "runtime_depends", "dag_users", "documents",
            "module_fixtures", "fixtures", "ordinals", "time_limits")


def _checked(raw: object) -> dict[str, Any]:
    """The message as a dict, if its format and version are this process's."""
    if isinstance(raw, str):
        # Earlier formats were JSON text: read only to name their version.
        with contextlib.suppress(ValueError):
            raw = json.loads(raw)
    data = raw if isinstance(raw, dict) else None
    version = data.get("version") if data is not None else None
    if data is None or data.get("format") != FORMAT or version != __version__:
        theirs = f"pytest-dagorder {version}" if isinstance(version, str) else (
            "an unknown version of pytest-dagorder")
        raise WireError(
            f"a worker runs {theirs}, this process runs pytest-dagorder {__version__}; "
            "install the same version where the workers run",
            version if isinstance(version, str) else None,
        )
    return data


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
