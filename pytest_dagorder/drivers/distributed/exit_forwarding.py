"""A test's ``pytest.exit()`` on a worker, handed to the controller."""

from __future__ import annotations

from typing import Any

import pytest

from ...shims.pytest_internals import can_stop, stop_after_this_test
from . import wire


class ExitForwarder:
    """Hands a test's ``pytest.exit()`` to the controller (see :meth:`__call__`).

    ``channel``: the worker's side channel (None: no controller plugin to tell).
    """

    def __init__(self, channel: Any, session: pytest.Session) -> None:
        self.channel = channel
        self.session = session

    def __call__(self, exc: BaseException) -> bool:
        """Hand ``exc`` on; False: let it end this worker.

        Left to itself, the exception ends this worker's session and xdist
        takes the worker for crashed (exit status 2, the default) or fails
        an internal assertion (any other status).  Instead the controller is
        told on the side channel, ahead of xdist's "test complete" event for
        the same test, and ends the whole session with the same exception;
        this worker stops taking tests (``shouldstop``) and tears down as at
        any session end.
        """
        if self.channel is None or not can_stop(self.session):
            return False
        # pytest.exit.Exception has no name mypy accepts as a type; its fields:
        message, code = str(getattr(exc, "msg", exc)), getattr(exc, "returncode", None)
        self.channel.send(wire.encode_exit(wire.ExitRequest(message, code)))
        stop_after_this_test(self.session, message)
        return True
