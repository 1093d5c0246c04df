"""Erasure in the files backend: every stored copy of some keys rewritten to its placeholder.

Each copy (the current file, and every ``history/`` copy of the key) is replaced atomically by
:func:`soulpass.store.redact.redacted_copy` of itself, so a crash leaves each copy either whole or
redacted, never torn; then the prose entries whose names hold text move to their new names, and
the version log is rewritten (one atomic replace) without the erased details. Every step is
idempotent, so running the same forget again finishes one cut short.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
from collections.abc import Collection, Sequence
from pathlib import Path
from typing import Any

from soulpass.errors import InvalidInput
from soulpass.store.files.copies import encode_copy, parse_copy
from soulpass.store.files.layout import LOG_FILE, history_dir, history_path
from soulpass.store.files.log_sums import rewrite_sums
from soulpass.store.files.version_log import HISTORY_DIGESTS, encode_log, entry_of
from soulpass.store.fsio import atomic_write, fsync_dir, makedirs_durable
from soulpass.store.redact import Erasure, redacted_copy, redacted_entry

__all__ = ["forget_keys"]


def _copies(account: Path, key: str) -> list[Path]:
    hist, suffix = account / history_dir(key), Path(key).suffix
    found = [account / key] if (account / key).is_file() else []
    if hist.is_dir():
        found += sorted(p for p in hist.iterdir() if p.suffix == suffix and p.stem.isdigit())
    return found


def _move(account: Path, old: str, new: str) -> None:
    """``old``'s current file and history folder renamed to ``new``'s (done already: nothing)."""
    for src, dst in ((account / old, account / new), (account / history_dir(old), account / history_dir(new))):
        if src.exists() and not dst.exists():
            makedirs_durable(dst.parent)
            os.rename(src, dst)
            fsync_dir(dst.parent)
            fsync_dir(src.parent)


def _rewrite_log(account: Path, erasure: Erasure, rewritten: Collection[str]) -> None:
    """The log without the erased details, and with the digests of the ``history/`` copies of the
    keys ``rewritten`` (by their names after the move) as they are now."""
    path = account / LOG_FILE
    if not path.exists():
        return
    old = path.read_bytes()
    entries = [redacted_entry(entry_of(line, digests=True), erasure) for line in old.splitlines() if line.strip()]
    new = encode_log(_redigested(account, entry, rewritten) for entry in entries)
    if new != old:
        atomic_write(path, new)
    rewrite_sums(account)


def forget_keys(account: Path, keys: Sequence[str], erasure: Erasure) -> dict[str, list[int]]:
    """Rewrite every copy of each of ``keys`` as ``redacted_copy`` makes it for the records
    ``erasure.ids``, move the renamed prose entries, rewrite the log's details; for each key (by
    its name after the move), the versions whose copies were rewritten. Call it under the lock."""
    rewritten: dict[str, list[int]] = {}
    for key in keys:
        if not key.endswith((".json", ".md")):
            raise InvalidInput(f"only JSON and Markdown copies can be forgotten, not {key}", key=key)
        versions: list[int] = []
        for path in _copies(account, key) or _copies(account, erasure.renames.get(key, key)):
            body = parse_copy(path.name, path.read_bytes())
            data = encode_copy(key, redacted_copy(body, erasure.ids))
            if data != path.read_bytes():
                atomic_write(path, data)
            versions.append(int(body.get("version", 0)))
        rewritten[erasure.renames.get(key, key)] = sorted(versions)
    for old, new in erasure.renames.items():
        _move(account, old, new)
    _rewrite_log(account, erasure, rewritten)
    return rewritten


def _redigested(account: Path, entry: dict[str, Any], keys: Collection[str]) -> dict[str, Any]:
    pairs = entry.get(HISTORY_DIGESTS)
    if not isinstance(pairs, list):
        return entry
    version, out = int(entry["version"]), []
    for pair in pairs:
        if isinstance(pair, list) and len(pair) == 2 and pair[0] in keys:
            with contextlib.suppress(FileNotFoundError):
                pair = [pair[0], hashlib.sha256((account / history_path(pair[0], version)).read_bytes()).hexdigest()]
        out.append(pair)
    return {**entry, HISTORY_DIGESTS: out}
