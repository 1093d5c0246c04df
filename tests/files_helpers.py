"""Where the files backend keeps a sandbox: for tests that look at (or damage) its files."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from soulpass.store.files.session_log import FileSessionLog
from soulpass.store.keys import BUFFER_FILE, sandbox_dir


def sandbox_folder(sb: Any) -> Path:
    """The folder of sandbox ``sb`` (a ``soulpass.Sandbox``) in the files backend."""
    return Path(sb.account.store.path) / sandbox_dir(sb.id)


def buffer_file(sb: Any) -> Path:
    return sandbox_folder(sb) / BUFFER_FILE


def buffer_log(folder: Path) -> FileSessionLog:
    """The session log of a sandbox folder (possibly a renamed one), read directly."""
    return FileSessionLog(folder)
