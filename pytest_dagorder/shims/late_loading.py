"""The package's modules that load late: one table of what and why, one function that loads.

A process imports only what its run uses (tests/test_pay_for_use.py checks
which modules load): ``plugin.py`` loads what every process needs, and every
other part is loaded by :func:`load` the first time it is used, as plain
Python (pytest's assertion rewriter paused: see
``internals.assertion_rewriting_paused``).  A module that uses one of them
binds it to a :class:`Later`, beside an import only the type checker reads::

    if TYPE_CHECKING:
        from . import durations
    else:
        durations = Later("pytest_dagorder.features.durations")

Nothing here imports pytest: the package root's public names (the thread-pool
runners, the declaration decorators) are in the same table and load through
:func:`public`, in processes without pytest too.
"""

from __future__ import annotations

import importlib
import sys
from dataclasses import dataclass
from types import ModuleType
from typing import Final, final


@final
@dataclass(frozen=True)
class Late:
    """Why a module loads late: the run that needs it (``why``), and the public
    names of the package root it holds (``pytest_dagorder.<name>``)."""

    why: str
    public: tuple[str, ...] = ()


#: Each module loaded late, and the run that needs it.
LATE: Final[dict[str, Late]] = {
    "pytest_dagorder.drivers.distributed.worker": Late("an xdist worker"),
    "pytest_dagorder.drivers.distributed.controller": Late("an xdist controller"),
    "pytest_dagorder.drivers.distributed.scheduling": Late(
        "an xdist controller once a suite declares"),
    "pytest_dagorder.shims.xdist_internals": Late(
        "the question whether xdist runs a session"),
    "pytest_dagorder.drivers.serial": Late("a run without xdist"),
    "pytest_dagorder.finder.find_missing": Late("--dag-find-missing"),
    "pytest_dagorder.features.durations": Late("a durations file or a --dag-shard part"),
    "pytest_dagorder.features.sharding": Late("a --dag-shard part"),
    "pytest_dagorder.live_run.dag_fixture": Late("a test that requests the dag fixture", ("Dag",)),
    "pytest_dagorder.live_run.dag_run": Late("a run that schedules through the core"),
    "pytest_dagorder.features.stall": Late("a serial run's stall report"),
    "pytest_dagorder.declaring.edges_file": Late("--dag-edges (or ini dag_edges)"),
    "pytest_dagorder.declaring.evidence": Late("an edges file read by an xdist worker"),
    "pytest_dagorder.live_run.visual": Late("--dag-graph or --dag-timeline"),
    "pytest_dagorder.options.wording": Late(
        "a message naming an option (here: a bad --dag-shard)"),
    "pytest_dagorder.core.graph": Late("a suite that declares an edge"),
    "pytest_dagorder.core.affinity": Late(
        "the affinity groups and files kept whole under xdist"),
    "pytest_dagorder.core.shards": Late("a --dag-shard part"),
    "pytest_dagorder.core.bounds": Late("affinity groups weighed by recorded durations"),
    "pytest_dagorder.core.module_runs": Late("a run that schedules through the core"),
    "pytest_dagorder.core.published": Late("a run that schedules through the core"),
    "pytest_dagorder.core.state_machine": Late("a run that schedules through the core"),
    "pytest_dagorder.migration.sorting": Late("pytest-order's markers"),
    "pytest_dagorder.migration.order": Late("pytest-order's markers"),
    "pytest_dagorder.migration.depends": Late("pytest-depends' markers"),
    "pytest_dagorder.migration.dependency": Late("pytest-dependency's markers"),
    "pytest_dagorder.migration.common": Late("a foreign plugin's markers"),
    "pytest_dagorder.declaring.foreign_wording": Late(
        "a foreign plugin's markers or runtime depends()"),
    "pytest_dagorder.options.markers": Late(
        "the declaration decorators", ("depends_on", "run_after")),
    "pytest_dagorder.runners.dag_scheduler": Late(
        "the standalone scheduler", ("DagScheduler", "Task", "TaskResult")),
    "pytest_dagorder.runners.dag_executor": Late(
        "the standalone executor", ("DagExecutor", "PrerequisiteFailed")),
}

#: The package root's public names, by the module that holds each (from :data:`LATE`).
_PUBLIC: Final = {name: module for module, late in LATE.items() for name in late.public}


def public(name: str) -> object:
    """The package root's public ``name``, from the module of :data:`LATE` that holds it."""
    module = _PUBLIC.get(name)
    if module is None:
        raise AttributeError(f"module 'pytest_dagorder' has no attribute {name!r}")
    return getattr(load(module), name)


def load(name: str) -> ModuleType:
    """Module ``name`` of :data:`LATE`, imported now if it is not yet."""
    module = sys.modules.get(name)
    if module is not None:
        return module
    if name not in LATE:
        raise ModuleNotFoundError(f"{name} is not among the modules loaded late", name=name)
    if "pytest" not in sys.modules:  # no pytest, no rewriter to pause
        return importlib.import_module(name)
    from .pytest_internals import assertion_rewriting_paused  # imports pytest: only where it runs

    with assertion_rewriting_paused():
        return importlib.import_module(name)


@final
class Later:
    """Module ``name`` of :data:`LATE`, loaded when one of its attributes is first read.

    Every read goes to the module itself (nothing is copied), so a test that
    patches the module's attribute is seen here too.  Only public names are
    answered: pytest and pluggy read every global of a plugin module (hooks,
    fixtures) through private names, and that must not load anything.
    """

    __slots__ = ("__name",)

    def __init__(self, name: str) -> None:
        if name not in LATE:
            raise ModuleNotFoundError(f"{name} is not among the modules loaded late",
                                      name=name)
        self.__name = name

    def __getattr__(self, attr: str) -> object:
        if attr.startswith("_"):
            raise AttributeError(attr)
        return getattr(load(self.__name), attr)

    def __repr__(self) -> str:
        return f"<{self.__name}, loaded on first use>"
