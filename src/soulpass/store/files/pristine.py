"""What each copy in force was when it was committed, so a hand edit of a file is found and can be
committed as a version of its own with the original kept (issue 40 item 18).

Beside the account's folders, outside its plain-file form (exports, backups and PostgreSQL never
carry them, as ``log.sums``): ``copies.sums``, one line per ``core/`` file a commit wrote,
``<version> <sha256> <key>``, the last line of a key the one in force; and ``pristine/<key>``, a
hard link to the file as committed, which costs no bytes and keeps the original when an editor
saves by writing a new file and renaming it (``sed -i``, most editors). An editor that writes into
the file itself changes the link too: the edit is still found, the original is then lost (a
backup has it). Bulk versions (imports) are not noted: a million links would cost the import more
than the check is worth there.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from soulpass.store.files.copies import parse_copy
from soulpass.store.fsio import atomic_write
from soulpass.store.keys import VERSION_FILE

__all__ = ["HandEdit", "hand_edits", "note", "original", "renote"]

SUMS = "copies.sums"
PRISTINE = "pristine"


@dataclass(frozen=True)
class HandEdit:
    """A copy in force whose bytes are not those version ``version`` committed."""

    key: str
    version: int
    original_kept: bool  # ``pristine/`` still holds the bytes committed


def _digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def note(account: Path, version: int, files: Iterable[tuple[str, bytes]]) -> None:
    """Note what version ``version`` wrote (under the account lock, after the commit). Best effort:
    a file not noted is only a file whose hand edits are not found."""
    lines = []
    with contextlib.suppress(OSError):
        for key, data in files:
            if not key.startswith("core/") or key == VERSION_FILE:  # the header is rewritten by every commit
                continue
            _link(account, key)
            lines.append(f"{version} {_digest(data)} {key}\n")
        if lines:
            with (account / SUMS).open("a", encoding="utf-8") as fh:
                fh.write("".join(lines))


def _link(account: Path, key: str) -> None:
    shadow = account / PRISTINE / key
    shadow.parent.mkdir(parents=True, exist_ok=True)
    shadow.unlink(missing_ok=True)
    os.link(account / key, shadow)


def _noted(account: Path) -> dict[str, tuple[int, str]]:
    """Key -> (version, sha256) of the last commit that wrote it."""
    out: dict[str, tuple[int, str]] = {}
    try:
        raw = (account / SUMS).read_text(encoding="utf-8")
    except FileNotFoundError:
        return out
    for line in raw.splitlines():
        parts = line.split(" ", 2)
        if len(parts) == 3 and parts[0].isdigit():
            out[parts[2]] = (int(parts[0]), parts[1])
    return out


def hand_edits(account: Path) -> list[HandEdit]:
    """Every copy in force that differs from what the commit that wrote it wrote, by key. A file
    whose own version is not the noted one (a commit whose note a crash cut short) is not judged."""
    out = []
    for key, (version, digest) in sorted(_noted(account).items()):
        try:
            data = (account / key).read_bytes()
        except FileNotFoundError:  # retired or forgotten since: nothing in force to judge
            continue
        if _digest(data) == digest:
            continue
        with contextlib.suppress(Exception):
            if int(parse_copy(key, data).get("version", version)) != version:
                continue
        out.append(HandEdit(key, version, original(account, key) is not None))
    return out


def original(account: Path, key: str) -> bytes | None:
    """The bytes ``key`` was committed with, when ``pristine/`` still holds them unchanged."""
    noted = _noted(account).get(key)
    try:
        data = (account / PRISTINE / key).read_bytes()
    except FileNotFoundError:
        return None
    return data if noted is not None and _digest(data) == noted[1] else None


def renote(account: Path, keys: Iterable[str], *, forget: Iterable[str] = ()) -> None:
    """After an erasure rewrote copies: ``keys`` noted again as they are now (their own version),
    and the pristine copies of ``forget`` (names that went) removed, so nothing erased stays here."""
    with contextlib.suppress(OSError):
        noted = _noted(account)
        for key in forget:  # a prose entry's old name holds its text: neither line nor link may keep it
            (account / PRISTINE / key).unlink(missing_ok=True)
            noted.pop(key, None)
        for key in keys:
            path = account / key
            if not key.startswith("core/") or not path.exists():
                (account / PRISTINE / key).unlink(missing_ok=True)
                noted.pop(key, None)
                continue
            data = path.read_bytes()
            _link(account, key)
            noted[key] = (int(parse_copy(key, data).get("version", 0)), _digest(data))
        atomic_write(account / SUMS, "".join(f"{v} {d} {k}\n" for k, (v, d) in sorted(noted.items())).encode())
