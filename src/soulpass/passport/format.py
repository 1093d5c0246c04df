"""The passport's layout: a zip archive (readable by ``unzip``, Python's ``zipfile``, any OS), with
``MANIFEST.json`` (format version, account, head, every entry's SHA-256 and size) and
``MANIFEST.sha256`` (the manifest's digest, also the archive comment). Account files sit under
``files/`` by their store keys. Zip, not tar: its central directory lists every entry before any is
read, so names, links, duplicates and sizes are refused before a byte is decompressed."""

from __future__ import annotations

import hashlib
import json
import stat
import zipfile
from typing import Any

from soulpass.errors import Corrupted, InvalidInput

FORMAT = "soulpass-passport"
FORMAT_VERSION = 1
MANIFEST = "MANIFEST.json"
MANIFEST_DIGEST = "MANIFEST.sha256"
PREFIX = "files/"
# The carried vectors (``--vectors``), listed in the manifest's ``vectors`` (soulpass.index.carried). The
# file name is the passport format's, kept so passports already made load: it means no seed (design).
VECTORS = "vectors/seed.npz"
MAX_ENTRY_BYTES = 256 << 20  # one file of an account (CLI --max-entry-bytes, SOULPASS_PASSPORT_MAX_ENTRY)
MAX_TOTAL_BYTES = 4 << 30  # the whole account (CLI --max-total-bytes, SOULPASS_PASSPORT_MAX_TOTAL)
MAX_MANIFEST_BYTES = 64 << 20


def canonical(manifest: dict[str, Any]) -> bytes:
    return (json.dumps(manifest, indent=1, sort_keys=True) + "\n").encode("utf-8")


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def tree_digest(entries: list[dict[str, Any]]) -> str:
    """Hash of names and contents: equal for two exports of the same account state."""
    h = hashlib.sha256()
    for e in sorted(entries, key=lambda e: e["name"]):
        h.update(f"{e['name']}\0{e['sha256']}\0{e['size']}\n".encode())
    return h.hexdigest()


def check_name(name: str) -> None:
    """Refuse a member name that could land outside the account (zip slip) or is not a plain key."""
    parts = name.split("/")
    if (not name or name.startswith("/") or "\\" in name or "\0" in name or ":" in parts[0]
            or any(p in ("", ".", "..") for p in parts)):
        raise InvalidInput(f"passport entry {name!r} escapes the account or is not a plain path", entry=name)


def check_member(info: zipfile.ZipInfo, limit: int) -> None:
    check_name(info.filename)
    kind = stat.S_IFMT(info.external_attr >> 16)  # 0 when the writer set no type (Python's writestr)
    if info.is_dir() or kind not in (0, stat.S_IFREG):
        raise InvalidInput(f"passport entry {info.filename!r} is a link or not a regular file", entry=info.filename)
    if info.file_size > limit:
        raise InvalidInput(f"passport entry {info.filename!r} declares {info.file_size} bytes, over the limit "
                           f"of {limit}", entry=info.filename, size=info.file_size)


def read_limited(zf: zipfile.ZipFile, info: zipfile.ZipInfo, limit: int) -> bytes:
    """The entry's bytes, never more than ``limit`` even if the declared size lies."""
    try:
        with zf.open(info) as fh:
            data = fh.read(limit + 1)
    except (zipfile.BadZipFile, EOFError, OSError, ValueError) as exc:
        raise Corrupted(f"passport entry {info.filename!r} is truncated or damaged: {exc}",
                        entry=info.filename) from exc
    if len(data) > limit:
        raise InvalidInput(f"passport entry {info.filename!r} is over the limit of {limit} bytes",
                           entry=info.filename)
    return data
