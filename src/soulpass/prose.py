"""Prose records (the Mira design): journal, experiment, reflection and conversation entries.

An entry is stored verbatim as Markdown with YAML front matter, never compressed or summarised in
place. The front matter carries the seed's fields (``id``, ``timestamp``, ``type``, ``tags``,
``brief_summary``, ``core_insight``, ``semantic_hash``) and the common record envelope.

The semantic hash is the seed's: the core insight (front matter, else the first heading or
sentence of the body), lowercased, punctuation stripped, whitespace collapsed, SHA-256.
Pure functions only: the store writes the bytes, the catalog reads them.
"""

from __future__ import annotations

import re
from datetime import datetime
from typing import Any, Literal

import yaml
from pydantic import field_validator, model_validator

from soulpass.errors import Corrupted, InvalidInput
from soulpass.records import Record, semantic_hash
from soulpass.sentences import sentences

__all__ = [
    "ENTRY_TYPES",
    "FOLDER_OF_TYPE",
    "TYPE_OF_FOLDER",
    "EntryType",
    "JournalEntry",
    "brief_summary_of",
    "first_insight",
    "parse_markdown",
    "render_markdown",
    "slug",
    "split_front_matter",
]

EntryType = Literal["journal", "experiment", "reflection", "conversation"]
ENTRY_TYPES: tuple[str, ...] = ("journal", "experiment", "reflection", "conversation")
# The seed's folder names (``journal/``, ``experiments/``, ``reflections/``, ``conversations/``).
FOLDER_OF_TYPE: dict[str, str] = {
    "journal": "journal", "experiment": "experiments", "reflection": "reflections", "conversation": "conversations"}
TYPE_OF_FOLDER: dict[str, str] = {v: k for k, v in FOLDER_OF_TYPE.items()}

_FENCE = "---"
# libyaml when PyYAML has it (10x faster for imports and rebuilds), else the pure-Python safe ones.
_DUMPER: Any = getattr(yaml, "CSafeDumper", yaml.SafeDumper)
_LOADER: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_HEADING = re.compile(r"^\s{0,3}#{1,6}\s+(.+?)\s*#*\s*$")
_SLUG_DROP = re.compile(r"[^A-Za-z0-9]+")
# The front matter keys in the order they are written: the seed's first, then the envelope.
_ORDER = ("id", "timestamp", "type", "title", "tags", "brief_summary", "core_insight", "semantic_hash",
          "kind", "version", "session_id", "agent", "source_id", "repeats", "schema_version")


def _opening(text: str, chars: int = 4000) -> str:
    """The first ``chars`` characters of the body's prose, headings left out, on one line."""
    return " ".join(ln.strip() for ln in text[:chars].splitlines() if ln.strip() and not _HEADING.match(ln))


def _sentences(text: str, n: int) -> list[str]:
    return sentences(text)[:n]


def first_insight(text: str) -> str:
    """The first Markdown heading, else the first sentence, else the first non-empty line."""
    for line in text[:4000].splitlines():
        if line.strip():
            m = _HEADING.match(line)
            if m:
                return m.group(1).strip()
            break
    body = _opening(text)
    return (_sentences(body, 1) or [body])[0].strip()[:500]


def brief_summary_of(text: str, limit: int = 300) -> str:
    """The first one or two sentences of the body (headings skipped), at most ``limit`` characters."""
    body = _opening(text)
    out = " ".join(_sentences(body, 2) or [body])
    return out if len(out) <= limit else out[: limit - 1].rstrip() + "…"


def slug(title: str, limit: int = 60) -> str:
    """A file-name-safe title: ``"Refraction & light"`` -> ``"Refraction_light"``."""
    s = _SLUG_DROP.sub("_", title).strip("_")[:limit].strip("_")
    return s or "Untitled"


