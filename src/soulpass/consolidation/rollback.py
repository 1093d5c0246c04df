"""Rollback as a plan: a *new* version whose content equals version V (history is kept)."""

from __future__ import annotations

from collections import defaultdict
from datetime import datetime
from typing import Any

from soulpass.consolidation.plan import MasterReader
from soulpass.errors import NotFound
from soulpass.store.files.commit import Changeset, FileWrite
from soulpass.store.files.copies import encode_copy
from soulpass.store.keys import KIND_BY_PREFIX, RECORD_DIRS
from soulpass.store.versions import touched_paths

__all__ = ["plan_rollback"]


def _same(a: dict[str, Any], b: dict[str, Any]) -> bool:
    return {k: v for k, v in a.items() if k != "version"} == {k: v for k, v in b.items() if k != "version"}


def _record_kind(relpath: str) -> str | None:
    name = relpath.rsplit("/", 1)[-1]
    kind = KIND_BY_PREFIX.get(name[:2])
    return kind if kind and relpath.startswith(RECORD_DIRS[kind] + "/") else None


def plan_rollback(master: MasterReader, log: list[dict[str, Any]], target: int, now: datetime) -> Changeset:
    """Only paths touched after ``target`` can differ, so the cost follows what changed since."""
    head = master.head()
    if not 0 <= target <= head:
        raise NotFound(f"version {target} does not exist (HEAD is {head})")
    version = head + 1
    writes: list[FileWrite] = []
    retired: list[str] = []
    replaced: list[str] = []
    restored: dict[str, list[str]] = defaultdict(list)
    for rel in sorted(touched_paths(log, target)):
        then, current = master.read_at(rel, target), master.read_at(rel, head)
        if then is None and current is not None:
            retired.append(rel)
        elif then is not None and (current is None or not _same(then, current)):
            writes.append(FileWrite(rel, encode_copy(rel, {**then, "version": version})))
            kind = _record_kind(rel)
            if current is None and kind:
                restored[kind].append(rel.rsplit("/", 1)[-1].removesuffix(".json"))
            else:
                replaced.append(rel)
    counts: dict[str, Any] = {}
    for entry in log:
        if int(entry["version"]) == target:
            counts = dict(entry.get("counts", {}))
    version_doc = {"version": version, "parent": head, "timestamp": now.isoformat(),
                   "source_sandbox": None, "rolled_back_to": target, "counts": counts}
    log_entry = {
        "version": version, "parent": head, "timestamp": now.isoformat(), "kind": "rollback",
        "rolled_back_to": target, "added": {}, "restored": dict(restored), "superseded": [],
        "replaced": replaced, "retired": retired, "conflicts": [], "counts": counts,
    }
    return Changeset(base_version=head, writes=tuple(writes), log_entry=log_entry,
                     version_doc=version_doc, retires=tuple(retired))
