"""Open accounts shared by the threads of one process (a REST or MCP server).

An ``Account`` keeps its derived index open (SQLite connections, the vector index), so a server
opens each account once and reuses the handle. Thread-safety is the engine's: an ``Account`` is
safe to share between threads, and what reads or moves its index runs under its lock
(``Account.exclusive`` for a compound read); this pool only remembers the open handles.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

from soulpass.engine import Account, Soulpass

if TYPE_CHECKING:
    from soulpass.engine.deleting import AccountDeleted, AccountKeys

__all__ = ["AccountPool"]


class AccountPool:
    def __init__(self, engine: Soulpass) -> None:
        self.engine = engine
        self._accounts: dict[str, Account] = {}
        self._guard = threading.Lock()

    def get(self, name: str) -> Account:
        """The open account ``name`` (``NotFound`` when it does not exist)."""
        with self._guard:
            acct = self._accounts.get(name)
            if acct is None:
                acct = self._accounts[name] = self.engine.account(name)
            return acct

    def create(self, name: str) -> Account:
        with self._guard:
            acct = self.engine.create_account(name)
            return self._accounts.setdefault(acct.name, acct)

    def delete(self, name: str, *, confirm: str, by: str | None, keys: AccountKeys | None) -> AccountDeleted:
        """``Soulpass.delete_account``, after closing this pool's handle on the account."""
        with self._guard:
            acct = self._accounts.pop(name, None)
            if acct is not None:
                acct.close()
            return self.engine.delete_account(name, confirm=confirm, by=by, keys=keys)

    @contextmanager
    def indexed(self, name: str) -> Iterator[Account]:
        """The account, with its index to ourselves for the ``with`` block (``Account.exclusive``)."""
        with self.get(name).exclusive() as acct:
            yield acct

    def close(self) -> None:
        with self._guard:
            for acct in self._accounts.values():
                acct.close()
            self._accounts.clear()
