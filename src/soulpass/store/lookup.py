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

__all__ = ["SHA256_TOKEN", "by_hash", "carried", "hash_holder", "is_sha256", "tag_holder", "tag_needle"]

# A hash as records.semantic_hash makes them, in a stored copy's bytes.
SHA256_TOKEN = re.compile(rb"(?<![0-9a-f])[0-9a-f]{64}(?![0-9a-f])")


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


def is_sha256(value: str) -> bool:
    """Whether ``value`` is a hash as ``records.semantic_hash`` makes them (64 hex digits)."""
    return SHA256_TOKEN.fullmatch(value.encode()) is not None


def hash_holder(hashes: Collection[str]) -> Callable[[bytes], bool]:
    """Whether a stored copy's bytes may carry one of ``hashes`` (a hash is stored as written)."""
    wanted = frozenset(hashes)
    if all(is_sha256(h) for h in wanted):
        return lambda data: not wanted.isdisjoint(m.decode() for m in SHA256_TOKEN.findall(data))
    needles = [h.encode("utf-8") for h in wanted]
    return lambda data: any(n in data for n in needles)


def carried(body: Mapping[str, Any], wanted: Collection[str]) -> set[str]:
    """Which of ``wanted`` the stored copy ``body`` carries in its ``tags``."""
    tags = body.get("tags")
    return {t for t in tags if isinstance(t, str) and t in wanted} if isinstance(tags, list | tuple) else set()


def _written_as_is(text: str) -> bool:
    return all(json.dumps(ch, ensure_ascii=False)[1:-1] == ch for ch in text)


def tag_holder(tags: Collection[str]) -> Callable[[bytes], bool]:
    """Whether a stored copy's bytes may carry one of ``tags``: the strings that start with the
    tags' common prefix are taken out of the bytes and looked up (a re-import's tags are mostly new:
    few copies are parsed); without a prefix, any copy may."""
    needle = tag_needle(tags)
    if not needle:
        return lambda data: True
    if not all(_written_as_is(t) for t in tags):  # stored escaped: look for the prefix only
        return lambda data: needle in data
    token = re.compile(re.escape(needle) + rb'[^"\\]*')
    wanted = frozenset(t.encode("utf-8") for t in tags)
    return lambda data: needle in data and not wanted.isdisjoint(token.findall(data))


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
        if not _written_as_is(ch):
            prefix = prefix[:i]
            break
    return prefix.encode("utf-8")
