"""pytest-dagorder: run tests (or plain callables) as a dependency DAG.

The standalone runner (:class:`DagScheduler`, :class:`Task`) and the errors
import without pytest; the declaration decorators (:func:`depends_on`,
:func:`run_after`) need pytest and are loaded on first use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

__version__ = "0.1.0"

from .dag_executor import DagExecutor, PrerequisiteFailed
from .errors import (
    CycleError,
    DependencyError,
    DuplicateTaskError,
    SelfDependencyError,
    UnknownDependencyError,
)
from .executor import DagScheduler, Task, TaskResult

if TYPE_CHECKING:
    from .dag_fixture import Dag
    from .markers import depends_on, run_after

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

#: Names that need pytest, by the module that has them.
_LAZY = {"depends_on": "markers", "run_after": "markers", "Dag": "dag_fixture"}


def __getattr__(name: str) -> object:
    # The decorators build pytest marks: importing pytest (most of this
    # package's import time) waits until a test module asks for them.
    if name in _LAZY:
        import importlib

        value = getattr(importlib.import_module(f".{_LAZY[name]}", __name__), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
