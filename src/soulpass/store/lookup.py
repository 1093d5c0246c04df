"""What both backends share to answer a snapshot's lookups (``Snapshot.with_semantic_hash`` and
``Snapshot.tags_carried``): the order of repeated entries and the bytes a stored tag starts with.

A commit is planned on the store alone (DESIGN principle 15): these read stored copies, never an
index, so what a planner decides does not depend on which process answered or how far its index
has caught up.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Collection, Iterable, Mapping
from datetime import UTC, datetime
from typing import Any

__all__ = ["by_hash", "carried", "hash_holder", "tag_needle"]

_SHA256 = re.compile(rb"(?<![0-9a-f])[0-9a-f]{64}(?![0-9a-f])")


def _event_time(body: Mapping[str, Any]) -> datetime:
    stamp = body.get("created_at") or body.get("timestamp")
    try:
        when = datetime.fromisoformat(str(stamp))
    except ValueError:
        return datetime.min
    return when.replace(tzinfo=None) if when.tzinfo is None else when.astimezone(UTC).replace(tzinfo=None)


def by_hash(found: Iterable[tuple[str, Mapping[str, Any]]],
            hashes: Collection[str]) -> dict[str, list[tuple[str, str]]]:
    """Prose entries given as (key, parsed body) grouped by those of ``hashes`` they carry, each
    group as (id, key), oldest event first, then by id."""
    groups: dict[str, list[tuple[datetime, str, str]]] = {}
    for key, body in found:
        shash = body.get("semantic_hash")
        if isinstance(shash, str) and shash in hashes:
            groups.setdefault(shash, []).append((_event_time(body), str(body.get("id", "")), key))
    return {h: [(rid, key) for _when, rid, key in sorted(rows)] for h, rows in groups.items()}


def hash_holder(hashes: Collection[str]) -> Callable[[bytes], bool]:
    """Whether a stored copy's bytes may carry one of ``hashes`` (a hash is stored as written)."""
    wanted = frozenset(hashes)
    if all(_SHA256.fullmatch(h.encode()) for h in wanted):  # SHA-256 hex, as records.semantic_hash makes them
        return lambda data: not wanted.isdisjoint(m.decode() for m in _SHA256.findall(data))
    needles = [h.encode("utf-8") for h in wanted]
    return lambda data: any(n in data for n in needles)


def carried(body: Mapping[str, Any], wanted: Collection[str]) -> set[str]:
    """Which of ``wanted`` the stored copy ``body`` carries in its ``tags``."""
    tags = body.get("tags")
    return {t for t in tags if isinstance(t, str) and t in wanted} if isinstance(tags, list | tuple) else set()


def tag_needle(tags: Collection[str]) -> bytes:
    """Bytes that every stored copy carrying one of ``tags`` holds: the tags' common prefix as
    ``store.fsio.dump_json`` writes it, cut before the first character JSON escapes. Empty when
    they share none (every copy is then a candidate); imported messages share ``import:``."""
    if not tags:
        return b""
    first, last = min(tags), max(tags)
    n = 0
    while n < min(len(first), len(last)) and first[n] == last[n]:
        n += 1
    prefix = first[:n]
    for i, ch in enumerate(prefix):
        if json.dumps(ch, ensure_ascii=False)[1:-1] != ch:
            prefix = prefix[:i]
            break
    return prefix.encode("utf-8")
