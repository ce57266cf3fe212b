"""Which class and module scopes no test is left for, when a dispatch ends.

A worker's last test before its barrier is torn down toward a test that
shares its deepest scope, so that its class and module fixtures stay for
what may come next; the barrier tears them down once the next test is
known.  pytest would have torn them down in the test's own teardown, and a
failing teardown reported there (one teardown report of the test), with
the report hooks running inside it.  When no test of the test's class or
module is left for any worker (each has been sent, or has ended without
a worker), nothing can come next that shares them: the controller says so
ahead of the dispatch, and the worker ends them in the test's own teardown,
as pytest would.
"""

from __future__ import annotations

from collections.abc import Sequence

from ...core.states import State

#: States of a test no worker has been sent yet.
_UNSENT = (State.WAITING, State.READY)


class OpenScopes:
    """Per class and module scope, whether a test of it is not yet sent.

    Tests leave the waiting and ready states for good (a crashed worker's
    tests come back ready, but only to be sent again: at worst a scope is
    then set up once more), so each scope keeps a pointer to its first test
    that may still be unsent: the checks cost, over the run, one step per test.
    """

    def __init__(self, module_scopes: Sequence[str | None],
                 class_scopes: Sequence[str | None], n_run: int) -> None:
        self._scopes: list[tuple[str, ...]] = []
        self._members: dict[str, list[int]] = {}
        for i in range(n_run):
            own = tuple(s for s in (class_scopes[i], module_scopes[i]) if s is not None)
            self._scopes.append(own)
            for scope in own:
                self._members.setdefault(scope, []).append(i)
        self._first: dict[str, int] = dict.fromkeys(self._members, 0)

    def closed(self, task: int, state: Sequence[State]) -> list[str]:
        """The scopes of ``task`` (innermost first) with no test left unsent; it
        stops at the first one that still has one (an outer scope then has too)."""
        out: list[str] = []
        for scope in self._scopes[task] if task < len(self._scopes) else ():
            members = self._members[scope]
            k = self._first[scope]
            while k < len(members) and state[members[k]] not in _UNSENT:
                k += 1
            self._first[scope] = k
            if k < len(members):
                break
            out.append(scope)
        return out
