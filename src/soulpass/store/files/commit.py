"""The commit protocol (DESIGN §3): a changeset becomes version N+1 atomically.

Steps, each reported to an optional test hook by name:

1. ``txn_file``        each new file's bytes appended to the txn pack ``txn/<N+1>/pack.tmp``
2. ``txn_written``     the pack (a manifest line, then every file's bytes) fsynced
3. ``committed``       the pack renamed to ``txn/<N+1>/COMMITTED``, its folders fsynced: the
                       commit point
4. ``history_copied``  the current copy of a ``core/`` file about to be replaced (saved in the
                       pack at step 1) written under ``history/``
5. ``file_applied``    a new file written into place (temp file + rename)
6. ``retired``         a retired file moved under ``history/``
7. ``version_written`` ``core/VERSION.json`` replaced (temp + rename)
8. ``log_appended``    one line appended to ``log/versions.jsonl``
9. ``done``            everything above flushed by one ``syncfs`` (:class:`DurableBatch`), then the
                       txn folder removed

Steps 4-8 are not fsynced one by one: the pack holds all they write, so until the flush of
step 9 a power loss only means that the txn, still there, is redone. An archive costs the same
few flushes whatever it writes (ADR 0006). On open, a txn with COMMITTED is redone from step 4
(idempotently), one without is discarded.

Past step 3 the version is committed whatever happens next: a step 4-9 that fails (a full disk,
an I/O error) is tried once more at once, and when that fails too the commit still reports the
version, with what is pending (:class:`Applied`); the txn stays and recovery finishes it at the
next commit or open. A failure before step 3 leaves nothing (the txn is discarded) and is raised.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from soulpass.errors import Corrupted
from soulpass.store.contract import Hook
from soulpass.store.files.layout import LOG_FILE, history_path
from soulpass.store.files.log_sums import SUMS_FILE, cover
from soulpass.store.files.version_log import encode_entry, entry_of, retired_copies, with_history_digests
from soulpass.store.fsio import (
    DurableBatch,
    atomic_write,
    dump_json,
    fsync_dir,
    load_json,
    makedirs_durable,
    write_many_durable,
)
from soulpass.store.keys import CORE, VERSION_FILE

__all__ = ["COMMIT_STEPS", "LOG_FILE", "Applied", "Changeset", "FileWrite", "Hook", "apply_txn", "commit",
           "header_drift", "last_entry", "last_log_line", "log_tail_torn", "read_header", "recover", "repair_header",
           "repair_log_tail", "version_doc"]

COMMIT_STEPS = (
    "txn_file",
    "txn_written",
    "committed",
    "history_copied",
    "file_applied",
    "retired",
    "version_written",
    "log_appended",
    "done",
)

PACK_MAGIC = b"SOULPASS-TXN 2\n"  # the pack's first line; an older release's COMMITTED holds a version number


@dataclass(frozen=True)
class FileWrite:
    """A whole file to create or replace, path relative to the account folder."""

    relpath: str
    data: bytes


@dataclass(frozen=True)
class Changeset:
    """Everything version ``base_version + 1`` changes; produced by a pure planner."""

    base_version: int
    writes: tuple[FileWrite, ...]
    log_entry: Mapping[str, Any]
    version_doc: Mapping[str, Any]
    retires: tuple[str, ...] = ()
    bulk: bool = False  # new files may skip the txn copy (imports, benchmarks)

    @property
    def version(self) -> int:
        return self.base_version + 1


@dataclass(frozen=True)
class Applied:
    """A committed version; ``pending`` says why its files are not all in place yet (recovery
    puts them there at the next commit or open), None when they are."""

    version: int
    pending: str | None = None


@dataclass(frozen=True)
class _TxnPack:
    """A committed txn: its manifest, the new files' bytes, the replaced ``core/`` files' old bytes."""

    manifest: dict[str, Any]
    writes: list[tuple[str, bytes]]
    history: list[tuple[str, bytes]]


def _noop(step: str) -> None:
    return None


def _txn_dir(account: Path, version: int) -> Path:
    return account / "txn" / f"{version:08d}"


def commit(account: Path, cs: Changeset, hook: Hook | None = None) -> Applied:
    """Write ``cs`` as version ``cs.version``; the caller holds the account lock. An ``OSError``
    raised means nothing was committed (and nothing of it stays past the next recovery)."""
    hook = hook or _noop
    version = cs.version
    txn = _txn_dir(account, version)
    if txn.exists():  # a stale attempt: recovery (run under the lock) should have handled it
        if (txn / "COMMITTED").exists():
            raise Corrupted(f"txn {txn.name} is committed but was not recovered", path=str(txn))
        shutil.rmtree(txn)
    try:
        pack = _stage_pack(account, txn, cs, hook)
    except OSError as exc:  # before the commit point: nothing of it stays
        _discard(account, txn)
        raise OSError(exc.errno, f"{exc.strerror or exc}; version {version} was not committed and nothing of "
                                 "it was kept", exc.filename) from exc
    try:
        fsync_dir(txn)
        fsync_dir(txn.parent)
    except OSError:  # COMMITTED is in place: the flush of step 9 makes it durable with the rest
        return _finish_later(account, txn, version)
    hook("committed")
    try:
        apply_txn(account, txn, hook, pack)
    except OSError:
        return _finish_later(account, txn, version)
    return Applied(version)


def _stage_pack(account: Path, txn: Path, cs: Changeset, hook: Hook) -> _TxnPack:
    """Steps 1-3 up to the rename that commits (its folders not fsynced yet): the pack, and
    a bulk change's files put straight into place."""
    version = cs.version
    if not txn.parent.exists():
        makedirs_durable(txn.parent)
    txn.mkdir()  # its entry is fsynced with the commit point
    direct = [w for w in cs.writes if cs.bulk and not (account / w.relpath).exists()]
    direct_set = {w.relpath for w in direct}
    direct_paths = sorted(direct_set)
    if direct:
        # Bulk import writes new files straight into place, after a manifest that lets recovery
        # delete them again; they carry version N+1, so no reader sees them before the commit.
        atomic_write(txn / "manifest.json", dump_json({"version": version, "direct": direct_paths}))
        write_many_durable(account, [(account / w.relpath, w.data) for w in direct])
    staged = [(w.relpath, w.data) for w in cs.writes if w.relpath not in direct_set]
    history = [(rel, old) for rel, _data in staged if rel.startswith(CORE + "/")
               and (old := _read_or_none(account / rel)) is not None]
    manifest = {
        "version": version,
        "direct": direct_paths,
        "writes": [[rel, len(data)] for rel, data in staged],
        "history": [[rel, len(old)] for rel, old in history],
        "retires": list(cs.retires),
        "version_doc": dict(cs.version_doc),
        "log_entry": with_history_digests(cs.log_entry, [*history, *retired_copies(account, cs.retires)]),
    }
    _write_pack(txn, manifest, staged, history, hook)
    os.replace(txn / "pack.tmp", txn / "COMMITTED")
    return _TxnPack(manifest, staged, history)


