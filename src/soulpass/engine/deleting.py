"""Deleting an account: the end of a user's right to erasure (issue 40).

``delete_account`` checks the typed confirmation (the account's name, typed again), closes what
this process holds open of the account, revokes its API keys, removes the backups kept in the home,
and has the store erase the account with everything derived from it (``Backend.delete``: files or
rows, index, vectors, local caches). The store appends a tombstone to the home's deletion log: the
account's name, who, when, the version it was at and how many keys went; never any content.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from soulpass.errors import InvalidInput
from soulpass.ids import check_name, utc_now
from soulpass.store.open import drop_backups

if TYPE_CHECKING:
    from soulpass.engine.home import Soulpass

__all__ = ["AccountDeleted", "AccountKeys", "delete_account"]


class AccountKeys(Protocol):
    """What a deletion needs of the home's API keys (``soulpass.server.keys.KeyStore`` has it)."""

    def revoke_account(self, account: str) -> Sequence[object]:
        """Revoke every key of ``account``; returns them."""
        ...


@dataclass(frozen=True)
class AccountDeleted:
    """An account that is gone: its tombstone, and the backups outside the home still holding it."""

    account: str
    deleted_at: str
    by: str | None
    version: int
    keys_revoked: int
    backups_holding: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def delete_account(sp: Soulpass, name: str, *, confirm: str, by: str | None, keys: AccountKeys | None,
                   version: int) -> AccountDeleted:
    """Erase account ``name`` (at HEAD ``version``) for good; ``confirm`` must be its name again."""
    check_name(name, "account name")
    if confirm != name:
        raise InvalidInput(f"deleting account {name!r} needs its name typed again as the confirmation "
                           f"(got {confirm!r})", field="confirm")
    if by is not None and (not isinstance(by, str) or len(by) > 200):
        raise InvalidInput("by must be a name of at most 200 characters", field="by")
    revoked = keys.revoke_account(name) if keys is not None else ()
    holding = [str(p) for p in drop_backups(sp.home, name)]
    _drop_exports(sp.home, name)
    done = AccountDeleted(account=name, deleted_at=utc_now().isoformat(timespec="seconds"), by=by,
                          version=version, keys_revoked=len(revoked), backups_holding=holding)
    tombstone = done.to_json()
    del tombstone["backups_holding"]  # where copies are is no part of the tombstone
    sp.backend.delete(name, tombstone)
    return done


def _drop_exports(home: Path, name: str) -> None:
    """The passports the MCP ``export_account`` tool wrote into the home (``exports/NAME-vN.soulpass``)."""
    mine = re.compile(rf"{re.escape(name)}-v\d+\.soulpass")
    for path in (home / "exports").glob(f"{name}-v*.soulpass"):
        if mine.fullmatch(path.name):
            path.unlink(missing_ok=True)
