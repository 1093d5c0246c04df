"""The placeholder a forgotten record's copies become (issue 15: erasure).

Versions are immutable except for this one operation: ``AccountBackend.forget`` rewrites every
stored copy of a record, current and history, to :func:`redacted` of it. The placeholder keeps
what names the copy (id, kind, version, times, links to other ids) so every version still reads
and audits as before, and replaces every piece of content by ``[forgotten]`` (lists and objects
emptied), so nothing of what was said survives in the store.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from soulpass.records import RECORD_MODELS

__all__ = ["FORGOTTEN", "redacted", "redacted_copy"]

FORGOTTEN = "[forgotten]"
# Fields that name a copy or link it to other ids, or whose values are a closed set: never content.
_KEEP = frozenset({
    "id", "kind", "version", "created_at", "session_id", "agent", "schema_version", "episode_id",
    "superseded_by", "supersedes", "valid_from_version", "valid_to_version", "turn_refs", "source_refs",
    "episode_ref", "reply_to", "epistemic_mode", "confidence", "persona_id", "event_id",
})


def redacted(body: Mapping[str, Any]) -> dict[str, Any]:
    """The placeholder of one stored record copy ``body`` (idempotent: a placeholder stays as is)."""
    out: dict[str, Any] = {}
    for name, value in body.items():
        if name in _KEEP or not isinstance(value, (str, list, dict)):
            out[name] = value
        elif isinstance(value, str):
            out[name] = FORGOTTEN
        else:
            out[name] = type(value)()
    out["tags"], out["text"], out["semantic_hash"] = [FORGOTTEN], FORGOTTEN, ""
    model = RECORD_MODELS.get(str(body.get("kind")))
    if model is None:
        return out
    return model.model_validate(out).model_dump(mode="json")


def _without_facts(body: Mapping[str, Any], ids: frozenset[str]) -> dict[str, Any]:
    """A knowledge-graph document with the facts ``ids`` taken out: their references dropped, an
    edge left with none removed (its labels are the forgotten fact's subject and object)."""
    out = dict(body)
    if isinstance(body.get("edges"), dict):
        edges = {}
        for key, edge in body["edges"].items():
            refs = [r for r in edge.get("fact_refs", []) if r not in ids]
            if refs:
                edges[key] = {**edge, "fact_refs": refs}
        out["edges"] = edges
    if isinstance(body.get("entries"), dict):
        entries = {k: [e for e in v if e.get("fact") not in ids] for k, v in body["entries"].items()}
        out["entries"] = {k: v for k, v in entries.items() if v}
    return out


def redacted_copy(body: Mapping[str, Any], ids: frozenset[str]) -> dict[str, Any]:
    """What one stored copy becomes when the records ``ids`` are forgotten: a record's copy its
    placeholder, a knowledge-graph shard the same without those facts, anything else as it was."""
    if body.get("kind") in ("gks_shard", "gks_functional"):
        return _without_facts(body, ids)
    if body.get("id") in ids:
        return redacted(body)
    return dict(body)

