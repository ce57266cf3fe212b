"""A customer's account: create -> read -> update -> delete, ids passed with ``dag``.

Each step publishes what the next ones need (``dag.publish``) and reads what
an earlier step published (``dag.result``).  The values go through the
plugin, not through a module global or fixture, so the steps may run on any
worker: this module passes with ``--dag-affinity=none`` too, where every test
is scheduled on its own.  The accounts live in the shared bank service
(``bank_service``, see bank_http.py), which every worker reaches.
"""

from __future__ import annotations

import os

import pytest
from bank_http import BankClient, RemoteBankError

from pytest_dagorder import Dag, depends_on


def worker() -> str:
    return os.environ.get("PYTEST_XDIST_WORKER", "serial")


def test_create_account(bank_service: BankClient, dag: Dag) -> None:
    account = bank_service.open_account("dora")
    bank_service.deposit(account, 50_00)
    dag.publish("account", account)
    dag.publish("opened_on", worker())


@depends_on("test_create_account")
def test_read_account(bank_service: BankClient, dag: Dag) -> None:
    created = dag.result("test_create_account")
    assert bank_service.balance(created["account"]) == 50_00
    assert created["account"] in bank_service.accounts_of("dora")


@depends_on(test_read_account)
def test_update_account(bank_service: BankClient, dag: Dag) -> None:
    # A transitive prerequisite: test_create_account, through test_read_account.
    account = dag.result("test_create_account")["account"]
    bank_service.withdraw(account, 20_00)
    dag.publish("balance", bank_service.balance(account))


@depends_on("test_update_account")
def test_delete_account(bank_service: BankClient, dag: Dag) -> None:
    account = dag.result("test_create_account")["account"]
    assert bank_service.close_account(account) == dag.result(test_update_account)["balance"]
    with pytest.raises(RemoteBankError, match="UnknownAccount"):
        bank_service.balance(account)
