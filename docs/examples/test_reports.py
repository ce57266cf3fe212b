"""Reports: every test here waits for the transfer tests of test_accounts.py.

``pytestmark`` applies the declaration to the whole module.  The target is a
class node id (every test of the class), relative to the rootdir: the
repository root, where pyproject.toml is.

A cross-module prerequisite gates; both use the session-scoped ``bank``, so
under ``-n`` the default ``--dag-affinity=state`` runs these tests on their
prerequisites' worker, with the same ``bank``.  They create the accounts
they read all the same, so they pass with ``--dag-affinity=none`` too,
where they may run on another worker, with another ``bank``.
"""

from __future__ import annotations

from bank import Bank, monthly_report

from pytest_dagorder import depends_on

pytestmark = depends_on("docs/examples/test_accounts.py::TestTransfers")


def test_monthly_report(bank: Bank) -> None:
    dave, erin = bank.open_account("dave"), bank.open_account("erin")
    bank.deposit(dave, 50_00)
    bank.transfer(dave, erin, 20_00)
    bank.withdraw(erin, 5_00)
    assert monthly_report(bank, [dave, erin]) == {
        dave: (50_00, 20_00, 30_00),
        erin: (20_00, 5_00, 15_00),
    }


def test_report_of_empty_account(bank: Bank) -> None:
    account = bank.open_account("frank")
    assert monthly_report(bank, [account]) == {account: (0, 0, 0)}
