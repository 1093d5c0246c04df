"""Reading the version log: what each version added, superseded, replaced and retired."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from typing import Any

from soulpass.errors import InvalidInput
from soulpass.store.contract import Supersession, VersionDiff, VersionEntry
from soulpass.store.keys import KIND_BY_PREFIX

__all__ = ["diff_entries", "touched_paths"]


def diff_entries(log: Sequence[VersionEntry], a: int, b: int) -> VersionDiff:
    """Net change from version ``a`` to ``b`` (``a <= b``) from the log entries between them."""
    if a > b:
        raise InvalidInput(f"diff needs A <= B, got {a} > {b}", field="versions")
    first: dict[str, str] = {}  # record id -> "add" | "retire": its first change in (a, b]
    last: dict[str, str] = {}
    kinds: dict[str, str] = {}
    retired_path: dict[str, str] = {}
    superseded: list[Supersession] = []
    replaced: set[str] = set()
    rebases: list[dict[str, Any]] = []
    conflicts: list[dict[str, Any]] = []

    def change(rid: str, op: str) -> None:
        first.setdefault(rid, op)
        last[rid] = op

    for entry in sorted(log, key=lambda e: e.version):
        v = entry.version
        if not a < v <= b:
            continue
        for kind, ids in entry.added.items():  # a rollback's restored ids too
            for rid in ids:
                kinds[rid] = kind
                change(rid, "add")
        for item in entry.fields.get("journal", []):  # prose records are named by path, like documents
            kinds[item["path"]] = "journal"
        for path in [*entry.written, *entry.replaced]:
            change(path, "add")  # a document written again after a retire is back
        for path in entry.retired:
            name = path.rsplit("/", 1)[-1].removesuffix(".json")
            rid = name if name[:2] in KIND_BY_PREFIX and "/" in path and name[2:3] == "_" else path
            retired_path[rid] = path
            change(rid, "retire")
        superseded.extend(entry.superseded)
        replaced.update(entry.replaced)
        if entry.fields.get("rebased"):
            rebases.append({"version": v, **entry.fields["rebased"]})
        conflicts.extend({"version": v, **c} for c in entry.fields.get("conflicts", []))
    # A supersession counts only while its superseding fact is still there at B.
    present = {rid for rid, op in last.items() if op == "add"}
    superseded = [s for s in superseded if s.by in present]
    # Net effect: present at B but not at A is added; present at A but not at B is retired.
    added: dict[str, list[str]] = defaultdict(list)
    retired: list[str] = []
    for rid, op in first.items():
        if op == "add" and last[rid] == "add" and rid in kinds:
            added[kinds[rid]].append(rid)
        elif op == "retire" and last[rid] == "retire":
            retired.append(retired_path[rid])
    return VersionDiff(
        from_version=a, to_version=b, added={k: tuple(v) for k, v in sorted(added.items()) if v},
        superseded=tuple(superseded), replaced=tuple(sorted(replaced)),
        retired=tuple(sorted(retired)), rebases=tuple(rebases), conflicts=tuple(conflicts),
    )


def touched_paths(log: Sequence[VersionEntry], after: int) -> set[str]:
    """Every core path that versions after ``after`` wrote, replaced or retired."""
    from soulpass.store.keys import record_path

    paths: set[str] = set()
    for entry in log:
        if entry.version <= after:
            continue
        for ids in entry.added.values():  # a rollback's restored ids too
            paths.update(record_path(i) for i in ids)
        paths.update(entry.replaced)
        paths.update(entry.written)
        paths.update(entry.retired)
    return paths
