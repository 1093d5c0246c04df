"""Where the files backend keeps what only it has (DESIGN §2): history copies and the version log.

Document and record keys (``store.keys``) are paths under the account folder already.
"""

from __future__ import annotations

from pathlib import PurePosixPath

from soulpass.store.keys import CORE

__all__ = ["HISTORY", "INDEX", "LOG_FILE", "history_dir", "history_path"]

HISTORY = "history"
INDEX = "index"  # derived indexes (catalog, vectors): rebuildable, never the truth
LOG_FILE = "log/versions.jsonl"


def history_dir(relpath: str) -> str:
    """``core/05_Core_Memory/Core_memory.json`` -> ``history/05_Core_Memory/Core_memory``."""
    p = PurePosixPath(relpath)
    if p.parts[0] != CORE:
        raise ValueError(f"only files under core/ have history: {relpath}")
    return str(PurePosixPath(HISTORY, *p.parts[1:-1], p.stem))


def history_path(relpath: str, retired_by: int) -> str:
    """The copy of ``relpath`` that version ``retired_by`` replaced or retired (same suffix)."""
    suffix = ".md" if relpath.endswith(".md") else ".json"
    return f"{history_dir(relpath)}/{retired_by:08d}{suffix}"
