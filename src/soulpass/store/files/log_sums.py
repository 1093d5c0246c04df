"""Checksums of the version log's lines, so a line damaged on disk is an error naming it even when
it still parses (a flipped digit in a version entry).

``log.sums`` sits beside the account's folders, outside its plain-file form (``core/``,
``history/``, ``log/``): exports, backups and PostgreSQL carry the log alone, byte for byte as
before. One line per version, ``<version> <crc32 of its log line>``, appended after that line is
durable, under the account lock. A version not covered yet (a crash between the two writes, a log
restored from a passport or a backup, a home from an earlier release) is covered at the next
commit; until then its line is read unchecked, as every line was before.
"""

from __future__ import annotations

import contextlib
import os
import re
import zlib
from collections.abc import Mapping
from pathlib import Path, PurePath

from soulpass.errors import Corrupted
from soulpass.store.files.layout import LOG_FILE
from soulpass.store.fsio import atomic_write

__all__ = ["SUMS_FILE", "check_line", "cover", "read_sums", "rewrite_sums"]

SUMS_FILE = "log.sums"
_HEX = re.compile(rb"[0-9a-f]{8}")


def line_crc(line: bytes) -> str:
    return format(zlib.crc32(line.rstrip(b"\n")), "08x")


def read_sums(account: Path) -> dict[int, str]:
    """Version -> checksum of its log line ({} when there are none yet)."""
    try:
        data = (account / SUMS_FILE).read_bytes()
    except FileNotFoundError:
        return {}
    sums: dict[int, str] = {}
    for raw in data.split(b"\n")[:-1]:  # whole lines only: a write cut short covers nothing
        parts = raw.split()
        if len(parts) == 2 and parts[0].isdigit() and _HEX.fullmatch(parts[1]):
            sums[int(parts[0])] = parts[1].decode("ascii")
    return sums


def check_line(path: PurePath, n: int, version: int, raw: bytes, sums: Mapping[int, str]) -> None:
    """``Corrupted`` naming ``path:n`` when the line of ``version`` does not match its checksum."""
    want = sums.get(version)
    if want is not None and line_crc(raw) != want:
        raise Corrupted(f"{path}:{n} is damaged: version {version}'s entry does not match its checksum in "
                        f"{SUMS_FILE}; restore the account from a backup or a passport", path=str(path), line=n)


def _logged(account: Path) -> list[tuple[int, bytes]]:
    import json

    out = []
    for raw in (account / LOG_FILE).read_bytes().splitlines():
        if raw.strip():
            with contextlib.suppress(ValueError, KeyError, TypeError):
                out.append((int(json.loads(raw)["version"]), raw))
    return out


def cover(account: Path, version: int, line: bytes | None = None, *, sync: bool = True) -> None:
    """Note the checksum of ``version``'s log line (``line``, else read from the log), covering any
    version before it not covered yet; the caller holds the account lock. Best effort: the version
    is committed already, so a failure here is left for the next commit to finish. Without
    ``sync`` the caller flushes the append."""
    with contextlib.suppress(OSError, Corrupted):
        if line is None or max(read_sums(account), default=0) != version - 1:
            rewrite_sums(account)  # a gap, or sums of lines a repair replaced: all again, from the log
            return
        fd = os.open(account / SUMS_FILE, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            data = memoryview(b"%d %s\n" % (version, line_crc(line).encode()))
            while data:
                data = data[os.write(fd, data):]
            if sync:
                os.fsync(fd)
        finally:
            os.close(fd)


def rewrite_sums(account: Path) -> None:
    """The checksums of every log line again (after the log was rewritten whole: a forget)."""
    lines = _logged(account)
    atomic_write(account / SUMS_FILE, b"".join(b"%d %s\n" % (v, line_crc(raw).encode()) for v, raw in lines))
