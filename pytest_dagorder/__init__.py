"""pytest-dagorder: run tests (or plain callables) as a dependency DAG.

The standalone runners (:class:`DagScheduler`, :class:`Task`,
:class:`DagExecutor`) and the errors import without pytest; the declaration
decorators (:func:`depends_on`, :func:`run_after`) need pytest.  Both are
loaded on first use: every test module that imports a decorator, and every
xdist worker, imports this package, and neither needs the thread-pool
runners.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

__version__ = "0.1.0"

from .core.errors import (
    CycleError,
    DependencyError,
    DuplicateTaskError,
    SelfDependencyError,
    UnknownDependencyError,
)
from .shims.late_loading import load as _load

if TYPE_CHECKING:
    from .live_run.dag_fixture import Dag
    from .options.markers import depends_on, run_after
    from .runners.dag_executor import DagExecutor, PrerequisiteFailed
    from .runners.dag_scheduler import DagScheduler, Task, TaskResult

__all__ = [
    "CycleError",
    "Dag",
    "DagExecutor",
    "DagScheduler",
    "DependencyError",
    "DuplicateTaskError",
    "PrerequisiteFailed",
    "SelfDependencyError",
    "Task",
    "TaskResult",
    "UnknownDependencyError",
    "__version__",
    "depends_on",
    "run_after",
]

#: Names loaded on first use, by the module that has them.
_LAZY = {
    "depends_on": "options.markers",
    "run_after": "options.markers",
    "Dag": "live_run.dag_fixture",
    "DagScheduler": "runners.dag_scheduler",
    "Task": "runners.dag_scheduler",
    "TaskResult": "runners.dag_scheduler",
    "DagExecutor": "runners.dag_executor",
    "PrerequisiteFailed": "runners.dag_executor",
}


def __getattr__(name: str) -> object:
    if name in _LAZY:
        value = getattr(_load(f"{__name__}.{_LAZY[name]}"), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
