"""A tiny in-process bank service: the system under test of the demo suite.

Amounts are integer cents.  Every operation may take a few milliseconds
(``latency``) to stand in for a network or database round trip, so that a
parallel run has something to overlap.
"""

from __future__ import annotations

import itertools
import threading
import time
from dataclasses import dataclass, field


class BankError(Exception):
    """Base class of the errors the service raises."""


class UnknownAccount(BankError):
    def __init__(self, account_id: int) -> None:
        super().__init__(f"no open account {account_id}")
        self.account_id = account_id


class InsufficientFunds(BankError):
    def __init__(self, account_id: int, balance: int, amount: int) -> None:
        super().__init__(f"account {account_id} holds {balance}, cannot pay {amount}")
        self.account_id = account_id
        self.balance = balance
        self.amount = amount


@dataclass(frozen=True)
class Entry:
    """One line of a statement: a signed amount and what it was for."""

    amount: int
    memo: str


@dataclass
class Account:
    id: int
    owner: str
    balance: int = 0
    entries: list[Entry] = field(default_factory=list)


class Bank:
    """Accounts with deposits, withdrawals and transfers; books that must balance."""

    def __init__(self, latency: float = 0.0) -> None:
        self.latency = latency
        self._accounts: dict[int, Account] = {}
        self._ids = itertools.count(1)
        self._lock = threading.Lock()
        # Money that came in from outside and went out again: the books balance
        # when total_balance() == deposited - withdrawn.
        self.deposited = 0
        self.withdrawn = 0

    def _io(self) -> None:
        if self.latency:
            time.sleep(self.latency)

    def _get(self, account_id: int) -> Account:
        try:
            return self._accounts[account_id]
        except KeyError:
            raise UnknownAccount(account_id) from None

    def open_account(self, owner: str) -> int:
        self._io()
        with self._lock:
            account = Account(next(self._ids), owner)
            self._accounts[account.id] = account
            return account.id

    def accounts_of(self, owner: str) -> list[int]:
        with self._lock:
            return [a.id for a in self._accounts.values() if a.owner == owner]

    def deposit(self, account_id: int, amount: int, memo: str = "deposit") -> None:
        if amount <= 0:
            raise ValueError(f"deposit must be positive, not {amount}")
        self._io()
        with self._lock:
            account = self._get(account_id)
            account.balance += amount
            account.entries.append(Entry(amount, memo))
            self.deposited += amount

    def withdraw(self, account_id: int, amount: int, memo: str = "withdrawal") -> None:
        if amount <= 0:
            raise ValueError(f"withdrawal must be positive, not {amount}")
        self._io()
        with self._lock:
            account = self._get(account_id)
            if account.balance < amount:
                raise InsufficientFunds(account_id, account.balance, amount)
            account.balance -= amount
            account.entries.append(Entry(-amount, memo))
            self.withdrawn += amount

    def transfer(self, source: int, target: int, amount: int) -> None:
        if amount <= 0:
            raise ValueError(f"transfer must be positive, not {amount}")
        if source == target:
            raise ValueError("cannot transfer to the same account")
        self._io()
        with self._lock:
            src, dst = self._get(source), self._get(target)
            if src.balance < amount:
                raise InsufficientFunds(source, src.balance, amount)
            src.balance -= amount
            dst.balance += amount
            src.entries.append(Entry(-amount, f"transfer to {target}"))
            dst.entries.append(Entry(amount, f"transfer from {source}"))

    def balance(self, account_id: int) -> int:
        self._io()
        with self._lock:
            return self._get(account_id).balance

    def statement(self, account_id: int) -> list[Entry]:
        self._io()
        with self._lock:
            return list(self._get(account_id).entries)

    def close_account(self, account_id: int) -> int:
        """Pay out the remaining balance, close the account; return the payout."""
        self._io()
        with self._lock:
            account = self._get(account_id)
            del self._accounts[account_id]
            self.withdrawn += account.balance
            return account.balance

    def total_balance(self) -> int:
        with self._lock:
            return sum(a.balance for a in self._accounts.values())


def monthly_report(bank: Bank, account_ids: list[int]) -> dict[int, tuple[int, int, int]]:
    """Per account: (money in, money out, closing balance)."""
    report = {}
    for account_id in account_ids:
        entries = bank.statement(account_id)
        money_in = sum(e.amount for e in entries if e.amount > 0)
        money_out = -sum(e.amount for e in entries if e.amount < 0)
        report[account_id] = (money_in, money_out, bank.balance(account_id))
    return report


def parse_fee_schedule(text: str) -> dict[str, tuple[int, int, int]]:
    """Parse ``kind: percent_bp min max`` lines (basis points, cents) into a table."""
    table = {}
    for lineno, raw in enumerate(text.splitlines(), 1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        kind, sep, rest = line.partition(":")
        numbers = rest.split()
        if not sep or len(numbers) != 3:
            raise ValueError(f"line {lineno}: expected 'kind: bp min max', got {raw!r}")
        bp, low, high = (int(n) for n in numbers)
        table[kind.strip()] = (bp, low, high)
    return table


def fee(table: dict[str, tuple[int, int, int]], kind: str, amount: int) -> int:
    """The fee for ``amount`` cents: a percentage, clamped to [min, max]."""
    bp, low, high = table[kind]
    return max(low, min(high, amount * bp // 10_000))
