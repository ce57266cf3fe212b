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
from .shims.late_loading import public as _public

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


def __getattr__(name: str) -> object:
    # The names loaded on first use are in shims/late_loading.py's one table.
    value = _public(name)
    globals()[name] = value
    return value
