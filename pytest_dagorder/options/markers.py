"""The declaration API: decorators that apply this plugin's markers."""

from __future__ import annotations

from collections.abc import Callable

import pytest

#: Marker names, as registered by the plugin.
DEPENDS_ON = "depends_on"
RUN_AFTER = "run_after"
#: ``@pytest.mark.dag_resource("postgres", ...)``: tests naming the same
#: resource run at most ``--dag-limit`` at a time (default 1).
RESOURCE = "dag_resource"
#: ``@pytest.mark.dag_exclusive``: nothing else runs anywhere meanwhile.
EXCLUSIVE = "dag_exclusive"
#: ``@pytest.mark.dag_shares_nothing`` (a test, a class, a module's
#: ``pytestmark``): the user's statement that the test leaves no process
#: state for its dependents and reads none its prerequisites left, beyond
#: the session and package fixtures it requests.
SHARES_NOTHING = "dag_shares_nothing"

Target = str | Callable[..., object]


def depends_on(*targets: Target) -> pytest.MarkDecorator:
    """Run the decorated test (or every test of a class) only once ``targets`` passed.

    A target is a test name, ``Class::test``, a node id, a module or class node
    id, or the test function itself.  Same as ``@pytest.mark.depends_on(...)``.
    """
    mark: pytest.MarkDecorator = getattr(pytest.mark, DEPENDS_ON)
    # with_args: a lone function argument would otherwise be taken as the
    # thing to decorate rather than as the target.
    return mark.with_args(*targets)


def run_after(*targets: Target) -> pytest.MarkDecorator:
    """Run the decorated test after ``targets`` ended, whatever their outcome.

    Ordering only: a failed target does not skip the test (a cleanup step
    after a group, say).  Same as ``@pytest.mark.run_after(...)``.
    """
    mark: pytest.MarkDecorator = getattr(pytest.mark, RUN_AFTER)
    # with_args: a lone function argument would otherwise be taken as the
    # thing to decorate rather than as the target.
    return mark.with_args(*targets)
