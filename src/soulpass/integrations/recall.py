"""What a framework's memory-search tool hands its model: the best hits of a hybrid search, as text."""

from __future__ import annotations

from soulpass import Account

__all__ = ["MEMORY_KINDS", "recall"]

# The records a memory is made of; documents (transcripts, LangGraph items, states) are left out:
# a transcript holds every word of its conversation and would answer every query.
MEMORY_KINDS = ("turn_user", "turn_llm", "episode", "fact", "sensory", "journal")


def recall(account: Account, query: str, k: int = 5) -> str:
    """One line per hit (``[kind id] speaker: text``), best first, or a line saying nothing matched."""
    hits = account.search(query, k=k, kinds=MEMORY_KINDS)
    if not hits:
        return f"No memory matches {query!r}."
    lines = []
    for hit in hits:
        speaker = hit.row.agent if hit.row is not None and hit.row.agent else None
        lines.append(f"[{hit.kind} {hit.id}] {speaker + ': ' if speaker else ''}{hit.text}")
    return "\n".join(lines)
