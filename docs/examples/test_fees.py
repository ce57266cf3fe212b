"""Fees: a second, independent branch of the graph.

The state carried along this chain is a module global: ``test_parse_schedule``
loads the fee table that the other tests use.
"""

from __future__ import annotations

import pytest
from bank import fee, parse_fee_schedule

from pytest_dagorder import depends_on

SCHEDULE_TEXT = """
# kind:    basis points  min    max   (cents)
transfer:  50            25     5000
withdraw:  0             100    100
"""

SCHEDULE: dict[str, tuple[int, int, int]] = {}


def test_parse_schedule() -> None:
    SCHEDULE.update(parse_fee_schedule(SCHEDULE_TEXT))
    assert SCHEDULE == {"transfer": (50, 25, 50_00), "withdraw": (0, 1_00, 1_00)}


def test_malformed_schedule_is_rejected() -> None:
    with pytest.raises(ValueError, match="line 1"):
        parse_fee_schedule("transfer: 50 25")


@depends_on(test_parse_schedule)  # the test function itself is a valid target
@pytest.mark.parametrize(
    ("amount", "expected"),
    [(1_00, 25), (100_00, 50), (20_000_00, 50_00)],
    ids=["minimum", "percent", "maximum"],
)
def test_transfer_fee(amount: int, expected: int) -> None:
    assert fee(SCHEDULE, "transfer", amount) == expected


@depends_on("test_parse_schedule")
def test_flat_withdrawal_fee() -> None:
    assert {fee(SCHEDULE, "withdraw", a) for a in (1, 50_00, 1_000_00)} == {1_00}


@depends_on("test_transfer_fee")  # every instance of the parametrized test
def test_fee_schedule_is_monotonic() -> None:
    fees = [fee(SCHEDULE, "transfer", a) for a in range(0, 2_000_000, 10_007)]
    assert fees == sorted(fees)
