"""API keys: one or more per account, plus admin keys; only a SHA-256 of each key is stored.

The server and the MCP endpoint use the narrow :class:`KeyStore` Protocol (list, verify, create,
revoke); :class:`FileKeyStore` is the implementation for one Soulpass home, and another (say, a
table beside a PostgreSQL store) can stand in.

An account key has a role (issue 41): ``agent`` (read, search, write to sandboxes, archive) or
``owner`` (also roll back, edit, forget, export, import, delete); what each operation needs is
decided in ``soulpass.server.roles``. A key stored before roles existed is an ``owner`` key, which
is what every key could do then. An admin key has no account and no role of its own: it can do
everything, in every account.

A key reads ``sp_<key id>_<secret>``: the key id (8 hex characters) finds the stored entry, the
SHA-256 of the whole key is compared in constant time. Keys are random 256-bit tokens, so a plain
hash is enough (nothing to brute-force the way a password is). ``FileKeyStore``'s file is
``<home>/keys.json``, rewritten whole (temp + fsync + rename) under a lock; readers re-read it
when its stamp changes, so a revoked key stops working at the next request.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import re
import secrets
import threading
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, Protocol, get_args

from soulpass.errors import Corrupted, InvalidInput, NotFound
from soulpass.ids import check_name, utc_now
from soulpass.store.fsio import atomic_write, dump_json, file_lock, load_json

__all__ = ["DEFAULT_ROLE", "KEYS_FILE", "KEY_PATTERN", "ROLES", "ApiKey", "CarriedKeys", "FileKeyStore", "KeyStore",
           "NewKey", "Role", "carry_keys", "check_key_request", "key_hash"]

KEYS_FILE = "keys.json"
KEY_PATTERN = re.compile(r"^sp_([0-9a-f]{8})_([A-Za-z0-9_-]{20,100})$")
_FORMATS = ("soulpass-keys/1", "soulpass-keys/2")  # /1: before roles (every key an owner)

Role = Literal["agent", "owner"]
ROLES: tuple[Role, ...] = get_args(Role)
# What a new account key is unless asked otherwise: what every key could do before roles existed,
# so a script that makes a key and rolls back keeps working. Give an agent ``--role agent``.
DEFAULT_ROLE: Role = "owner"


@dataclass(frozen=True)
class ApiKey:
    """A stored key: ``account`` None means an admin key (whose ``role`` is always ``owner``: it
    can do everything)."""

    key_id: str
    account: str | None
    created_at: str
    label: str
    sha256: str
    role: Role = DEFAULT_ROLE

    @property
    def admin(self) -> bool:
        return self.account is None

    def public(self) -> dict[str, Any]:
        """What may be shown: everything but the hash (``role``: ``admin`` for an admin key)."""
        return {"key_id": self.key_id, "account": self.account, "admin": self.admin,
                "role": "admin" if self.admin else self.role, "created_at": self.created_at, "label": self.label}


@dataclass(frozen=True)
class NewKey:
    """A key just made: ``secret`` is the only copy of the key and is never stored."""

    key: ApiKey
    secret: str


def key_hash(secret: str) -> str:
    return hashlib.sha256(secret.encode("utf-8")).hexdigest()


def check_key_request(account: str | None, label: str, role: str) -> Role:
    """The checks every store makes before it creates a key; the role, checked."""
    if account is not None:
        check_name(account, "account name")
    if not isinstance(label, str) or len(label) > 200 or any(ord(c) < 32 for c in label):
        raise InvalidInput("key label must be at most 200 printable characters", field="label")
    if role not in ROLES:
        raise InvalidInput(f"a key's role is agent or owner, not {role!r}", field="role")
    if account is None and role != "owner":
        raise InvalidInput("an admin key has no role: it reaches every account with every right; make an "
                           "account key with role agent instead", field="role")
    return role


class KeyStore(Protocol):
    """Where API keys are kept: what the REST server, the MCP endpoint and ``soulpass key`` use."""

    def list(self) -> list[ApiKey]:
        """Every key (hashes included; show ``ApiKey.public()``), by account then age."""
        ...

    def verify(self, secret: str) -> ApiKey | None:
        """The key ``secret`` is, or None when it is malformed, unknown or revoked."""
        ...

    def create(self, account: str | None, label: str = "", role: Role = DEFAULT_ROLE) -> NewKey:
        """A new key for ``account`` (None: an admin key, whose role is ``owner``) with ``role``; only
        its hash is kept."""
        ...

    def revoke(self, key_id: str) -> ApiKey:
        """Forget the key (``NotFound`` when there is none): it stops working at the next request."""
        ...

    def revoke_account(self, account: str) -> tuple[ApiKey, ...]:
        """Forget every key of ``account`` (an account being deleted); returns them."""
        ...

    def put(self, key: ApiKey) -> bool:
        """Keep ``key`` as it is (its id and hash, made by another store: ``soulpass migrate``).
        False when this store has a key of that id already (then nothing changes)."""
        ...


class FileKeyStore:
    """The keys of one Soulpass home, in ``<home>/keys.json``: a :class:`KeyStore`."""

    def __init__(self, home: str | Path) -> None:
        self.home = Path(home).expanduser()
        self.path = self.home / KEYS_FILE
        self._lock = threading.Lock()
        self._cache: tuple[tuple[int, int, int], dict[str, ApiKey]] | None = None

    # --- reading -------------------------------------------------------------------------

    def _stamp(self) -> tuple[int, int, int] | None:
        try:
            st = os.stat(self.path)
        except FileNotFoundError:
            return None
        return (st.st_mtime_ns, st.st_size, st.st_ino)

    def _load(self) -> dict[str, ApiKey]:
        stamp = self._stamp()
        if stamp is None:
            return {}
        with self._lock:
            if self._cache is not None and self._cache[0] == stamp:
                return self._cache[1]
            data = load_json(self.path)
            try:
                if data["format"] not in _FORMATS:
                    raise Corrupted(f"{self.path} is a key file of format {data['format']!r}, which this version "
                                    f"does not read ({', '.join(_FORMATS)})", path=str(self.path))
                keys = {k["key_id"]: _stored_key(k) for k in data["keys"]}
            except (KeyError, TypeError, ValueError) as exc:
                raise Corrupted(f"{self.path} is not a Soulpass key file: {exc!r}", path=str(self.path)) from exc
            self._cache = (stamp, keys)
            return keys

    def list(self) -> list[ApiKey]:
        return sorted(self._load().values(), key=lambda k: (k.account or "", k.created_at, k.key_id))

    def verify(self, secret: str) -> ApiKey | None:
        """The key ``secret`` is, or None when it is malformed, unknown or revoked."""
        m = KEY_PATTERN.match(secret) if isinstance(secret, str) else None
        if m is None:
            return None
        key = self._load().get(m.group(1))
        if key is None or not hmac.compare_digest(key.sha256, key_hash(secret)):
            return None
        return key

    # --- writing -------------------------------------------------------------------------

    def _save(self, keys: dict[str, ApiKey]) -> None:
        rows = [{"key_id": k.key_id, "account": k.account, "role": k.role, "created_at": k.created_at,
                 "label": k.label, "sha256": k.sha256} for k in sorted(keys.values(), key=lambda k: k.key_id)]
        # 0600 from the temp file's creation: the hashes are never readable by others, not even briefly
        atomic_write(self.path, dump_json({"format": _FORMATS[-1], "keys": rows}), mode=0o600)

    def create(self, account: str | None, label: str = "", role: Role = DEFAULT_ROLE) -> NewKey:
        """A new key for ``account`` (None: an admin key) with ``role``. The caller shows ``secret`` once."""
        role = check_key_request(account, label, role)
        with file_lock(self.home / ".keys.lock"):
            keys = dict(self._load())
            key_id = secrets.token_hex(4)
            while key_id in keys:
                key_id = secrets.token_hex(4)
            secret = f"sp_{key_id}_{secrets.token_urlsafe(32)}"
            key = ApiKey(key_id=key_id, account=account, created_at=utc_now().isoformat(timespec="seconds"),
                         label=label, sha256=key_hash(secret), role=role)
            keys[key_id] = key
            self._save(keys)
        return NewKey(key, secret)

    def revoke(self, key_id: str) -> ApiKey:
        with file_lock(self.home / ".keys.lock"):
            keys = dict(self._load())
            key = keys.pop(key_id, None)
            if key is None:
                raise NotFound(f"no key with id {key_id!r}", key_id=key_id)
            self._save(keys)
        return key

    def revoke_account(self, account: str) -> tuple[ApiKey, ...]:
        with file_lock(self.home / ".keys.lock"):
            keys = dict(self._load())
            gone = [k for k in keys.values() if k.account == account]
            if gone:
                self._save({i: k for i, k in keys.items() if k.account != account})
        return tuple(gone)

    def put(self, key: ApiKey) -> bool:
        with file_lock(self.home / ".keys.lock"):
            keys = dict(self._load())
            if key.key_id in keys:
                return False
            keys[key.key_id] = key
            self._save(keys)
        return True


def _stored_key(row: dict[str, Any]) -> ApiKey:
    """A row of ``keys.json``; one written before roles (format /1) is an owner key."""
    role = row.get("role", "owner")
    if role not in ROLES:
        raise ValueError(f"key {row['key_id']!r} has the unknown role {role!r}")
    return ApiKey(key_id=row["key_id"], account=row["account"], created_at=row["created_at"],
                  label=row.get("label", ""), sha256=row["sha256"], role=role)


@dataclass(frozen=True)
class CarriedKeys:
    """What :func:`carry_keys` did: the key ids copied, and those the destination had already."""

    carried: tuple[str, ...]
    already_there: tuple[str, ...]

    def to_dict(self) -> dict[str, Any]:
        return {"carried": list(self.carried), "already_there": list(self.already_there)}


def carry_keys(src: KeyStore, dst: KeyStore, accounts: Iterable[str]) -> CarriedKeys:
    """Copy the keys of ``accounts`` and every admin key from ``src`` to ``dst``, hashes as they are,
    so a server moved to another store accepts the keys it accepted before."""
    wanted = set(accounts)
    carried: list[str] = []
    there: list[str] = []
    for key in src.list():
        if key.account is None or key.account in wanted:
            (carried if dst.put(key) else there).append(key.key_id)
    return CarriedKeys(tuple(carried), tuple(there))
