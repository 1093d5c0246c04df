"""Reading the version log: what each version added, superseded, replaced and retired."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from soulpass.errors import InvalidInput

__all__ = ["diff_entries", "touched_paths"]


def diff_entries(log: list[dict[str, Any]], a: int, b: int) -> dict[str, Any]:
    """Net change from version ``a`` to ``b`` (``a <= b``) from the log entries between them."""
    if a > b:
        raise InvalidInput(f"diff needs A <= B, got {a} > {b}", field="versions")
    added: dict[str, list[str]] = defaultdict(list)
    retired: list[str] = []
    superseded: list[dict[str, str]] = []
    replaced: set[str] = set()
    rebases: list[dict[str, Any]] = []
    conflicts: list[dict[str, Any]] = []
    for entry in log:
        v = int(entry["version"])
        if not a < v <= b:
            continue
        gone = set(entry.get("retired", []))
        for kind, ids in entry.get("added", {}).items():
            added[kind].extend(ids)
        for kind, ids in entry.get("restored", {}).items():
            added[kind].extend(ids)
        retired.extend(gone)
        superseded.extend(entry.get("superseded", []))
        replaced.update(entry.get("replaced", []))
        if entry.get("rebased"):
            rebases.append({"version": v, **entry["rebased"]})
        conflicts.extend({"version": v, **c} for c in entry.get("conflicts", []))
    retired_ids = {p.rsplit("/", 1)[-1].removesuffix(".json") for p in retired}
    net_added = {k: [i for i in ids if i not in retired_ids] for k, ids in added.items()}
    return {
        "from": a,
        "to": b,
        "added": {k: v for k, v in sorted(net_added.items()) if v},
        "superseded": superseded,
        "replaced": sorted(replaced),
        "retired": sorted(retired),
        "rebases": rebases,
        "conflicts": conflicts,
    }


def touched_paths(log: list[dict[str, Any]], after: int) -> set[str]:
    """Every core path that versions after ``after`` wrote, replaced or retired."""
    from soulpass.store.layout import record_path

    paths: set[str] = set()
    for entry in log:
        if int(entry["version"]) <= after:
            continue
        for ids in list(entry.get("added", {}).values()) + list(entry.get("restored", {}).values()):
            paths.update(record_path(i) for i in ids)
        paths.update(entry.get("replaced", []))
        paths.update(entry.get("written", []))
        paths.update(entry.get("retired", []))
    return paths
