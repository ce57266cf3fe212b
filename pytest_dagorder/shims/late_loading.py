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
runners) load through :func:`load` too, in processes without pytest.
"""

from __future__ import annotations

import importlib
import sys
from types import ModuleType
from typing import Final, final

#: Each module loaded late, and the run that needs it.
LATE: Final[dict[str, str]] = {
    "pytest_dagorder.drivers.distributed.worker": "an xdist worker",
    "pytest_dagorder.drivers.distributed.controller": "an xdist controller",
    "pytest_dagorder.drivers.distributed.scheduling": "an xdist controller once a suite declares",
    "pytest_dagorder.shims.xdist_internals": "the question whether xdist runs a session",
    "pytest_dagorder.drivers.serial": "a run without xdist",
    "pytest_dagorder.finder.find_missing": "--dag-find-missing",
    "pytest_dagorder.features.durations": "a durations file or a --dag-shard part",
    "pytest_dagorder.features.sharding": "a --dag-shard part",
    "pytest_dagorder.live_run.dag_fixture": "a test that requests the dag fixture",
    "pytest_dagorder.live_run.dag_run": "a run that schedules through the core",
    "pytest_dagorder.features.stall": "a serial run's stall report",
    "pytest_dagorder.declaring.edges_file": "--dag-edges (or ini dag_edges)",
    "pytest_dagorder.declaring.evidence": "an edges file read by an xdist worker",
    "pytest_dagorder.live_run.visual": "--dag-graph or --dag-timeline",
    "pytest_dagorder.options.wording": "a message naming an option (here: a bad --dag-shard)",
    "pytest_dagorder.core.graph": "a suite that declares an edge",
    "pytest_dagorder.core.affinity": "the affinity groups and files kept whole under xdist",
    "pytest_dagorder.core.shards": "a --dag-shard part",
    "pytest_dagorder.core.bounds": "affinity groups weighed by recorded durations",
    "pytest_dagorder.core.module_runs": "a run that schedules through the core",
    "pytest_dagorder.core.published": "a run that schedules through the core",
    "pytest_dagorder.migration.sorting": "pytest-order's markers",
    "pytest_dagorder.migration.order": "pytest-order's markers",
    "pytest_dagorder.migration.depends": "pytest-depends' markers",
    "pytest_dagorder.migration.dependency": "pytest-dependency's markers",
    "pytest_dagorder.migration.common": "a foreign plugin's markers",
    "pytest_dagorder.declaring.foreign_wording": "a foreign plugin's markers or runtime depends()",
    "pytest_dagorder.options.markers": "the declaration decorators (public names)",
    "pytest_dagorder.runners.dag_scheduler": "DagScheduler (public name)",
    "pytest_dagorder.runners.dag_executor": "DagExecutor (public name)",
}


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
