"""Who is asking and what they may reach: the API key and the account in the path.

Order matters and FastAPI keeps it: the key is checked before anything else about the request,
so no key is always 401, and a key for another account is always 403 (whether that account
exists or not, and with nothing of it in the body), before the body is even validated.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated

from fastapi import Depends, Path, Request, Security
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from soulpass.ids import MAX_NAME_LENGTH
from soulpass.pool import AccountPool
from soulpass.server.keys import ApiKey, KeyStore
from soulpass.server.limits import Guards
from soulpass.server.models import NAME_PATTERN

__all__ = ["AccountName", "Admin", "Caller", "Forbidden", "Keys", "Pool", "Unauthorized", "SandboxId"]

_bearer = HTTPBearer(auto_error=False, description="An account or admin key made by `soulpass key create`.")


class Unauthorized(Exception):
    """No key, or one that is malformed, unknown or revoked (401)."""


class Forbidden(Exception):
    """A valid key that does not reach what was asked (403)."""


def _pool(request: Request) -> AccountPool:
    pool: AccountPool = request.app.state.pool
    return pool


def _keys(request: Request) -> KeyStore:
    keys: KeyStore = request.app.state.keys
    return keys


def _caller(request: Request,
            creds: Annotated[HTTPAuthorizationCredentials | None, Security(_bearer)]) -> ApiKey:
    guards: Guards = request.app.state.guards
    client = request.client.host if request.client is not None else "unknown"
    guards.before_key_check(client)  # an address that failed too many key checks: 429 before any check
    if creds is None:
        raise Unauthorized("an API key is required: send 'Authorization: Bearer <key>'")
    keys: KeyStore = request.app.state.keys
    key = keys.verify(creds.credentials)
    if key is None:
        guards.key_failed(client)
        raise Unauthorized("the API key is not valid (unknown, revoked or malformed)")
    guards.request(key.key_id)
    return key


def _admin(key: Annotated[ApiKey, Depends(_caller)]) -> ApiKey:
    if not key.admin:
        raise Forbidden("this operation needs an admin key")
    return key


# Account-scoped requests that may grow what an account stores; reads sent as POST (search, context)
# and what shrinks or only reorders it (archive, discard, rollback, forget) pass a full quota.
_GROWS = frozenset({"POST", "PUT", "PATCH"})
_NOT_GROWING = ("/search", "/context", "/rag_search", "/archive", "/rollback", "/forget")


def _account(request: Request, key: Annotated[ApiKey, Depends(_caller)],
             account: Annotated[str, Path(pattern=NAME_PATTERN, max_length=MAX_NAME_LENGTH,
                                          description="Account name")]) -> str:
    if not key.admin and key.account != account:
        raise Forbidden("this key does not reach the account in the path")
    if request.method in _GROWS and not request.url.path.endswith(_NOT_GROWING):
        guards: Guards = request.app.state.guards
        length = request.headers.get("content-length", "0")
        guards.write(account, int(length) if length.isdigit() else 0)
    return account


def _approves(request: Request, key: Annotated[ApiKey, Depends(_caller)]) -> bool:
    """Whether the caller may approve what the review policy holds (``server.access.may_approve``)."""
    decide: Callable[[ApiKey], bool] = request.app.state.may_approve
    return decide(key)


Pool = Annotated[AccountPool, Depends(_pool)]
Keys = Annotated[KeyStore, Depends(_keys)]
Caller = Annotated[ApiKey, Depends(_caller)]
Admin = Annotated[ApiKey, Depends(_admin)]
AccountName = Annotated[str, Depends(_account)]
Approves = Annotated[bool, Depends(_approves)]
SandboxId = Annotated[str, Path(pattern=NAME_PATTERN, max_length=MAX_NAME_LENGTH, description="Sandbox id")]
