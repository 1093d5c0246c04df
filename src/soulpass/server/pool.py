"""Open accounts shared by the request threads of one server process (REST or MCP).

An ``Account`` keeps its derived index open (SQLite connections, vector files locked while open),
so a server opens each account once and reuses it. Sandbox writes go straight to the session
buffer files (whole-line appends under a file lock, safe from any thread); what reads or moves the
index (search, context) runs under the account's lock, since the index catches up in place.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager

from soulpass.engine import Account, Soulpass

__all__ = ["AccountPool"]


class AccountPool:
    def __init__(self, engine: Soulpass) -> None:
        self.engine = engine
        self._accounts: dict[str, Account] = {}
        self._locks: dict[str, threading.RLock] = {}
        self._guard = threading.Lock()

    def get(self, name: str) -> Account:
        """The open account ``name`` (``NotFound`` when it does not exist)."""
        with self._guard:
            acct = self._accounts.get(name)
            if acct is None:
                acct = self.engine.account(name)
                self._accounts[name] = acct
                self._locks[acct.name] = threading.RLock()
            return acct

    def create(self, name: str) -> Account:
        with self._guard:
            acct = self.engine.create_account(name)
            if acct.name not in self._accounts:
                self._accounts[acct.name] = acct
                self._locks[acct.name] = threading.RLock()
            return self._accounts[acct.name]

    @contextmanager
    def indexed(self, name: str) -> Iterator[Account]:
        """The account, with its index to ourselves for the ``with`` block."""
        acct = self.get(name)
        with self._locks[acct.name]:
            yield acct

    def close(self) -> None:
        with self._guard:
            for acct in self._accounts.values():
                with self._locks[acct.name]:
                    acct.close()
            self._accounts.clear()
