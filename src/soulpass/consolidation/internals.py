"""What a person changed, apart from the store's own bookkeeping.

The knowledge graph's files (``core/09_Genesis_Knowledge_System``: the graph, its shards and its
functional index) are derived from the facts: a fact added or superseded rewrites half a dozen
keys in them (``edges.N_…|lives in|N_….fact_refs``), and the superseded fact's own file is
rewritten to point at its successor. A diff that lists those drowns the change itself, which the
fact rows already say. Diffs and counts show a person's changes and keep these one flag away
(``--internal`` on the CLI, a link in the browser).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import PurePosixPath
from typing import Any

from soulpass.store.keys import GKS_DATA

__all__ = ["INTERNAL_KINDS", "is_internal_path", "people_kinds", "personal_diff"]

INTERNAL_KINDS = frozenset({"gks", "gks_functional", "gks_shard"})  # the graph's documents, as the index names them
_GRAPH_FOLDER = str(PurePosixPath(GKS_DATA).parent) + "/"


def is_internal_path(path: str) -> bool:
    """A file of the knowledge graph (derived from the facts, rewritten by every fact change)."""
    return path.startswith(_GRAPH_FOLDER)


def people_kinds(counts: Mapping[str, int]) -> dict[str, int]:
    """``counts`` by kind without the graph's internal kinds."""
    return {k: n for k, n in counts.items() if k not in INTERNAL_KINDS}


def personal_diff(diff: Mapping[str, Any]) -> tuple[dict[str, Any], int]:
    """``diff`` (``Account.diff``'s answer) without the graph's documents and the rewritten copies
    of superseded facts (their ``superseded`` entry says it), and how many files were left out."""
    superseded = {str(s.get("fact")) for s in diff.get("superseded") or [] if isinstance(s, Mapping)}

    def internal(path: str) -> bool:
        return is_internal_path(path) or PurePosixPath(path).stem in superseded

    out = dict(diff)
    hidden: set[str] = set()
    for part in ("replaced", "retired", "written"):
        if part in diff:
            paths = [p for p in diff[part] or [] if isinstance(p, str)]
            out[part] = [p for p in paths if not internal(p)]
            hidden.update(p for p in paths if internal(p))
    if "documents" in diff:
        docs = [d for d in diff["documents"] or [] if isinstance(d, Mapping)]
        out["documents"] = [d for d in docs if not is_internal_path(str(d.get("path", "")))]
        hidden.update(str(d.get("path", "")) for d in docs if is_internal_path(str(d.get("path", ""))))
    if "added" in diff:
        added = dict(diff["added"] or {})
        out["added"] = {k: v for k, v in added.items() if k not in INTERNAL_KINDS}
        hidden.update(str(i) for k, v in added.items() if k in INTERNAL_KINDS for i in v)
    return out, len(hidden)
