"""Accounts: open -> deposit -> transfer -> statement, then a cleanup.

The chain passes state along the way, as integration suites do: the
module-scoped ``ledger`` fixture maps owners to the account ids that
``test_open_account`` created, and the later tests read it.  Under ``-n`` the
default ``--dag-affinity=state`` keeps this chain on one worker, in order,
with the fixture alive (as ``module`` does).
"""

from __future__ import annotations

import pytest
from bank import Bank, InsufficientFunds, UnknownAccount

from pytest_dagorder import depends_on, run_after

OWNERS = ("alice", "bob", "carol")


@pytest.fixture(scope="module")
def ledger() -> dict[str, int]:
    """owner -> account id, filled by test_open_account."""
    return {}


@pytest.mark.parametrize("owner", OWNERS)
def test_open_account(bank: Bank, ledger: dict[str, int], owner: str) -> None:
    ledger[owner] = bank.open_account(owner)
    assert bank.balance(ledger[owner]) == 0


@depends_on("test_open_account[alice]")  # one instance of the parametrized test
def test_deposit(bank: Bank, ledger: dict[str, int]) -> None:
    bank.deposit(ledger["alice"], 100_00, memo="salary")
    assert bank.balance(ledger["alice"]) == 100_00


# Independent branches: no prerequisites, they may run anywhere, any time.


def test_deposit_must_be_positive(bank: Bank) -> None:
    account = bank.open_account("mallory")
    with pytest.raises(ValueError, match="positive"):
        bank.deposit(account, 0)


def test_overdraft_is_refused(bank: Bank) -> None:
    account = bank.open_account("mallory")
    bank.deposit(account, 5_00)
    with pytest.raises(InsufficientFunds):
        bank.withdraw(account, 6_00)
    assert bank.balance(account) == 5_00


def test_unknown_account(bank: Bank) -> None:
    with pytest.raises(UnknownAccount):
        bank.balance(999_999)


# The class-level declaration applies to every test in the class:
# "test_open_account" is every instance (alice, bob and carol).
@depends_on("test_deposit", "test_open_account")
class TestTransfers:
    def test_transfer(self, bank: Bank, ledger: dict[str, int]) -> None:
        bank.transfer(ledger["alice"], ledger["bob"], 30_00)
        bank.transfer(ledger["bob"], ledger["carol"], 10_00)
        assert [bank.balance(ledger[o]) for o in OWNERS] == [70_00, 20_00, 10_00]

    @depends_on("test_transfer")  # a bare name: this class first, then the module
    def test_statement(self, bank: Bank, ledger: dict[str, int]) -> None:
        memos = [(e.amount, e.memo) for e in bank.statement(ledger["alice"])]
        assert memos == [(100_00, "salary"), (-30_00, f"transfer to {ledger['bob']}")]

    @depends_on("test_transfer")
    def test_overdrawn_transfer_changes_nothing(self, bank: Bank, ledger: dict[str, int]) -> None:
        with pytest.raises(InsufficientFunds):
            bank.transfer(ledger["carol"], ledger["alice"], 1_000_00)
        assert bank.balance(ledger["carol"]) == 10_00


# Ordering only: runs once these ended, whatever their outcome, so the accounts
# are closed even when a transfer test failed.
@run_after(
    "TestTransfers::test_statement",
    "TestTransfers::test_overdrawn_transfer_changes_nothing",
)
def test_close_accounts(bank: Bank) -> None:
    # Look the accounts up in the bank rather than in the ledger: a cleanup
    # must work whatever state the chain left behind.
    for owner in OWNERS:
        for account in bank.accounts_of(owner):
            bank.close_account(account)
        assert bank.accounts_of(owner) == []
    assert bank.total_balance() == bank.deposited - bank.withdrawn
