"""A Basic Memory project folder: Markdown notes with YAML front matter, observations and relations.

A note is ``title``, ``type`` (default ``note``), ``tags`` (a list or a comma-separated string)
and ``permalink`` in front matter (all optional: the title defaults to the file's name, the
permalink to its path), then free Markdown in which observations (``- [category] text #tag
(context)``) and relations (``- relation_type [[Target]] (context)``) are found by their syntax
anywhere (the ``## Observations`` and ``## Relations`` headings are conventional only).

A note becomes a **journal entry** (a prose record) with its body verbatim, observations
included, its title and tags, the tags ``source:basic-memory`` and ``bm-type:<type>``, and the
file's modification time. An explicit relation is subject, predicate and object: it becomes a
fact ``(note title, relation_type, Target)``; inline ``[[links]]`` in prose are not relations and
stay text. Notes and relations go into one sandbox, archived as one version; a fact already in
the account is a duplicate by the fact rules (same subject, predicate and object).
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

from soulpass.consolidation.outcomes import Committed, Planned, Unchanged
from soulpass.errors import InvalidInput
from soulpass.importers.base import Failure, failure
from soulpass.importers.conversations import ImportSummary, Progress, identity_tag, known_tags
from soulpass.prose import split_front_matter

if TYPE_CHECKING:
    from soulpass.engine import Account

__all__ = ["SOURCE", "BasicMemoryFolder", "Note", "ingest_notes"]

SOURCE = "basic-memory"
_RELATION = re.compile(r"^\s*[-*]\s+([A-Za-z_][\w -]*?)\s+\[\[([^\]\n]+)\]\]", re.M)


@dataclass(frozen=True)
class Note:
    """One note: where it is, what it says, and its relations ``(predicate, target)``."""

    path: str
    title: str
    text: str
    when: datetime
    tags: tuple[str, ...]
    relations: tuple[tuple[str, str], ...]


class BasicMemoryFolder:
    """A Basic Memory folder as an importer of :class:`Note` s; a file that cannot be read is a
    :class:`Failure`. A path that is not a folder, or holds no Markdown, is refused."""

    def __init__(self, folder: str | Path) -> None:
        self.root = Path(folder)
        if not self.root.is_dir():
            raise InvalidInput(f"{self.root} is not a folder", path=str(self.root))
        self.files = sorted(self._markdown())
        if not self.files:
            raise InvalidInput(f"{self.root} holds no Markdown notes", path=str(self.root))

    def _markdown(self) -> Iterator[Path]:
        for dirpath, dirs, files in os.walk(self.root):
            dirs[:] = [d for d in dirs if not d.startswith(".")]  # .basic-memory, .git, .obsidian
            yield from (Path(dirpath, f) for f in files if f.endswith(".md") and not f.startswith("."))

    def items(self) -> Iterator[Note | Failure]:
        for file in self.files:
            rel = file.relative_to(self.root).as_posix()
            try:
                yield _note(file, rel)
            except InvalidInput as exc:
                yield failure(rel, exc)
            except OSError as exc:
                yield Failure(rel, f"cannot be read: {exc.strerror or exc}")


def _note(file: Path, rel: str) -> Note:
    try:
        front, body = split_front_matter(file.read_bytes().decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise InvalidInput(f"{rel} is not UTF-8 text", path=rel) from exc
    if not body.strip():
        raise InvalidInput(f"{rel} has no text", path=rel)
    title = " ".join(str(front.get("title") or file.stem).split())
    raw_tags = front.get("tags") or []
    if isinstance(raw_tags, str):
        raw_tags = raw_tags.split(",")
    tags = [str(t).strip().lstrip("#") for t in raw_tags if str(t).strip()] if isinstance(raw_tags, list) else []
    tags += [f"source:{SOURCE}", f"bm-type:{front.get('type') or 'note'}"]
    permalink = str(front.get("permalink") or rel.removesuffix(".md"))
    tags.insert(0, identity_tag(SOURCE, permalink, body))
    relations = tuple((p.strip(), t.split("|")[0].strip()) for p, t in _RELATION.findall(body))
    when = datetime.fromtimestamp(file.stat().st_mtime, UTC)
    return Note(rel, title, body, when, tuple(t[:100] for t in dict.fromkeys(tags)), relations)


def ingest_notes(account: Account, items: Iterator[Note | Failure], summary: ImportSummary, *,
                 dry_run: bool = False, progress: Progress | None = None) -> ImportSummary:
    """New notes as journal entries and all relations as facts, in one sandbox archived as one
    version; notes already in the account (by identity tag) are duplicates."""
    notes: list[Note] = []
    for item in items:
        if isinstance(item, Failure):
            summary.failures.append(item)
        else:
            notes.append(item)
    seen = known_tags(account, (n.tags[0] for n in notes))
    sandbox = account.create_sandbox(f"{SOURCE}: import")
    for done, note in enumerate(notes, 1):
        if note.tags[0] in seen:
            summary.skip("journal", note.tags[0], seen)
        else:
            seen.add(note.tags[0])
            try:
                sandbox.add_journal(note.text, title=note.title, tags=note.tags, timestamp=note.when)
            except InvalidInput as exc:
                summary.failures.append(failure(note.path, exc))
        for predicate, target in note.relations:
            try:
                sandbox.add_fact(note.title, predicate, target, confidence=1.0)
            except InvalidInput as exc:
                summary.failures.append(failure(f"{note.path}: {predicate} [[{target}]]", exc))
        if progress is not None:
            progress(done, len(notes))
    _count(sandbox.archive(dry_run=dry_run), summary)
    if dry_run:
        sandbox.discard()
    return summary


def _count(result: object, summary: ImportSummary) -> None:
    match result:
        case Committed(version=version, plan=plan):
            summary.versions.append(version)
        case Planned(plan=plan) | Unchanged(plan=plan):
            pass
        case _:
            return
    summary.imported["journal"] += len(plan.journal)
    summary.imported["fact"] += len(plan.added.get("fact", []))
    summary.duplicates["fact"] += sum("candidate" in d for d in plan.duplicates)
    summary.duplicates["journal"] += sum("entry" in d for d in plan.duplicates)
    summary.failures += [Failure(str(r.get("candidate")), str(r.get("why"))) for r in plan.rejected]
