"""Which class and module scopes no test is left for (drivers/distributed/closing.py)."""

from __future__ import annotations

from pytest_dagorder.core.states import State
from pytest_dagorder.drivers.distributed.closing import OpenScopes

W, R, RUN, P = State.WAITING, State.READY, State.RUNNING, State.PASSED

MODULES = ["m.py", "m.py", "m.py", "n.py"]
CLASSES = ["m.py::T", "m.py::T", None, None]


def test_a_scope_closes_once_none_of_its_tests_is_waiting_or_ready() -> None:
    scopes = OpenScopes(MODULES, CLASSES, 4)
    # test 1 sent, test 2 of the module still waiting: the class ends, the module not.
    assert scopes.closed(1, [P, RUN, W, R]) == ["m.py::T"]
    assert scopes.closed(1, [P, RUN, RUN, R]) == ["m.py::T", "m.py"]
    assert scopes.closed(3, [P, RUN, RUN, RUN]) == ["n.py"]


def test_an_open_class_keeps_its_module_open() -> None:
    scopes = OpenScopes(MODULES, CLASSES, 4)
    assert scopes.closed(0, [RUN, R, P, P]) == []


def test_tests_past_the_run_and_without_scopes_close_nothing() -> None:
    scopes = OpenScopes([None, "m.py"], [None, None], 1)
    assert scopes.closed(0, [RUN, W]) == []
    assert scopes.closed(1, [RUN, W]) == []
