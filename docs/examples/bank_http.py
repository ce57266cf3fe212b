"""The demo bank behind a tiny HTTP/JSON endpoint, shared by every test process.

``bank.py``'s :class:`~bank.Bank` lives in one process; a test on another
xdist worker would see another bank.  ``test_customers.py`` hands account
ids from test to test across workers (``dag.publish`` / ``dag.result``), so
those ids must mean something everywhere: the conftest serves one bank from
the process that starts the session and every process talks to it through
:class:`BankClient`.
"""

from __future__ import annotations

import json
import threading
import urllib.error
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from bank import Bank, BankError

#: The operations a client may call: Bank method names.
OPERATIONS = frozenset({
    "open_account", "accounts_of", "deposit", "withdraw", "balance", "close_account",
})


class RemoteBankError(Exception):
    """The service refused an operation; ``kind`` is the service's error class name."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(f"{kind}: {message}")
        self.kind = kind


def serve(bank: Bank) -> tuple[ThreadingHTTPServer, str]:
    """Serve ``bank`` on a free local port in a daemon thread; the server and its URL."""

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            op = self.path.strip("/")
            args = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            try:
                if op not in OPERATIONS:
                    raise BankError(f"no operation {op!r}")
                body = {"result": getattr(bank, op)(*args)}
            except (BankError, ValueError) as exc:
                body = {"error": type(exc).__name__, "message": str(exc)}
            data = json.dumps(body).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, format: str, *args: object) -> None:
            pass  # keep the test output clean

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    host, port = server.server_address[:2]
    return server, f"http://{host!s}:{port}"


class BankClient:
    """The bank's operations, called over HTTP."""

    def __init__(self, url: str) -> None:
        self.url = url

    def _call(self, op: str, *args: object) -> Any:
        request = urllib.request.Request(
            f"{self.url}/{op}", data=json.dumps(args).encode(),
            headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=30) as response:
            body = json.loads(response.read())
        if "error" in body:
            raise RemoteBankError(body["error"], body["message"])
        return body["result"]

    def open_account(self, owner: str) -> int:
        return int(self._call("open_account", owner))

    def accounts_of(self, owner: str) -> list[int]:
        return [int(a) for a in self._call("accounts_of", owner)]

    def deposit(self, account_id: int, amount: int) -> None:
        self._call("deposit", account_id, amount)

    def withdraw(self, account_id: int, amount: int) -> None:
        self._call("withdraw", account_id, amount)

    def balance(self, account_id: int) -> int:
        return int(self._call("balance", account_id))

    def close_account(self, account_id: int) -> int:
        return int(self._call("close_account", account_id))
