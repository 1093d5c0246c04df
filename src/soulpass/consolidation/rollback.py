"""Rollback as a plan: a *new* version whose content equals version V (history is kept)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from soulpass.errors import InvalidInput
from soulpass.records import RECORD_MODELS, Record
from soulpass.store.contract import Change, DocumentPut, Snapshot, VersionEntry
from soulpass.store.keys import KIND_BY_PREFIX, RECORD_DIRS
from soulpass.store.versions import touched_paths

__all__ = ["plan_rollback"]


def _same(a: Mapping[str, Any], b: Mapping[str, Any]) -> bool:
    return {k: v for k, v in a.items() if k != "version"} == {k: v for k, v in b.items() if k != "version"}


def _record_kind(relpath: str) -> str | None:
    name = relpath.rsplit("/", 1)[-1]
    kind = KIND_BY_PREFIX.get(name[:2])
    return kind if kind and relpath.startswith(RECORD_DIRS[kind] + "/") else None


def plan_rollback(master: Snapshot, target: Snapshot, log: Sequence[VersionEntry], now: datetime) -> Change:
    """Version HEAD+1 on ``master`` (HEAD) equal to ``target``. Only keys touched after the
    target (``log``: the entries after it, with bulk id lists inlined) can differ, so the cost
    follows what changed since."""
    if target.version > master.version:
        raise InvalidInput(f"cannot roll back to version {target.version} past HEAD {master.version}")
    version = master.version + 1
    records: list[Record] = []
    documents: list[DocumentPut] = []
    retired: list[str] = []
    replaced: list[str] = []
    restored: dict[str, list[str]] = defaultdict(list)
    for rel in sorted(touched_paths(log, target.version)):
        then, current = target.document(rel), master.document(rel)
        if then is None and current is not None:
            retired.append(rel)
        elif then is not None and (current is None or not _same(then, current)):
            kind = _record_kind(rel)
            if kind:
                records.append(RECORD_MODELS[kind].model_validate({**then, "version": version}))
            else:
                documents.append(DocumentPut(rel, {**then, "version": version}))
            if current is None and kind:
                restored[kind].append(rel.rsplit("/", 1)[-1].removesuffix(".json"))
            else:
                replaced.append(rel)
    counts = dict(target.entry().counts)
    return Change(VersionEntry({
        "version": version, "parent": master.version, "timestamp": now.isoformat(), "kind": "rollback",
        "rolled_back_to": target.version, "added": {}, "restored": dict(restored), "superseded": [],
        "replaced": replaced, "retired": retired, "conflicts": [], "counts": counts,
    }), records=tuple(records), documents=tuple(documents), retires=tuple(retired))
