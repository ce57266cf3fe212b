"""Ending the session from inside xdist's loop, the way pytest ends it."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, NoReturn

import pytest

from ...declaring.declarations import Problem
from ...live_run.dag_run import interrupted_message, report_problems

if TYPE_CHECKING:
    from xdist.workermanage import WorkerController


class WorkerGone(Exception):
    """A worker's side channel closed before the run could use it (the worker died)."""


def abort(config: pytest.Config, nodes: Sequence[WorkerController],
          problems: Sequence[Problem]) -> NoReturn:
    """Report ``problems`` as collection errors and end the session before any test ran.

    Raised from inside xdist's loop, ``Interrupted`` ends the session the way
    pytest ends a broken collection (exit status 2); the workers are told to
    shut down first so that tearing them down does not wait.
    """
    report_problems(config, problems)
    for node in nodes:
        node.shutdown()
    raise pytest.Session.Interrupted(interrupted_message(problems))
