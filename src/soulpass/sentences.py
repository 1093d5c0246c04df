"""Sentences, split in one place for everything that needs them: a journal entry's first insight
and brief summary (``soulpass.prose``), a record's passages (``soulpass.index.passages``) and the
scribe's extractive summaries (``soulpass.agent.scribe``).

The splitting is sentencex's (Wikimedia's rule-based segmenter, in Rust: abbreviations such as
"Dr." or "e.g." and decimals do not end a sentence; linear in the text).
"""

from __future__ import annotations

from sentencex import segment  # type: ignore[import-untyped,unused-ignore]

__all__ = ["sentences"]


def sentences(text: str, *, lines: bool = False, language: str = "en") -> list[str]:
    """The sentences of ``text``, stripped, empty ones left out; with ``lines`` a line break also
    ends one (log entries, lists)."""
    parts = text.splitlines() if lines else [text]
    return [s.strip() for part in parts for s in segment(language, part) if s.strip()]
