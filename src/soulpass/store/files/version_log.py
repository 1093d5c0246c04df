"""The lines of ``log/versions.jsonl``: one sealed line per version, in order.

Each line is a version's entry, sealed (:mod:`soulpass.store.sealed_lines`) with the version as its
sequence number and a checksum chained to the line before. Versions run 1, 2, 3, … with no gap, so
a line changed, lost, repeated or moved is ``Corrupted`` naming the log and the line, on its own,
without ``log.sums``. A deleted *last* line leaves nothing after it to break, so ``log.sums`` (kept
outside the log) witnesses how far the log reached: a log that ends before the last version it
covers lost its tail. Logs written before sealing still read: their lines (and a line whose seal
was stripped) are checked against ``log.sums`` where it covers them, and sealed lines follow them
from the next commit. A sealed line is not checked against ``log.sums``: its chain vouches for it,
so a damaged ``log.sums`` does not make a sound log unreadable.

This is the one reader and writer of the log's line format.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping
from pathlib import Path, PurePath
from typing import Any

from soulpass.errors import Corrupted
from soulpass.store.files.log_sums import SUMS_FILE, check_line
from soulpass.store.sealed_lines import START, ChainCheck, link_of, seal, seal_of, unsealed

__all__ = ["HISTORY_DIGESTS", "encode_entry", "encode_log", "entry_of", "read_entries", "retired_copies",
           "with_history_digests"]

HISTORY_DIGESTS = "history_sha256"

_REMEDY = "restore the account from a backup or a passport"


def encode_entry(entry: Mapping[str, Any], previous: bytes) -> bytes:
    """``entry``'s line (with its newline), sealed after the log's last line ``previous`` (b"" when
    the log is empty)."""
    body = json.dumps(entry, ensure_ascii=False, sort_keys=True).encode("utf-8")
    return seal(body, int(entry["version"]), link_of(previous) if previous.strip() else START) + b"\n"


def encode_log(entries: Iterable[Mapping[str, Any]]) -> bytes:
    """A whole log of ``entries`` (a rewrite: a forget, an export), each line sealed after the last."""
    lines, last = [], b""
    for entry in entries:
        last = encode_entry(entry, last)
        lines.append(last)
    return b"".join(lines)


def entry_of(raw: bytes, *, digests: bool = False) -> Any:
    """One line's entry, its seal taken off, and the history digests too unless ``digests`` (they
    are this backend's own check, not part of what a version says); ``ValueError`` when it is not
    JSON."""
    try:
        entry = json.loads(unsealed(raw))
    except RecursionError as exc:
        raise ValueError("nested too deeply") from exc
    if not digests and isinstance(entry, dict):
        entry.pop(HISTORY_DIGESTS, None)
    return entry


def read_entries(path: PurePath, data: bytes, sums: Mapping[int, str],
                 problems: list[Corrupted] | None = None, *, digests: bool = False) -> list[dict[str, Any]]:
    """The entries of the log ``path`` whose bytes are ``data``, every line checked: its seal and
    chain, its version (the one after the line before; 1 first), and where ``log.sums`` covers an
    unsealed line, its checksum; a log shorter than ``log.sums`` lost its last lines.

    The first problem is raised as ``Corrupted``; with ``problems`` given, every problem is added to
    it instead and reading goes on after the damaged line (an audit). ``digests``: as
    :func:`entry_of`."""
    chain = ChainCheck(path, "version log", _REMEDY)
    entries: list[dict[str, Any]] = []
    due, n = 1, 0

    def bad(exc: Corrupted) -> None:
        if problems is None:
            raise exc
        problems.append(exc)

    for n, raw in enumerate(data.splitlines(), 1):
        if not raw.strip():
            continue
        try:
            entry = _checked(chain, raw, n, due, sums, digests)
        except Corrupted as exc:
            bad(exc)
            chain.link = link_of(raw)  # go on from this line: what follows is checked on its own
            due = _version_in(raw, due) + 1
            continue
        entries.append(entry)
        due += 1
    covered = 0
    while covered + 1 in sums:  # its unbroken run from 1: a damaged log.sums (a gap) witnesses nothing past it
        covered += 1
    if covered >= due:
        bad(Corrupted(f"{path}:{n + 1} is missing: {SUMS_FILE} covers version {covered} but the log ends "
                      f"before version {due} (its last line was cut or deleted); {_REMEDY}",
                      path=str(path), line=n + 1))
    return entries


def _checked(chain: ChainCheck, raw: bytes, n: int, due: int, sums: Mapping[int, str],
             digests: bool) -> dict[str, Any]:
    path = chain.path
    try:
        entry = entry_of(chain.open(raw, n, due), digests=digests)
    except ValueError:
        raise Corrupted(f"{path}:{n} is not JSON: {_REMEDY}", path=str(path), line=n) from None
    if not isinstance(entry, dict) or type(entry.get("version")) is not int:
        raise Corrupted(f"{path}:{n} is not a version entry: {_REMEDY}", path=str(path), line=n)
    if entry["version"] != due:
        what = "repeated or moved" if entry["version"] < due else "lost"
        raise Corrupted(f"{path}:{n} holds version {entry['version']} where {due} was due (a line {what}): "
                        f"{_REMEDY}", path=str(path), line=n)
    if seal_of(raw) is None:  # a sealed line vouches for itself: log.sums only for the others
        check_line(path, n, entry["version"], raw, sums)
    return entry


def _version_in(raw: bytes, due: int) -> int:
    """The version a damaged line claims, to go on after it (``due`` when it names none)."""
    try:
        version = json.loads(unsealed(raw)).get("version")
    except (ValueError, AttributeError, RecursionError):
        return due
    return version if type(version) is int else due


def with_history_digests(entry: Mapping[str, Any], moved: Iterable[tuple[str, bytes]]) -> dict[str, Any]:
    """``entry`` with the SHA-256 of every copy its version moves under ``history/`` (``moved``:
    key and bytes), as sorted ``[key, digest]`` pairs: ``audit`` checks each history copy against it."""
    pairs = {rel: hashlib.sha256(data).hexdigest() for rel, data in moved}
    out = dict(entry)
    if pairs:
        out[HISTORY_DIGESTS] = [[rel, pairs[rel]] for rel in sorted(pairs)]
    return out


def retired_copies(account: Path, retires: Iterable[str]) -> list[tuple[str, bytes]]:
    """The files ``retires`` names in ``account`` with their bytes (those gone already left out)."""
    out = []
    for rel in retires:
        try:
            out.append((rel, (account / rel).read_bytes()))
        except FileNotFoundError:
            continue
    return out
