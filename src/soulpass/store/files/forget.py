"""Erasure in the files backend: every stored copy of some keys rewritten to its placeholder.

Each copy (the current file, and every ``history/`` copy of the key) is replaced atomically by
:func:`soulpass.store.redact.redacted` of itself, so a crash leaves each copy either whole or
redacted, never torn; the redaction is idempotent, so running the same forget again finishes it.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

from soulpass.errors import InvalidInput
from soulpass.store.files.layout import history_dir
from soulpass.store.fsio import atomic_write, dump_json
from soulpass.store.redact import redacted_copy

__all__ = ["forget_keys"]


def _copies(account: Path, key: str) -> list[Path]:
    hist = account / history_dir(key)
    found = [account / key] if (account / key).is_file() else []
    if hist.is_dir():
        found += sorted(p for p in hist.iterdir() if p.suffix == ".json" and p.stem.isdigit())
    return found


def forget_keys(account: Path, keys: Sequence[str], ids: Sequence[str]) -> dict[str, list[int]]:
    """Rewrite every copy of each of ``keys`` (JSON) as ``redacted_copy`` makes it for the records
    ``ids``; for each key, the versions whose copies were rewritten. Call it under the account's lock."""
    rewritten: dict[str, list[int]] = {}
    forgotten = frozenset(ids)
    for key in keys:
        if not key.endswith(".json"):
            raise InvalidInput(f"only JSON copies can be forgotten, not {key}", key=key)
        versions: list[int] = []
        for path in _copies(account, key):
            body = json.loads(path.read_bytes())
            data = dump_json(redacted_copy(body, forgotten))
            if data != path.read_bytes():
                atomic_write(path, data)
            versions.append(int(body.get("version", 0)))
        rewritten[key] = sorted(versions)
    return rewritten
