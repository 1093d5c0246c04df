"""A bulk version's id lists, kept beside the version log instead of on its line.

A bulk append of 50,000 records (or a journal import of thousands of entries) names every id it
added; on one line of ``log/versions.jsonl`` that would make the line too long to read from the
log's tail (64 KiB). So a bulk change's ``added`` lists, and an import's ``written`` files and
``journal`` ids, go to ``log/added/<version>.json``, which the log line names as ``added_file``;
reading the log puts them back (:func:`inline`). The planners never see this: a ``Change`` carries
the whole lists.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from soulpass.store.files.commit import FileWrite
from soulpass.store.fsio import dump_json

__all__ = ["KEPT_APART", "inline", "set_apart"]

ADDED_DIR = "log/added"
# The fields of a log entry whose lists may be kept in its ``added_file``.
KEPT_APART = frozenset({"added", "written", "journal"})


def set_apart(entry: Mapping[str, Any]) -> tuple[dict[str, Any], FileWrite]:
    """The log line of a bulk version and the file that keeps its lists (``added``; for a journal
    import, which names a ``journal`` list, also the ``written`` files and the ``journal`` ids)."""
    version = int(entry["version"])
    key = f"{ADDED_DIR}/{version:08d}.json"
    line = {**entry, "added": {}, "added_file": key}
    kept: dict[str, Any] = {"version": version, "added": entry.get("added") or {}}
    if "journal" in entry:
        kept["written"], kept["journal"] = entry.get("written") or [], line.pop("journal")
        line["written"] = []
    return line, FileWrite(key, dump_json(kept))


def inline(line: dict[str, Any], kept: Mapping[str, Any]) -> dict[str, Any]:
    """``line`` with the lists its ``added_file`` (read as ``kept``) holds put back."""
    line["added"] = kept["added"]
    for key in ("written", "journal"):
        if key in kept:
            line[key] = kept[key]
    return line
