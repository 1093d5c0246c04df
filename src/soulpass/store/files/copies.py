"""Every byte the files backend stores for a record or document: JSON, Markdown entries and
clipboards, and a typed :class:`~soulpass.store.contract.Change` turned into the files it writes."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from soulpass.errors import Corrupted
from soulpass.store.contract import Change, DocumentPut
from soulpass.store.files.bulk_lists import set_apart
from soulpass.store.files.commit import Changeset, FileWrite, version_doc
from soulpass.store.files.session_log import ARCHIVED_MARKER
from soulpass.store.fsio import dump_json, load_json
from soulpass.store.keys import record_path, sandbox_dir

# Markdown (prose entries, clipboards) needs YAML and the prose models: imported where a Markdown
# copy is read or written, so a process that only searches JSON records never loads them.

__all__ = [
    "COPY_SUFFIXES",
    "encode_change",
    "encode_clipboard",
    "encode_copy",
    "encode_document",
    "load_copy",
    "parse_copy",
]

COPY_SUFFIXES = (".json", ".md")


def parse_copy(name: str, data: bytes) -> dict[str, Any]:
    """The bytes of a file named ``name`` as a dict (a Markdown entry: front matter + ``text``)."""
    if name.endswith(".md"):
        from soulpass.prose import parse_markdown

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
        from soulpass.prose import parse_markdown

        return parse_markdown(path.read_bytes(), str(path))
    raw: dict[str, Any] = load_json(path)
    return raw


def encode_clipboard(doc: Mapping[str, Any]) -> bytes:
    """A clipboard: YAML front matter (``items`` is the truth) and a Markdown body rendering them
    (the parsed ``text`` of a stored copy when there is one)."""
    import yaml

    front = {k: v for k, v in doc.items() if k != "text"}
    head = yaml.safe_dump(front, sort_keys=False, allow_unicode=True, width=1_000_000)
    if "text" in doc:
        body = str(doc["text"])
    else:
        items = "\n".join(f"- {' '.join(str(i).splitlines())}" for i in doc.get("items", ())) or "(empty)"
        body = f"# Clipboard of {doc['agent']}\n\n{items}\n"
    return f"---\n{head}---\n\n{body}".encode()


def encode_copy(relpath: str, doc: dict[str, Any]) -> bytes:
    """The inverse of ``parse_copy``: a Markdown entry for ``.md`` paths, canonical JSON otherwise."""
    if relpath.endswith(".md"):
        if doc.get("kind") == "clipboard":
            return encode_clipboard(doc)
        from soulpass.prose import JournalEntry, render_markdown

        return render_markdown(JournalEntry.model_validate(doc))
    return dump_json(doc)


def encode_document(put: DocumentPut) -> bytes:
    """A document's bytes: a prose entry as Markdown, anything else by its key's suffix."""
    from pydantic import BaseModel

    from soulpass.prose import JournalEntry, render_markdown

    if isinstance(put.body, JournalEntry):
        return render_markdown(put.body)
    if isinstance(put.body, BaseModel):
        return dump_json(put.body.model_dump(mode="json"))
    return encode_copy(put.key, dict(put.body))


def encode_change(change: Change) -> Changeset:
    """The files a change writes, in order: records, documents, a bulk version's id lists
    (``bulk_lists``), the closed sandbox's marker."""
    writes = [FileWrite(record_path(r.id), dump_json(r.model_dump(mode="json"))) for r in change.records]
    writes += [FileWrite(d.key, encode_document(d)) for d in change.documents]
    entry = dict(change.entry.fields)
    if change.bulk:  # its id lists would make one huge log line
        entry, lists = set_apart(entry)
        writes.append(lists)
    if change.closes is not None:
        marker: dict[str, object] = {"version": change.version, "archived_at": change.closes.archived_at.isoformat()}
        if change.closes.keep:  # recovery and the archive leave this sandbox in place: its history
            marker["keep"] = True
        writes.append(FileWrite(f"{sandbox_dir(change.closes.sandbox_id)}/{ARCHIVED_MARKER}", dump_json(marker)))
    return Changeset(base_version=change.parent, writes=tuple(writes), log_entry=entry,
                     version_doc=version_doc(entry), retires=change.retires, bulk=change.bulk)