def _discard(account: Path, txn: Path) -> None:
    """Undo an uncommitted txn now, best effort (recovery does it otherwise): its bulk files, its folder."""
    with contextlib.suppress(OSError, Corrupted):
        manifest = txn / "manifest.json"
        if manifest.exists():
            for rel in load_json(manifest).get("direct", []):
                (account / rel).unlink(missing_ok=True)
        shutil.rmtree(txn)


def _finish_later(account: Path, txn: Path, version: int) -> Applied:
    """A step past the commit point failed: try it once more (a passing fault), else leave the txn
    for recovery and say so."""
    try:
        apply_txn(account, txn)
    except OSError as again:
        return Applied(version, f"version {version} is committed, but putting its files in place failed "
                                f"({again.strerror or again}); recovery finishes it at the next commit or open")
    except Corrupted as again:  # the pack cannot be read back: recovery will say the same
        return Applied(version, f"version {version} is committed, but its txn pack could not be read back to "
                                f"finish it ({again}); recovery retries at the next commit or open")
    return Applied(version)  # the fault passed: everything is in place


def _read_or_none(path: Path) -> bytes | None:
    try:
        return path.read_bytes()
    except FileNotFoundError:
        return None


def _write_pack(txn: Path, manifest: dict[str, Any], staged: list[tuple[str, bytes]],
                   history: list[tuple[str, bytes]], hook: Hook) -> None:
    """``txn/pack.tmp``: the magic line, the manifest as one JSON line, then every file's bytes
    (the new files in manifest order, then the old copies), fsynced once."""
    head = PACK_MAGIC + json.dumps(manifest, ensure_ascii=False, sort_keys=True).encode("utf-8") + b"\n"
    fd = os.open(txn / "pack.tmp", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        _write_all(fd, head)
        for _rel, data in staged:
            _write_all(fd, data)
            hook("txn_file")
        for _rel, data in history:
            _write_all(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)
    hook("txn_written")


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def _read_pack(txn: Path) -> _TxnPack:
    """The committed txn's pack; an older release's txn (``manifest.json`` + ``files/``) too."""
    path = txn / "COMMITTED"
    data = path.read_bytes()
    if not data.startswith(PACK_MAGIC):
        return _read_legacy(txn)
    at = data.find(b"\n", len(PACK_MAGIC))
    try:
        manifest = json.loads(data[len(PACK_MAGIC):at])
        sizes = [int(n) for _rel, n in manifest["writes"]] + [int(n) for _rel, n in manifest["history"]]
    except (ValueError, KeyError, TypeError) as exc:
        raise Corrupted(f"{path} has no readable manifest: {exc}", path=str(path)) from exc
    at += 1
    if at <= 0 or at + sum(sizes) != len(data):
        raise Corrupted(f"{path} does not hold the bytes its manifest lists", path=str(path))
    blobs = []
    for n in sizes:
        blobs.append(data[at:at + n])
        at += n
    count = len(manifest["writes"])
    return _TxnPack(manifest, [(rel, b) for (rel, _n), b in zip(manifest["writes"], blobs[:count], strict=True)],
                    [(rel, b) for (rel, _n), b in zip(manifest["history"], blobs[count:], strict=True)])


def _read_legacy(txn: Path) -> _TxnPack:
    """A txn an older release committed: its files are under ``files/`` until moved into place, and
    a ``core/`` file's old copy is the one still in place."""
    manifest = load_json(txn / "manifest.json")
    account = txn.parent.parent
    writes, history = [], []
    for rel in manifest["writes"]:
        data = _read_or_none(txn / "files" / rel)
        if data is None:
            continue  # moved into place before a crash
        writes.append((rel, data))
        old = _read_or_none(account / rel) if rel.startswith(CORE + "/") else None
        if old is not None:
            history.append((rel, old))
    return _TxnPack(manifest, writes, history)


def apply_txn(account: Path, txn: Path, hook: Hook | None = None, pack: _TxnPack | None = None) -> None:
    """Redo a committed txn from its pack; every step is idempotent. Nothing is fsynced until
    the one flush at the end: the txn stays until then, so a power loss before it redoes it."""
    hook = hook or _noop
    pack = pack or _read_pack(txn)
    manifest = pack.manifest
    version = int(manifest["version"])
    tmp = txn / "apply.tmp"
    with DurableBatch(account) as batch:
        for rel, old in pack.history:
            hist = account / history_path(rel, version)
            if not hist.exists():
                batch.write(hist, old, temp=tmp)
                hook("history_copied")
        for rel, data in pack.writes:
            batch.write(account / rel, data, temp=tmp)
            hook("file_applied")
        for rel in manifest["retires"]:
            dst = account / rel
            if dst.exists():
                hist = account / history_path(rel, version)
                batch.makedirs(hist.parent)
                batch.replace(dst, hist)
                hook("retired")
        batch.write(account / VERSION_FILE, dump_json(manifest["version_doc"]), temp=tmp)
        hook("version_written")
        line = _append_log(account / LOG_FILE, manifest["log_entry"], version, sync=False)
        cover(account, version, line, sync=False)
        batch.touched(account / LOG_FILE)
        batch.touched(account / SUMS_FILE)
        hook("log_appended")
        batch.sync()
    _remove_finished(txn)
    hook("done")


def _remove_finished(txn: Path) -> None:
    """Rename, then delete: a kill mid-delete must never leave COMMITTED without its manifest
    (unrecoverable) nor a bulk manifest without COMMITTED (recovery would delete the records).
    The rename is made durable: a txn that came back after a power loss would be redone over
    whatever changed since (a forget)."""
    trash = txn.with_name(f".done-{txn.name}")
    if trash.exists():
        shutil.rmtree(trash)
    os.replace(txn, trash)
    fsync_dir(txn.parent)
    shutil.rmtree(trash)  # a leftover is deleted by recovery


def last_log_line(log: Path) -> bytes:
    """The last line of the version log (b"" when there is none), read from the end."""
    if not log.exists():
        return b""
    with log.open("rb") as fh:
        fh.seek(0, os.SEEK_END)
        size = fh.tell()
        window = 65536
        while True:  # widen until the window holds the whole last line (a big session's line is long)
            fh.seek(max(0, size - window))
            data = fh.read().rstrip(b"\n")
            if b"\n" in data or window >= size:
                break
            window *= 4
        return data.rsplit(b"\n", 1)[-1]


def _last_logged_version(log: Path) -> int:
    tail = last_log_line(log)
    if not tail:
        return 0
    try:
        return int(json.loads(tail)["version"])
    except (ValueError, KeyError) as exc:
        raise Corrupted(f"last line of {log} is not a version entry", path=str(log)) from exc


def _append_log(log: Path, entry: Mapping[str, Any], version: int, *, sync: bool = True) -> bytes | None:
    """Append ``version``'s line to the log, whole or not at all; the caller holds the account lock.

    A torn tail (an append cut short: the disk filled, the process died) is cut first, so the log
    always ends with a whole line; the txn that owns it stays until the append is durable, and
    recovery appends the line again. A failed or short write is cut back to the old size and
    raised: the version is reported committed only once its line is in the log. Without ``sync``
    the caller flushes the append (a commit's :class:`DurableBatch`)."""
    if not log.parent.exists():
        makedirs_durable(log.parent)
    fd = os.open(log, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        size = _cut_torn_tail(fd)
        if _last_logged_version(log) >= version:
            return None
        line = encode_entry(entry, last_log_line(log))
        try:
            written = 0
            while written < len(line):
                written += os.pwrite(fd, line[written:], size + written)
            if sync:
                os.fsync(fd)
        except OSError:
            os.ftruncate(fd, size)  # no partial line is left behind
            with contextlib.suppress(OSError):
                os.fsync(fd)
            raise
    finally:
        os.close(fd)
    if sync:
        fsync_dir(log.parent)
    return line


def log_tail_torn(account: Path) -> bool:
    """Whether the account's version log ends in a torn line (one byte read)."""
    try:
        fd = os.open(account / LOG_FILE, os.O_RDONLY)
    except FileNotFoundError:
        return False
    try:
        size = os.fstat(fd).st_size
        return size > 0 and os.pread(fd, 1, size - 1) != b"\n"
    finally:
        os.close(fd)


def repair_log_tail(account: Path) -> list[str]:
    """Cut a torn last line of the version log; the caller holds the account lock and no txn is
    pending (recovery ran first, so a txn's own line has been appended again by then).

    A torn line with no txn behind it was its version's only record in the log (an older release
    removed the txn after a short append): when ``VERSION.json`` is ahead of the log, a line is
    re-derived from its header, marked ``rederived`` (its id lists are lost; the catalog finds
    that version's records on ``soulpass index rebuild``)."""
    if not log_tail_torn(account):
        return []
    log = account / LOG_FILE
    fd = os.open(log, os.O_RDWR)
    try:
        _cut_torn_tail(fd)
    finally:
        os.close(fd)
    done = [f"cut a torn line at the end of {LOG_FILE}"]
    head = account / VERSION_FILE
    doc = load_json(head) if head.exists() else None
    if doc is not None and int(doc["version"]) > _last_logged_version(log):
        entry = {**doc, "rederived": f"its log line was torn; rebuilt from {VERSION_FILE} (id lists lost)"}
        _append_log(log, entry, int(doc["version"]))
        done.append(f"re-derived version {doc['version']} from {VERSION_FILE}")
    cover(account, _last_logged_version(log))  # the cut or re-derived lines' checksums, from the log as it is
    return done


def version_doc(entry: Mapping[str, Any]) -> dict[str, Any]:
    """``core/VERSION.json`` of the version a log entry describes."""
    doc = {"version": entry["version"], "parent": entry["parent"], "timestamp": entry["timestamp"],
           "source_sandbox": entry.get("source_sandbox"), "counts": entry.get("counts", {})}
    if "rolled_back_to" in entry:
        doc["rolled_back_to"] = entry["rolled_back_to"]
    return doc


def read_header(account: Path) -> dict[str, Any]:
    """``core/VERSION.json`` (version 0's header when there is none); ``Corrupted`` when it is not
    a header (not JSON, no integer version)."""
    path = account / VERSION_FILE
    if not path.exists():
        return {"version": 0, "parent": None, "counts": {}}
    doc = load_json(path)
    if not isinstance(doc, dict) or type(doc.get("version")) is not int:
        raise Corrupted(f"{path} is not a version header", path=str(path))
    return doc


def last_entry(account: Path) -> dict[str, Any] | None:
    """The last line of the version log, parsed; None when there is none or it is not an entry."""
    try:
        entry = entry_of(last_log_line(account / LOG_FILE) or b"null")
    except ValueError:
        return None
    return entry if isinstance(entry, dict) and type(entry.get("version")) is int else None


def header_drift(account: Path) -> str | None:
    """What is wrong with ``VERSION.json`` as the log tells it (None: it agrees with the log's last
    entry, or there is no log to tell). The log is the record of what was committed; the header
    is derived from its last line (a fast read of HEAD)."""
    entry = last_entry(account)
    try:
        doc = read_header(account)
    except Corrupted:
        return "damaged" if entry is not None else None  # nothing to rebuild it from: readers say what is wrong
    if entry is None or doc["version"] == entry["version"]:
        return None
    if not (account / VERSION_FILE).exists():
        return "missing"
    if doc["version"] > entry["version"] and _stamped_after(account, entry["version"]):
        return None  # the log lost its last lines, not the header: commits refuse it (never a gap, never a rewind)
    return f"it said version {doc['version']}"


_FRONT_MATTER_VERSION = re.compile(rb"^version: ?(\d+)$", re.M)


def _stamped_after(account: Path, version: int) -> bool:
    """Whether a copy in ``core/`` says it was written after ``version`` (read only when the header
    is ahead of the log: a lost log line, or a header that is wrong)."""
    for folder, _dirs, files in os.walk(account / CORE):
        for name in files:
            path = Path(folder) / name
            with contextlib.suppress(OSError, ValueError):
                if name.endswith(".md"):
                    found = _FRONT_MATTER_VERSION.search(path.read_bytes())
                    stamp = int(found.group(1)) if found else 0
                elif name.endswith(".json") and path != account / VERSION_FILE:
                    body = json.loads(path.read_bytes())
                    stamp = body.get("version", 0) if isinstance(body, dict) else 0
                else:
                    continue
                if type(stamp) is int and stamp > version:
                    return True
    return False


def repair_header(account: Path) -> list[str]:
    """Rewrite a missing, damaged or wrong ``VERSION.json`` from the log's last entry (the caller
    holds the account lock and recovery ran first, so the log holds HEAD's line): HEAD is never
    taken from a lost header as version 0, and no id is issued twice."""
    why = header_drift(account)
    entry = last_entry(account)
    if why is None or entry is None:
        return []
    atomic_write(account / VERSION_FILE, dump_json(version_doc(entry)))
    return [f"rebuilt {VERSION_FILE} ({why}) from version {entry['version']} of the log"]


def _cut_torn_tail(fd: int) -> int:
    """Cut the log open on ``fd`` after its last newline (a torn append); its size afterwards."""
    size = os.fstat(fd).st_size
    if size == 0 or os.pread(fd, 1, size - 1) == b"\n":
        return size
    end, step = size, 65536
    while end > 0:
        start = max(0, end - step)
        at = os.pread(fd, end - start, start).rfind(b"\n")
        if at != -1:
            whole = start + at + 1
            break
        end = start
    else:
        whole = 0
    os.ftruncate(fd, whole)
    os.fsync(fd)
    return whole


def recover(account: Path, hook: Hook | None = None) -> list[str]:
    """Finish committed txns, discard uncommitted ones; the caller holds the account lock."""
    done: list[str] = []
    txn_root = account / "txn"
    if not txn_root.exists():
        return done
    for txn in sorted(p for p in txn_root.iterdir() if p.is_dir()):
        if txn.name.startswith(".done-"):  # finished; its removal was interrupted
            shutil.rmtree(txn)
            continue
        if (txn / "COMMITTED").exists():
            apply_txn(account, txn, hook)
            done.append(f"redone {txn.name}")
            continue
        manifest_path = txn / "manifest.json"
        if manifest_path.exists():
            manifest = load_json(manifest_path)
            for rel in manifest.get("direct", []):
                (account / rel).unlink(missing_ok=True)
        shutil.rmtree(txn)
        done.append(f"discarded {txn.name}")
    for stray in txn_root.iterdir():  # temp files of an interrupted atomic write
        if stray.is_file():
            stray.unlink()
    fsync_dir(txn_root)
    tmp = account / "core" / ".VERSION.json.tmp"
    tmp.unlink(missing_ok=True)
    return done