class JournalEntry(Record):
    """A prose record. ``text`` is the verbatim body; ``created_at`` is the seed's ``timestamp``."""

    kind: Literal["journal"] = "journal"
    type: EntryType = "journal"
    title: str = ""
    brief_summary: str = ""
    core_insight: str = ""
    source_id: str | None = None  # the id the entry had before import (a Mira uuid or hash)
    repeats: str | None = None  # an earlier entry with the same semantic hash (a recurring insight)

    @model_validator(mode="before")
    @classmethod
    def _derive(cls, data: Any) -> Any:
        if isinstance(data, dict):
            data = dict(data)
            if "timestamp" in data and "created_at" not in data:
                data["created_at"] = data.pop("timestamp")
            text = str(data.get("text") or "")
            if not text.strip():
                raise ValueError("a journal entry needs a non-empty text (its verbatim body)")
            blank = [k for k in ("core_insight", "brief_summary", "title") if not str(data.get(k) or "").strip()]
            if "core_insight" in blank:  # whitespace only is empty: derived, as on reading the file back
                data["core_insight"] = first_insight(text)
            if "brief_summary" in blank:
                data["brief_summary"] = brief_summary_of(text)
            if "title" in blank:
                data["title"] = first_insight(text)[:60]
        return data

    @field_validator("tags")
    @classmethod
    def _clean_tags(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        out = []
        for t in value:
            t = str(t).strip()
            if not t or "\n" in t or len(t) > 100:
                raise ValueError(f"tag {t!r} must be 1-100 characters on one line")
            if t not in out:
                out.append(t)
        return tuple(out)

    @field_validator("title", "brief_summary", "core_insight")
    @classmethod
    def _one_line(cls, value: str) -> str:
        return " ".join(value.split())

    def core_text(self) -> str:
        return self.core_insight or first_insight(self.text)

    @model_validator(mode="after")
    def _insight_hash(self) -> JournalEntry:
        # Always the hash of the core insight, whatever a file claims: a stale hash is not trusted.
        object.__setattr__(self, "semantic_hash", semantic_hash(self.core_text()))
        return self

    def front_matter(self) -> dict[str, Any]:
        data = self.model_dump(mode="json", exclude={"text"})
        data["timestamp"] = data.pop("created_at")
        data["tags"] = list(self.tags)
        for key in ("session_id", "agent", "source_id", "repeats"):
            if data.get(key) is None:
                data.pop(key, None)
        return {k: data[k] for k in _ORDER if k in data}


def render_markdown(entry: JournalEntry) -> bytes:
    """The file: YAML front matter between ``---`` fences, a blank line, the verbatim body."""
    head = yaml.dump(entry.front_matter(), Dumper=_DUMPER, sort_keys=False, allow_unicode=True, width=1_000_000)
    return f"{_FENCE}\n{head}{_FENCE}\n\n{entry.text}".encode()


def split_front_matter(text: str) -> tuple[dict[str, Any], str]:
    """``(front matter, body)`` of a Markdown file; a file without front matter is all body."""
    if not text.startswith(_FENCE + "\n") and not text.startswith(_FENCE + "\r\n"):
        return {}, text
    end = re.search(r"^---[ \t]*\r?$", text[4:], re.M)
    if end is None:
        return {}, text
    head = text[4: 4 + end.start()]
    body = text[4 + end.end():]
    body = body[1:] if body.startswith("\n") else body
    body = body[1:] if body.startswith("\n") else body  # the blank line after the fence
    try:
        front = yaml.load(head, Loader=_LOADER) or {}  # a safe loader (libyaml when present)
    except yaml.YAMLError as exc:
        raise InvalidInput(f"front matter is not valid YAML: {exc}", field="front matter") from exc
    if not isinstance(front, dict):
        raise InvalidInput("front matter must be a YAML mapping", field="front matter")
    return {str(k): _plain(v) for k, v in front.items()}, body


def _plain(value: Any) -> Any:
    """YAML may load timestamps and dates as objects: keep them as ISO strings."""
    if isinstance(value, datetime):
        return value.isoformat()
    if hasattr(value, "isoformat") and not isinstance(value, str):
        return value.isoformat()
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value


def parse_markdown(data: bytes, where: str = "<markdown>") -> dict[str, Any]:
    """A stored entry's bytes as a dict (front matter + ``text``); ``Corrupted`` when unreadable."""
    try:
        front, body = split_front_matter(data.decode("utf-8"))
    except (UnicodeDecodeError, InvalidInput) as exc:
        raise Corrupted(f"{where} is not a readable Markdown entry: {exc}", path=where) from exc
    if not front:
        raise Corrupted(f"{where} has no front matter", path=where)
    front["text"] = body
    if "timestamp" in front and "created_at" not in front:
        front["created_at"] = front.pop("timestamp")
    return front

