"""Errors raised for a malformed dependency graph.

Every error is a :class:`ValueError` and carries its data as attributes, so
a caller (the pytest plugin, a user of :class:`DagScheduler`) can render its
own message.  Validation reports every problem at once: a single problem is
raised as its own class, several as a :class:`DependencyError` whose
``errors`` lists each of them.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence


def name_of(task_id: Hashable) -> str:
    """How an id is shown in messages: strings as they are, anything else as repr."""
    return task_id if isinstance(task_id, str) else repr(task_id)


class DependencyError(ValueError):
    """Base class: the dependency graph cannot be run as declared."""

    errors: tuple[DependencyError, ...]

    def __init__(self, message: str, errors: Sequence[DependencyError] = ()) -> None:
        super().__init__(message)
        self.errors = tuple(errors) if errors else (self,)

    @classmethod
    def combine(cls, errors: Sequence[DependencyError]) -> DependencyError:
        """One error for several problems (the problem itself when there is one)."""
        if len(errors) == 1:
            return errors[0]
        lines = [f"{len(errors)} problems in the dependency graph:"]
        lines.extend(f"  - {err}" for err in errors)
        return DependencyError("\n".join(lines), errors)


class CycleError(DependencyError):
    """Tasks that depend on each other in a circle.

    ``cycle`` lists the ids in order, each depending on the next, and the
    first id repeated at the end (``a -> b -> a``: a depends on b, b on a).
    """

    cycle: tuple[Hashable, ...]

    def __init__(self, cycle: Sequence[Hashable]) -> None:
        self.cycle = tuple(cycle)
        path = " -> ".join(name_of(t) for t in self.cycle)
        super().__init__(
            f"dependency cycle: {path} (each depends on the next); "
            "remove one of these dependencies"
        )


class SelfDependencyError(CycleError):
    """A task that names itself as a prerequisite (a cycle of length one)."""

    def __init__(self, task_id: Hashable) -> None:
        super().__init__((task_id, task_id))
        DependencyError.__init__(
            self, f"{name_of(task_id)} depends on itself; remove it from its own prerequisites"
        )
        self.cycle = (task_id, task_id)


class UnknownDependencyError(DependencyError):
    """Prerequisites that name no task.

    ``missing`` maps each unknown id to the tasks that asked for it, in the
    order they were declared.
    """

    missing: dict[Hashable, tuple[Hashable, ...]]

    def __init__(self, missing: Mapping[Hashable, Sequence[Hashable]]) -> None:
        self.missing = {k: tuple(v) for k, v in missing.items()}
        parts = [
            f"{name_of(dep)} (required by {', '.join(name_of(r) for r in who)})"
            for dep, who in self.missing.items()
        ]
        super().__init__(
            "unknown prerequisite"
            + ("s" if len(parts) > 1 else "")
            + ": "
            + "; ".join(parts)
            + "; declare these tasks or fix the names"
        )


class DuplicateTaskError(DependencyError):
    """The same id given to more than one task (``duplicates``, in first-seen order)."""

    duplicates: tuple[Hashable, ...]

    def __init__(self, duplicates: Sequence[Hashable]) -> None:
        self.duplicates = tuple(duplicates)
        names = ", ".join(name_of(d) for d in self.duplicates)
        super().__init__(f"duplicate task id{'s' if len(self.duplicates) > 1 else ''}: {names}; "
                         "give every task a unique id")
