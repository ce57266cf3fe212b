"""The run plan: made once by the collection steps, read by everything after."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import pytest
from helpers import runpytest

from pytest_dagorder.live_run import dag_run
from pytest_dagorder.planning.plan import DraftPlan, Plan


@pytest.mark.parametrize("kind", [Plan, DraftPlan])
def test_a_plan_cannot_be_changed_once_made(kind: type[Plan] | type[DraftPlan]) -> None:
    # A later step (a driver, the shards, the facts) that set a field would
    # make the plan say something its maker did not decide.
    plan = kind([], None)
    for name in ("graph", "items", "problems"):
        with pytest.raises(dataclasses.FrozenInstanceError):
            setattr(plan, name, getattr(plan, name))


def test_a_serial_run_names_its_tests_once(pytester: pytest.Pytester,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    # The skip's wording (the run) and the dag fixture (the test's process)
    # name the same tests of the same plan: one set of names, made once.
    made: list[int] = []
    real = dag_run.short_names

    def counted(nodeids: Sequence[str]) -> list[str]:
        made.append(len(nodeids))
        return real(nodeids)

    monkeypatch.setattr(dag_run, "short_names", counted)
    pytester.makepyfile(test_names="""
        from pytest_dagorder import depends_on

        def test_a():
            assert False

        @depends_on("test_a")
        def test_b():
            pass

        def test_c(dag):
            dag.publish("k", 1)
    """)
    result = runpytest(pytester, "-p", "dagorder", "-rs")
    result.assert_outcomes(passed=1, failed=1, skipped=1)
    result.stdout.fnmatch_lines(["SKIPPED*prerequisite test_a failed (assert False)"])
    assert made == [3]
