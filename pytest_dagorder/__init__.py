"""pytest-dagorder: run tests (or plain callables) as a dependency DAG."""

from __future__ import annotations

from .dag_executor import DagExecutor, PrerequisiteFailed
from .errors import (
    CycleError,
    DependencyError,
    DuplicateTaskError,
    SelfDependencyError,
    UnknownDependencyError,
)
from .executor import DagScheduler, Task, TaskResult
from .markers import depends_on, run_after

__all__ = [
    "CycleError",
    "DagExecutor",
    "DagScheduler",
    "DependencyError",
    "DuplicateTaskError",
    "PrerequisiteFailed",
    "SelfDependencyError",
    "Task",
    "TaskResult",
    "UnknownDependencyError",
    "depends_on",
    "run_after",
]
