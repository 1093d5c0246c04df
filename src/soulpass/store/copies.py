"""Reading one stored copy, whatever its format: JSON records and documents, Markdown prose records."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml

from soulpass.errors import Corrupted
from soulpass.prose import JournalEntry, parse_markdown, render_markdown
from soulpass.store.fsio import dump_json, load_json

__all__ = ["COPY_SUFFIXES", "encode_copy", "load_copy", "parse_copy"]

COPY_SUFFIXES = (".json", ".md")


def parse_copy(name: str, data: bytes) -> dict[str, Any]:
    """The bytes of a file named ``name`` as a dict (a Markdown entry: front matter + ``text``)."""
    if name.endswith(".md"):
        return parse_markdown(data, name)
    try:
        raw = json.loads(data)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise Corrupted(f"{name} is not valid JSON: {exc}", path=name) from exc
    if not isinstance(raw, dict):
        raise Corrupted(f"{name} is not a JSON object", path=name)
    return raw


def load_copy(path: Path) -> dict[str, Any]:
    """``path`` read and parsed by its suffix; ``FileNotFoundError`` when absent."""
    if path.suffix == ".md":
        return parse_markdown(path.read_bytes(), str(path))
    raw: dict[str, Any] = load_json(path)
    return raw


def encode_copy(relpath: str, doc: dict[str, Any]) -> bytes:
    """The inverse of ``parse_copy``: a Markdown entry for ``.md`` paths, canonical JSON otherwise."""
    if relpath.endswith(".md"):
        if doc.get("kind") == "clipboard":  # a clipboard (soulpass.consolidation.clipboard): front matter + body
            front = {k: v for k, v in doc.items() if k != "text"}
            head = yaml.safe_dump(front, sort_keys=False, allow_unicode=True, width=1_000_000)
            return f"---\n{head}---\n\n{doc.get('text', '')}".encode()
        return render_markdown(JournalEntry.model_validate(doc))
    return dump_json(doc)
