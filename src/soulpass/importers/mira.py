"""The Mira folder format: ``memory_index.json`` plus verbatim Markdown under ``journal/``,
``experiments/``, ``reflections/`` and ``conversations/`` (seed 003).

``export_mira`` writes the index exactly in the seed's schema (``version``, ``last_updated``,
``entries`` with ``id, timestamp, type, file_path, semantic_hash, tags, brief_summary,
core_insight``); ``file_path`` is relative to the account's ``core/04_Journal`` folder, which is
laid out like a Mira folder. ``import_mira`` takes such a folder (with or without an index) into
an account as one version; a file it cannot read is reported (``ImportReport.failures``) and the
rest imported.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from soulpass.consolidation.journal import JournalPlan, plan_journal_import
from soulpass.errors import InvalidInput
from soulpass.ids import new_temp_id, utc_now
from soulpass.importers.base import Failure, failure, split
from soulpass.prose import (
    ENTRY_TYPES,
    FOLDER_OF_TYPE,
    TYPE_OF_FOLDER,
    JournalEntry,
    render_markdown,
    split_front_matter,
)
from soulpass.store.contract import Change, Snapshot
from soulpass.store.fsio import atomic_write
from soulpass.store.keys import JOURNAL_DIR

if TYPE_CHECKING:
    from soulpass.engine import Account

__all__ = ["INDEX_FILE", "MIRA_VERSION", "ImportReport", "MiraFolder", "export_mira", "import_mira", "mira_index",
           "read_mira_folder"]

INDEX_FILE = "memory_index.json"
MIRA_VERSION = "1.0"
ENTRY_KEYS = ("id", "timestamp", "type", "file_path", "semantic_hash", "tags", "brief_summary", "core_insight")
_DATE = re.compile(r"^(\d{4}-\d{2}-\d{2})[_ -]?(.*)$")
_KNOWN = frozenset({"id", "timestamp", "created_at", "type", "title", "tags", "brief_summary", "core_insight",
                    "semantic_hash", "agent", "file_path"})


@dataclass
class ImportReport:
    """What ``import_mira`` did: the version, what was stored, skipped, repeated, adjusted or
    could not be read (``failures``: the file and why)."""

    version: int | None
    files: int
    imported: list[dict[str, str]] = field(default_factory=list)  # id, path, source (file in DIR)
    duplicates: list[dict[str, Any]] = field(default_factory=list)
    repeats: list[dict[str, Any]] = field(default_factory=list)
    hash_mismatches: list[dict[str, str]] = field(default_factory=list)
    ignored_keys: dict[str, list[str]] = field(default_factory=dict)
    failures: list[Failure] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {"version": self.version, "files": self.files, "imported": len(self.imported),
                "duplicates": self.duplicates, "repeats": self.repeats, "hash_mismatches": self.hash_mismatches,
                "ignored_keys": self.ignored_keys, "failures": [f.to_json() for f in self.failures],
                "entries": self.imported}


def mira_index(account: Account, journal: list[tuple[JournalEntry, str]] | None = None) -> dict[str, Any]:
    """The account's journal (``journal``: its entries, if already read) as a ``memory_index.json``
    document (the seed's schema)."""
    entries = []
    for entry, path in account.journal().entries() if journal is None else journal:
        entries.append({
            "id": entry.id, "timestamp": entry.created_at.isoformat(), "type": entry.type,
            "file_path": path.removeprefix(JOURNAL_DIR + "/"), "semantic_hash": entry.semantic_hash,
            "tags": list(entry.tags), "brief_summary": entry.brief_summary, "core_insight": entry.core_text()})
    return {"version": MIRA_VERSION, "last_updated": utc_now().isoformat(timespec="seconds"), "entries": entries}


def export_mira(account: Account, target: str | Path, *, with_files: bool = False) -> dict[str, Any]:
    """Write ``memory_index.json`` to ``target`` (a file, or a folder to put it in); with
    ``with_files`` the Markdown files are copied beside it, making a complete Mira folder, and a
    ``target`` that does not exist (and is not named ``*.json``) is that folder, created."""
    target = Path(target)
    if with_files and not target.exists() and target.suffix != ".json":
        target.mkdir(parents=True)  # else the index would be a file named like the folder, the copies beside it
    path = target / INDEX_FILE if target.is_dir() else target
    journal = account.journal().entries()
    doc = mira_index(account, journal)
    if with_files:
        for entry, relpath in journal:
            dst = path.parent / relpath.removeprefix(JOURNAL_DIR + "/")
            dst.parent.mkdir(parents=True, exist_ok=True)
            dst.write_bytes(render_markdown(entry))  # the stored file's bytes: entries are stored rendered
    atomic_write(path, (json.dumps(doc, ensure_ascii=False, indent=2) + "\n").encode("utf-8"))
    return doc


class MiraFolder:
    """A Mira folder as an importer of ``(entry with a temporary id, file relative to the folder)``:
    metadata from front matter, else ``memory_index.json``, else derived (type from the folder,
    date and title from the file name, insight from the text). A file that cannot be read is a
    :class:`~soulpass.importers.base.Failure`; a folder that is none, holds no Markdown entries or
    has an unreadable index is refused with ``InvalidInput``."""

    def __init__(self, folder: str | Path) -> None:
        self.root = Path(folder)
        if not self.root.is_dir():
            raise InvalidInput(f"{self.root} is not a folder", path=str(self.root))
        self.index = _read_index(self.root)
        self.files = list(self._markdown_files())
        if not self.files:
            raise InvalidInput(f"{self.root} holds no Markdown entries under {', '.join(FOLDER_OF_TYPE.values())}",
                               path=str(self.root))
        self.report = ImportReport(version=None, files=len(self.files))

    def _markdown_files(self) -> Iterator[tuple[Path, str, str]]:
        for sub in FOLDER_OF_TYPE.values():
            base = self.root / sub
            if not base.is_dir():
                continue
            for dirpath, dirs, files in os.walk(base):
                dirs.sort()
                for name in sorted(files):
                    if name.endswith(".md") and not name.startswith("."):
                        file = Path(dirpath, name)
                        yield file, file.relative_to(self.root).as_posix(), TYPE_OF_FOLDER[sub]

    def items(self) -> Iterator[tuple[JournalEntry, str] | Failure]:
        for file, rel, folder_type in self.files:
            try:
                yield _entry(file, rel, folder_type, self.index.get(rel, {}), self.report), rel
            except InvalidInput as exc:
                yield failure(rel, exc)
            except OSError as exc:
                yield Failure(rel, f"{rel} cannot be read: {exc.strerror or exc}")


def read_mira_folder(folder: str | Path) -> tuple[list[tuple[JournalEntry, str]], ImportReport]:
    """Every readable Markdown entry of a Mira folder (see :class:`MiraFolder`) oldest first, and
    the report so far (files, failures, hash mismatches, ignored front-matter keys)."""
    source = MiraFolder(folder)
    out, source.report.failures = split(source.items())
    out.sort(key=lambda x: (x[0].created_at, x[1]))
    return out, source.report


def _read_index(root: Path) -> dict[str, dict[str, Any]]:
    path = root / INDEX_FILE
    if not path.exists():
        return {}
    try:
        doc = json.loads(path.read_bytes())
        entries = doc["entries"]
        return {str(e["file_path"]): dict(e) for e in entries}
    except (ValueError, KeyError, TypeError) as exc:
        raise InvalidInput(f"{path} is not a memory_index.json (version, entries[].file_path): {exc}",
                           path=str(path)) from exc


def _entry(file: Path, rel: str, folder_type: str, indexed: dict[str, Any], report: ImportReport) -> JournalEntry:
    try:
        front, body = split_front_matter(file.read_bytes().decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise InvalidInput(f"{rel} is not UTF-8 text", path=rel) from exc
    except InvalidInput as exc:
        raise InvalidInput(f"{rel}: {exc}", path=rel) from exc
    meta = {**indexed, **{k: v for k, v in front.items() if v not in (None, "")}}
    extra = sorted(k for k in front if k not in _KNOWN and k not in JournalEntry.model_fields)
    if extra:
        report.ignored_keys[rel] = extra
    m = _DATE.match(file.stem)
    when = meta.get("timestamp") or meta.get("created_at")
    if not when and m:
        when = f"{m.group(1)}T00:00:00+00:00"
    if not when:
        when = datetime.fromtimestamp(file.stat().st_mtime, UTC).isoformat()
    etype = str(meta.get("type") or folder_type)
    if etype not in ENTRY_TYPES:
        etype = folder_type
    title = meta.get("title") or ((m.group(2) if m else file.stem).replace("_", " ").strip() or file.stem)
    tags = meta.get("tags") or ()
    if isinstance(tags, str):
        tags = [t.strip() for t in tags.split(",") if t.strip()]
    tags = [str(t) for t in tags] if isinstance(tags, list | tuple) else []
    data = {"id": new_temp_id("journal"), "text": body, "type": etype, "title": str(title), "tags": tuple(tags),
            "created_at": when, "brief_summary": str(meta.get("brief_summary") or ""),
            "core_insight": str(meta.get("core_insight") or ""),
            "source_id": str(meta["id"]) if meta.get("id") else None,
            "agent": meta.get("agent") if isinstance(meta.get("agent"), str) else None}
    try:
        entry = JournalEntry.model_validate(data)
    except (ValidationError, InvalidInput) as exc:
        raise InvalidInput(f"{rel} cannot be imported: {exc}", path=rel) from exc
    claimed = meta.get("semantic_hash")
    if claimed and str(claimed) != entry.semantic_hash:
        report.hash_mismatches.append({"file": rel, "claimed": str(claimed), "computed": entry.semantic_hash})
    return entry


def import_mira(account: Account, folder: str | Path, *, dry_run: bool = False) -> ImportReport:
    """Take a Mira folder into ``account`` as one version (exact repeats skipped per the journal rule)."""
    entries, report = read_mira_folder(folder)
    source = {e.id: rel for e, rel in entries}
    plans: list[JournalPlan] = []

    def plan(head: Snapshot) -> Change:
        change, planned = plan_journal_import(head, [e for e, _ in entries], utc_now(), rule=account.sp.rules.journal)
        plans.append(planned)
        return change

    first = plan(account.store.snapshot())
    if not dry_run and plans[0].added:
        report.version = account.commit(plan, first=first)  # planned again if another commit came first
    _fill(report, plans[-1], source)
    return report


def _fill(report: ImportReport, plan: JournalPlan, source: dict[str, str]) -> None:
    report.imported = [{"id": a["id"], "path": a["path"], "source": source[a["temp_id"]]} for a in plan.added]
    by_new = {a["id"]: source[a["temp_id"]] for a in plan.added}
    report.duplicates = [{**d, "source": source.get(d["entry"], d["entry"]),
                          "duplicate_of_source": by_new.get(d["duplicate_of"])} for d in plan.duplicates]
    report.repeats = [{**r, "source": by_new.get(r["entry"])} for r in plan.repeats]
