"""What one version added, counted from its log entry: for ``soulpass log`` and MCP ``memory_log``.

A version's ``counts`` are running totals of the account; what the version itself added is in
its id lists (records, restored records), its ``journal`` (prose entries) and the clipboards it
wrote. What it refused is in ``rejected`` (facts and core proposals) and ``duplicates``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from soulpass.store.keys import CLIPBOARD_DIR

__all__ = ["added_counts", "refused_counts", "session_names"]


def added_counts(entry: Mapping[str, Any]) -> dict[str, int]:
    """Kind -> how many this version added (``restored <kind>`` for a rollback's), zeros left out."""
    added = entry.get("added", {})
    counts: dict[str, int] = dict(entry.get("added_counts") or {k: len(v) for k, v in added.items()})
    counts |= {f"restored {k}": len(v) for k, v in entry.get("restored", {}).items()}
    counts.setdefault("journal", len(entry.get("journal", [])))  # a journal import counts them already
    counts["clipboard"] = sum(1 for p in entry.get("written", []) if p.startswith(CLIPBOARD_DIR + "/"))
    return {k: n for k, n in sorted(counts.items()) if n}


def refused_counts(entry: Mapping[str, Any]) -> dict[str, int]:
    """``rejected`` (facts and core proposals refused) and ``duplicates`` (repeats not stored), zeros left out."""
    counts = {"rejected": len(entry.get("rejected", [])), "duplicates": len(entry.get("duplicates", []))}
    return {k: n for k, n in counts.items() if n}


def session_names(log: Iterable[Mapping[str, Any]]) -> dict[str, str]:
    """Sandbox id -> the name it had (an imported conversation's title), for every archived one: what
    a search hit's ``session_id`` is called."""
    return {str(e["source_sandbox"]): str(e["sandbox_name"]) for e in log
            if e.get("source_sandbox") and e.get("sandbox_name")}
