"""What a range of versions did to the account's documents (core memory, the profile, named
states, GKS shards, clipboards): which were created, changed or removed, and inside each, which
keys were added, changed or removed.

The version log names the documents each version wrote, replaced or retired; comparing their
content at the two versions gives the keys. Records and prose entries are not documents here:
the log's id lists already say what happened to them.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from soulpass.store.contract import Snapshot, VersionEntry
from soulpass.store.keys import KIND_BY_PREFIX, is_journal_path

__all__ = ["document_changes"]

# A document's own bookkeeping, rewritten by every version that touches it: not a change of content.
_BOOKKEEPING = frozenset({"kind", "version", "updated_at", "key_times", "schema_version"})


def document_changes(log: Iterable[VersionEntry], before: Snapshot, after: Snapshot) -> list[dict[str, Any]]:
    """The documents that differ between ``before`` and ``after`` (sorted by path), each as
    ``{"path", "change": "created"|"changed"|"removed", "keys": {"added", "changed", "removed"}}``
    with keys as dotted paths (``data.mood``, ``identity.name``). ``log`` holds the entries of
    the versions in between; a document written and retired within them is not listed."""
    paths: set[str] = set()
    for entry in log:
        if before.version < entry.version <= after.version:
            paths.update(p for p in (*entry.written, *entry.replaced, *entry.retired) if _is_document(p))
    out = []
    for path in sorted(paths):
        old, new = before.document(path), after.document(path)
        if old is None and new is None:
            continue
        keys = _key_changes(_leaves(old or {}), _leaves(new or {}))
        if old is not None and new is not None and not any(keys.values()):
            continue  # rewritten with the same content
        change = "created" if old is None else "removed" if new is None else "changed"
        out.append({"path": path, "change": change, "keys": keys})
    return out


def _is_document(path: str) -> bool:
    """Not a record (``…/EP_20250101_001.json``) nor a prose entry (their changes are in the id lists)."""
    name = path.rsplit("/", 1)[-1].removesuffix(".json")
    return not is_journal_path(path) and not (name[:2] in KIND_BY_PREFIX and name[2:3] == "_")


def _leaves(doc: Mapping[str, Any]) -> dict[str, Any]:
    """Dotted key path -> value for every leaf (a list counts as one value); bookkeeping left out."""
    out: dict[str, Any] = {}
    stack: list[tuple[str, Any]] = [(k, v) for k, v in doc.items() if k not in _BOOKKEEPING]
    while stack:  # no recursion: a state may nest as deep as the input limits allow
        key, value = stack.pop()
        if isinstance(value, Mapping) and value:
            stack.extend((f"{key}.{k}", v) for k, v in value.items())
        else:
            out[key] = value
    return out


def _key_changes(old: Mapping[str, Any], new: Mapping[str, Any]) -> dict[str, list[str]]:
    return {"added": sorted(new.keys() - old.keys()),
            "changed": sorted(k for k in old.keys() & new.keys() if old[k] != new[k]),
            "removed": sorted(old.keys() - new.keys())}
