"""Accounts and their keys. Creating accounts and keys needs an admin key; deleting an account or
listing its keys, an admin key or an owner key of the account (``roles.ROUTES`` decides)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path, Query, status

from soulpass.errors import Conflict, NotFound
from soulpass.server.deps import AccountName, Caller, Keys, Pool
from soulpass.server.models import AccountDeletedOut, AccountIn, AccountOut, KeyIn, KeyOut, NewKeyOut
from soulpass.server.responses import ERRORS

__all__ = ["router"]

router = APIRouter(prefix="/v1", tags=["accounts"], responses=ERRORS)


def _info(pool: Pool, name: str) -> AccountOut:
    acct = pool.get(name)
    return AccountOut(account=acct.name, version=acct.head(), sandboxes=len(acct.sandboxes()))


@router.get("/accounts", response_model=list[AccountOut], summary="List the accounts this key reaches")
def list_accounts(pool: Pool, key: Caller) -> list[AccountOut]:
    names = pool.engine.accounts() if key.admin else [n for n in pool.engine.accounts() if n == key.account]
    return [_info(pool, n) for n in names]


@router.post("/accounts", response_model=AccountOut, status_code=status.HTTP_201_CREATED,
             summary="Create an account (admin key)")
def create_account(body: AccountIn, pool: Pool, _: Caller) -> AccountOut:
    if body.name in pool.engine.accounts():
        raise Conflict(f"account {body.name!r} already exists", account=body.name)
    pool.create(body.name)
    return _info(pool, body.name)


@router.get("/accounts/{account}", response_model=AccountOut, summary="An account's HEAD version and sandboxes")
def get_account(account: AccountName, pool: Pool) -> AccountOut:
    return _info(pool, account)


@router.delete("/accounts/{account}", response_model=AccountDeletedOut,
               summary="Delete the account and everything it holds (admin key or the account's owner key)")
def delete_account(account: AccountName, pool: Pool, keys: Keys, key: Caller,
                   confirm: Annotated[str, Query(description="The account's name again: the typed confirmation")]
                   ) -> AccountDeletedOut:
    """Irreversible: every version, its history, sandboxes, index, vectors and the account's API keys
    (the key that asked included) are erased; a tombstone (who, when; no content) is kept."""
    done = pool.delete(account, confirm=confirm, by=f"key {key.key_id}", keys=keys)
    return AccountDeletedOut(**done.to_json())


@router.get("/accounts/{account}/keys", response_model=list[KeyOut],
            summary="The account's keys and their roles (no secrets; owner key)")
def list_keys(account: AccountName, pool: Pool, keys: Keys) -> list[KeyOut]:
    pool.get(account)
    return [KeyOut(**k.public()) for k in keys.list() if k.account == account]


@router.post("/accounts/{account}/keys", response_model=NewKeyOut, status_code=status.HTTP_201_CREATED,
             summary="Make a key for the account, agent or owner (admin key); the key is in this answer only")
def create_key(account: AccountName, body: KeyIn, pool: Pool, keys: Keys) -> NewKeyOut:
    pool.get(account)
    new = keys.create(account, body.label, body.role)
    return NewKeyOut(**new.key.public(), key=new.secret)


@router.delete("/accounts/{account}/keys/{key_id}", status_code=status.HTTP_204_NO_CONTENT,
               summary="Revoke one of the account's keys (admin key)")
def revoke_key(account: AccountName, key_id: Annotated[str, Path(pattern=r"^[0-9a-f]{8}$")], keys: Keys) -> None:
    if not any(k.key_id == key_id and k.account == account for k in keys.list()):
        raise NotFound(f"account {account!r} has no key {key_id!r}", key_id=key_id)
    keys.revoke(key_id)
