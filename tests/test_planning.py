"""The run plan: made once by the collection steps, read by everything after."""

from __future__ import annotations

import dataclasses

import pytest

from pytest_dagorder.glue.planning import Plan, Resolved


@pytest.mark.parametrize("kind", [Plan, Resolved])
def test_a_plan_cannot_be_changed_once_made(kind: type[Plan] | type[Resolved]) -> None:
    # A later step (a driver, the shards, the facts) that set a field would
    # make the plan say something its maker did not decide.
    plan = kind([], None)
    for name in ("graph", "items", "problems"):
        with pytest.raises(dataclasses.FrozenInstanceError):
            setattr(plan, name, getattr(plan, name))
