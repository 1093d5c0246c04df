"""The importers by source name, and :func:`import_from`, the one call behind ``soulpass
import-from``: read a source, skip what the account already holds, store the rest, report."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from soulpass.errors import InvalidInput
from soulpass.importers.basic_memory import BasicMemoryFolder, ingest_notes
from soulpass.importers.chatgpt import ChatGPTExport
from soulpass.importers.claude import ClaudeExport
from soulpass.importers.conversations import ImportSummary, Progress, ingest_conversations
from soulpass.importers.jsonl import JsonlMessages
from soulpass.importers.mem0 import Mem0Memories, ingest_records

if TYPE_CHECKING:
    from soulpass.engine import Account

__all__ = ["SOURCES", "import_from"]

# name -> (reader of the path, how its items are stored)
SOURCES: dict[str, tuple[Callable[[Path], Any], Callable[..., ImportSummary]]] = {
    "chatgpt": (ChatGPTExport, ingest_conversations),
    "claude": (ClaudeExport, ingest_conversations),
    "jsonl": (JsonlMessages, ingest_conversations),
    "mem0": (Mem0Memories, ingest_records),
    "basic-memory": (BasicMemoryFolder, ingest_notes),
}


def import_from(account: Account, source: str, path: str | Path, *, dry_run: bool = False,
                progress: Progress | None = None) -> ImportSummary:
    """Import ``path`` of the tool ``source`` (one of :data:`SOURCES`) into ``account``. What the
    account already holds (by content identity) is counted as duplicates, not stored; a bad item
    is a failure in the summary. A source that cannot be read at all raises ``InvalidInput``."""
    if source not in SOURCES:
        raise InvalidInput(f"unknown import source {source!r} (one of {', '.join(SOURCES)})", field="source")
    reader, ingest = SOURCES[source]
    items = reader(Path(path)).items()
    return ingest(account, items, ImportSummary(source, dry_run=dry_run), dry_run=dry_run, progress=progress)
