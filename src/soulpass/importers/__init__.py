"""Importers: memories from other formats taken into an account. Each yields items and reports the
ones it cannot take (:class:`~soulpass.importers.base.Failure`) instead of stopping: ``mira`` (a Mira
folder of Markdown entries), ``locomo`` (conversations in the LoCoMo layout, BEAM included), and,
through :func:`~soulpass.importers.sources.import_from`, ``chatgpt`` and ``claude`` (data exports),
``jsonl`` (a generic JSONL of messages), ``mem0`` (``get_all`` JSON) and ``basic-memory`` (a folder)."""

from soulpass.importers.base import Failure, Importer, failure, split
from soulpass.importers.conversations import ImportSummary
from soulpass.importers.sources import FILE_SOURCES, SOURCES, import_from, import_text

__all__ = ["FILE_SOURCES", "SOURCES", "Failure", "ImportSummary", "Importer", "failure", "import_from", "import_text",
           "split"]
