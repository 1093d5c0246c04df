"""The importers by source name, and :func:`import_from`, the one call behind ``soulpass
import SOURCE``: read a source, skip what the account already holds, store the rest, report."""

from __future__ import annotations

import tempfile
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

__all__ = ["FILE_SOURCES", "SOURCES", "import_from", "import_text"]

# name -> (reader of the path, how its items are stored)
SOURCES: dict[str, tuple[Callable[[Path], Any], Callable[..., ImportSummary]]] = {
    "chatgpt": (ChatGPTExport, ingest_conversations),
    "claude": (ClaudeExport, ingest_conversations),
    "jsonl": (JsonlMessages, ingest_conversations),
    "mem0": (Mem0Memories, ingest_records),
    "basic-memory": (BasicMemoryFolder, ingest_notes),
}
FILE_SOURCES = tuple(s for s in SOURCES if s != "basic-memory")  # one file each: importable from its text


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


def import_text(account: Account, source: str, text: str, *, dry_run: bool = False) -> ImportSummary:
    """:func:`import_from` of a file's text (what a client sends over MCP: never a path the server
    would read); ``source`` is one of :data:`FILE_SOURCES`."""
    if source not in FILE_SOURCES:
        raise InvalidInput(f"source {source!r} cannot be imported from one text (one of {', '.join(FILE_SOURCES)})",
                           field="source")
    with tempfile.TemporaryDirectory(prefix="soulpass-import-") as folder:
        path = Path(folder, "import")
        path.write_text(text, encoding="utf-8", errors="surrogatepass")
        return import_from(account, source, path, dry_run=dry_run)
