"""Which tags each record of a files account carries, kept by the commits: what
``FilesSnapshot.tags_carried`` (an importer's "already imported?") reads instead of every record.

Beside the account's folders, outside its plain-file form (exports, backups and PostgreSQL never
carry it, as ``copies.sums``): ``record_tags.jsonl``. Its first line, written when it is (re)built
under the account lock, gives the tags of every record copy in force at that version; each later
line those of the records its version wrote and the records it retired:
``{"version": N, "keys": {key: [tag, ...]}, "retired": [key, ...]}``. Replaying the lines up to a
version gives the records in force then and their tags, as their copies say.

A note of the store, made after a commit's files are in place (not a step of the commit): a crash
that loses the line leaves the file behind HEAD, and the next commit rebuilds it from the files,
under the lock, before it commits (as it does when the file is missing, or its end torn). A lookup
it does not reach (an older version than its first line, a HEAD it is behind) reads every record,
as one does that finds a damaged line (and deletes the file, for the next commit to rebuild). A
hand edit counts once committed (``adopt``). A forget deletes the file (its tags may name what was
forgotten).
"""

from __future__ import annotations

import json
import logging
import os
import re
from collections.abc import Collection, Iterable, Iterator
from pathlib import Path

from soulpass.errors import Corrupted
from soulpass.store.files.copies import COPY_SUFFIXES, parse_copy
from soulpass.store.fsio import atomic_write
from soulpass.store.keys import RECORD_DIRS

log = logging.getLogger(__name__)

__all__ = ["TAGS_FILE", "drop", "note", "repair", "tags_carried"]

TAGS_FILE = "record_tags.jsonl"
_FOLDERS = tuple(dict.fromkeys(RECORD_DIRS.values()))
_VERSION = re.compile(rb'\{"version": (\d+),')  # a line's start, as _line writes it


def _is_record(key: str) -> bool:
    return key.startswith(tuple(f"{folder}/" for folder in _FOLDERS)) and key.endswith(COPY_SUFFIXES)


def _tags_by_key(copies: Iterable[tuple[str, bytes]]) -> dict[str, list[str]]:
    """key -> tags of the record copies among ``copies`` (key, bytes); an unreadable copy carries
    none (a lookup leaves it out)."""
    out: dict[str, list[str]] = {}
    for key, data in copies:
        if not _is_record(key):
            continue
        try:
            tags = parse_copy(key, data).get("tags") if b'"tags"' in data else None
        except Corrupted:
            tags = None
        out[key] = list(dict.fromkeys(t for t in tags if isinstance(t, str))) if isinstance(tags, list) else []
    return out


def _line(version: int, keys: dict[str, list[str]], retired: Iterable[str] = ()) -> bytes:
    body = {"version": version, "keys": keys, "retired": [k for k in retired if _is_record(k)]}
    return json.dumps(body, ensure_ascii=False).encode("utf-8") + b"\n"


def _last_version(path: Path) -> int | None:
    """The version of the file's last line; None when there is no file or its end is torn."""
    try:
        with path.open("rb") as fh:
            size = fh.seek(0, os.SEEK_END)
            if size == 0:
                return None
            fh.seek(size - 1)
            if fh.read(1) != b"\n":
                return None
            window = 4096
            while True:  # widen until the window holds the last line's start
                fh.seek(max(0, size - 1 - window))
                data = fh.read(min(window, size - 1))
                if b"\n" in data or window >= size - 1:
                    break
                window *= 16
    except FileNotFoundError:
        return None
    found = _VERSION.match(data.rsplit(b"\n", 1)[-1])
    return int(found[1]) if found else None


def note(account: Path, version: int, writes: Iterable[tuple[str, bytes]], retires: Iterable[str]) -> None:
    """Version ``version``'s line, once its files are in place (under the account lock), when the
    file ends at the version before; otherwise the next commit rebuilds it. Best effort: the
    version is committed whatever happens here."""
    path = account / TAGS_FILE
    if _last_version(path) != version - 1:
        return
    line = _line(version, _tags_by_key(writes), retires)
    try:  # never created here: a first line must be a rebuild's, with every record in force
        fd = os.open(path, os.O_WRONLY | os.O_APPEND)
    except FileNotFoundError:  # deleted since (a reader found it damaged)
        return
    try:
        os.write(fd, line)
    except OSError as exc:  # a short line is a torn end: the next commit rebuilds
        log.warning("%s: version %d's line not written (%s); the next commit rebuilds it", path, version, exc)
    finally:
        os.close(fd)


def repair(account: Path, head: int) -> None:
    """Under the account lock, before a commit: the file rebuilt from the record copies in force
    when it does not end at ``head`` (missing, torn, behind after a crash)."""
    path = account / TAGS_FILE
    if _last_version(path) != head:
        atomic_write(path, _line(head, _tags_by_key(_copies_in_force(account))))


def drop(account: Path) -> None:
    """Delete the file (a forget: its tags may name what was forgotten); the next commit rebuilds it."""
    (account / TAGS_FILE).unlink(missing_ok=True)


def _copies_in_force(account: Path) -> Iterator[tuple[str, bytes]]:
    """(key, bytes) of every record copy in the record folders (HEAD's, under the lock)."""
    root = str(account)
    for folder in _FOLDERS:
        for dirpath, _dirs, files in os.walk(os.path.join(root, folder)):
            for name in files:
                if name.endswith(COPY_SUFFIXES) and not name.startswith("."):
                    path = os.path.join(dirpath, name)
                    with open(path, "rb") as f:
                        yield os.path.relpath(path, root).replace(os.sep, "/"), f.read()


def tags_carried(account: Path, tags: Collection[str], at: int) -> frozenset[str] | None:
    """Which of ``tags`` a record in force at version ``at`` carries; None when the file does not
    reach ``at`` or a line cannot be read (the caller reads every record then)."""
    path = account / TAGS_FILE
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return None
    in_force: dict[str, list[str]] = {}
    last: int | None = None
    for n, raw in enumerate(data.split(b"\n")[:-1], 1):  # a torn last line (no newline) is left out
        try:
            line = json.loads(raw)
            version = int(line["version"])
            if last is not None and version != last + 1:
                raise ValueError(f"version {version} follows {last}")
            if version > at:
                break
            in_force.update(line["keys"])
            for key in line["retired"]:
                in_force.pop(key, None)
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            log.warning("%s line %d cannot be read (%s): the lookup reads every record; the next commit "
                        "rebuilds it", path, n, exc)
            drop(account)
            return None
        last = version
    if last is None or last < at:  # first line past ``at``, or behind it
        return None
    return frozenset(t for carried in in_force.values() for t in carried if t in tags)
