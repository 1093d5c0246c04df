"""Test support: a hash of what is stored under an account, to prove nothing changed."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

ALL_PARTS = ("core", "log", "history", "sandboxes")


def digest(root: Path, parts: tuple[str, ...] = ALL_PARTS) -> str:
    """Hash of the names and contents of everything under ``root/<part>`` (lock files aside)."""
    h = hashlib.sha256()
    for part in parts:
        base = root / part
        h.update(part.encode() + (b" present" if base.exists() else b" absent"))
        if base.is_file():
            h.update(base.read_bytes())
        elif base.is_dir():
            for p in sorted(base.rglob("*")):
                if p.name.endswith(".lock"):
                    continue
                h.update(os.fsencode(p.relative_to(root).as_posix()) + b"\0")
                if p.is_file():
                    h.update(p.read_bytes() + b"\0")
    return h.hexdigest()
