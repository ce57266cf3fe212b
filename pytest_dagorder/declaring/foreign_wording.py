"""The sentences a user reads about pytest-dependency's and pytest-depends'
declarations and their run-time ``depends()``.

Beside the readers that say them, so the core words no other plugin;
tests/test_wording.py pins each text.
"""

from __future__ import annotations

from ..core.wording import plural


def depends_not_passed(test: str, name: str, how: str) -> str:
    return f"{test} depends on {name}, which did not pass{how}"


def depends_no_test(test: str, name: str, scope: str) -> str:
    return (f"{test} depends on {name}, which names no test of this run marked "
            f"with @pytest.mark.dependency in its {scope} scope")


def depends_other_process(test: str, name: str, affinity: str) -> str:
    return (f"{test} depends on {name}, which did not run in this worker process "
            f"before it: a runtime depends() sees only tests of {test}'s own "
            f"affinity group (--dag-affinity={affinity}) that an edge runs first; declare the "
            "dependency with @pytest.mark.dependency(depends=[...]) to have it scheduled")


def depends_not_run_yet(test: str, name: str) -> str:
    return (f"{test} depends on {name}, which has not run yet: a runtime depends() "
            "does not order tests; declare the dependency with "
            "@pytest.mark.dependency(depends=[...]) to have it run first")


#: How a skip for a name that names no test ends; the summary finds the names by it.
UNKNOWN_TAIL = ", which names no test of this run"


def foreign_unknown(test: str, names: list[str], scope: str = "", hint: str = "") -> str:
    """pytest-dependency / pytest-depends: a name that matches nothing skips the dependent."""
    where = f" (scope {scope!r})" if scope and scope != "module" else ""
    return f"{test} depends on {', '.join(map(repr, names))}{UNKNOWN_TAIL}{where}{hint}"


def foreign_itself(test: str, names: list[str]) -> str:
    """pytest-dependency: a test that names itself is skipped (it has no outcome yet)."""
    return (f"{test} depends on {', '.join(map(repr, names))}, itself: pytest-dependency "
            "skips such a test, as it has no outcome before it runs (remove the name)")


def foreign_letters(test: str, depends: str, *, ignore_unknown: bool = False) -> str:
    """pytest-dependency: ``depends='test_a'``, a string it reads letter by letter."""
    then = ("with --ignore-unknown-dependency no letter counts, so the test runs "
            "without prerequisites" if ignore_unknown else
            f"no test is named {depends[0]!r}, so it skips the test")
    return (f"{test} has depends={depends!r}, a string: pytest-dependency reads it letter "
            f"by letter and {then} (write depends=[{depends!r}])")


def foreign_cycle(test: str, target: str, cycle: list[str]) -> str:
    """pytest-dependency: a test whose prerequisite comes later on a cycle is skipped."""
    return (f"{test} depends on {target}, which comes after it on a dependency cycle "
            f"({' -> '.join(cycle)}): pytest-dependency skips such a test (remove one of "
            "these dependencies)")


def foreign_failed(test: str, failed: list[str]) -> str:
    """pytest-depends' ``--failed-dependency-action=fail``: its own message."""
    return f"{test} depends on {', '.join(failed)}"


def unknown_names_line(names: list[str]) -> str:
    """Summary: the names that matched nothing, so a typo is not lost among the skips."""
    return (f"dagorder: tests were skipped for names that match no test: "
            f"{', '.join(map(repr, names))}")


def depends_unmarked(test: str, names: str) -> str:
    return (f"{test} depends on {names}, which is not marked with "
            "@pytest.mark.dependency (mark it, or set automark_dependency = true)")


def runtime_depends_header(modules: int) -> str:
    return (f"dagorder: runtime depends() in {plural(modules, 'module')}: "
            "each runs on one worker, in collection order")
