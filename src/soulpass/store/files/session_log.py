"""A sandbox's session buffer on disk: ``sandboxes/<id>/session_buffer.jsonl``, one event a line.

Writers in several processes append under an ``flock`` with a single ``write`` per batch, so lines
are always whole. A torn last line (a crash mid-write: no newline at its end) is skipped when
reading and cut by the next append, never glued to the next event. Each line is sealed
(:mod:`soulpass.store.sealed_lines`): it carries its sequence number and a checksum chained to the
line before, so a line damaged, lost, repeated, moved or stripped of its seal is an error naming the
file and line (``Corrupted``), never a turn silently lost at archive. Lines written by earlier
releases (a CRC-32 of the line alone, ``,"crc":"…"}``, or nothing) still read, and a sandbox begun
by one goes on sealed. A deleted or cut *last* line leaves nothing after it to break, so
``.buffer.seq`` beside the buffer notes how many lines were acknowledged (written after they are
durable, never fsynced: it can lag the buffer, never lead it); a buffer with fewer whole lines is
``Corrupted`` too, and refuses appends, rather than taken as a torn append. This is the one JSONL
reader of session buffers.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import re
import shutil
import uuid
import zlib
from collections.abc import Callable, Iterator, Sequence
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from soulpass.errors import BackendUnavailable, Conflict, Corrupted, InvalidInput
from soulpass.ids import utc_now
from soulpass.store.contract import PendingEvent
from soulpass.store.fsio import fsync_dir, load_json, resource_lock
from soulpass.store.keys import BUFFER_FILE
from soulpass.store.sealed_lines import START, ChainCheck, link_of, seal, seal_of

if TYPE_CHECKING:  # the event model loads when a buffer is written or read, not when an account opens
    from soulpass.records import BufferEvent

__all__ = [
    "ARCHIVED_MARKER",
    "SANDBOXES",
    "FileSessionLog",
    "SessionLogTail",
    "archived_marker",
    "remove_folder",
    "sweep_finished",
]

SANDBOXES = "sandboxes"
ARCHIVED_MARKER = "ARCHIVED.json"
DEFAULT_MAX_EVENT_BYTES = 4 * 1024 * 1024


def _no_check(_event: PendingEvent) -> None:
    return None


class FileSessionLog:
    """The buffer file of the sandbox folder ``folder`` and the lock that guards it.

    ``check`` refuses an event before it is encoded (the caller's input limits); an encoded event
    over ``max_event_bytes`` is refused too. Implements :class:`soulpass.store.contract.SessionLog`.
    """

    def __init__(self, folder: Path, *, max_event_bytes: int = DEFAULT_MAX_EVENT_BYTES,
                 check: Callable[[PendingEvent], None] = _no_check) -> None:
        self.folder = folder
        self.path = folder / BUFFER_FILE
        self.max_event_bytes = max_event_bytes
        self._check = check

    def exclusive(self) -> contextlib.AbstractContextManager[None]:
        """Held by every append and for the whole of an archive or discard."""
        return self.section("buffer")

    @contextlib.contextmanager
    def section(self, name: str, *, blocking: bool = True) -> Iterator[None]:
        """An exclusive section of this sandbox across processes, named ``name`` (``"buffer"`` is
        the appends' lock; another name, e.g. ``"agent"``, is one appends never take). Refused
        with ``Conflict`` once the sandbox is gone. The process's one lock on it
        (:func:`~soulpass.store.fsio.resource_lock`): the thread that holds it enters again. Not
        ``blocking``: ``BlockingIOError`` at once when somebody else holds it."""
        with contextlib.ExitStack() as stack:
            try:
                stack.enter_context(resource_lock(self.folder / f".{name}.lock", create_parent=False,
                                                  blocking=blocking))
            except FileNotFoundError:
                raise Conflict(f"sandbox {self.folder.name} no longer exists",
                               sandbox_id=self.folder.name) from None
            yield

    def tail(self) -> SessionLogTail:
        """A reader of this buffer that parses only what was appended since its last read."""
        return SessionLogTail(self.path)

    def append_many(self, events: Sequence[PendingEvent], at: datetime | None = None) -> list[BufferEvent]:
        """Append several events all-or-nothing: every one is checked and encoded before one write."""
        from pydantic import ValidationError

        from soulpass.records import BufferEvent

        out, lines = [], []
        for pending in events:
            self._check(pending)
            try:
                event = BufferEvent(event_id=uuid.uuid4().hex, type=pending.type, at=at or utc_now(),
                                    agent=pending.agent, data=dict(pending.data))
            except ValidationError as exc:
                raise InvalidInput(f"invalid buffer event: {exc}") from exc
            try:
                raw = json.dumps(event.model_dump(mode="json"), ensure_ascii=False, allow_nan=False).encode()
            except (ValueError, UnicodeError, RecursionError) as exc:
                raise InvalidInput(f"{pending.type} event cannot be stored as JSON: {exc}") from exc
            if len(raw) + _SEAL_BYTES > self.max_event_bytes:
                raise InvalidInput(f"{pending.type} event is {len(raw) + _SEAL_BYTES} bytes "
                                   f"(limit {self.max_event_bytes})", field="data")
            out.append(event)
            lines.append(raw)
        self._write(lines)
        return out

    def _write(self, lines: list[bytes]) -> None:
        """Seal ``lines`` after the buffer's last line and append them with one write, under the lock."""
        with self.exclusive():
            if not (self.folder / "metadata.json").exists():
                raise Conflict(f"sandbox {self.folder.name} no longer exists", sandbox_id=self.folder.name)
            if (self.folder / ARCHIVED_MARKER).exists():
                raise Conflict(f"sandbox {self.folder.name} is already archived",
                               sandbox_id=self.folder.name)
            try:
                fd = os.open(self.path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o644)
            except FileNotFoundError:
                raise Conflict(f"sandbox {self.folder.name} no longer exists",
                               sandbox_id=self.folder.name) from None
            try:
                size = os.fstat(fd).st_size
                torn = bool(size) and os.pread(fd, 1, size - 1) != b"\n"  # an append that never returned
                whole = _whole(fd, size) if torn else size
                seq, link = _next_seal(fd, whole)
                self._check_witness(seq - 1, whole)  # before cutting anything: a cut acknowledged line is loss
                if torn:
                    os.ftruncate(fd, whole)
                    size = whole
                sealed = []
                for n, line in enumerate(lines, seq):
                    sealed.append(seal(line, n, link) + b"\n")
                    link = link_of(sealed[-1])
                payload = b"".join(sealed)
                try:
                    view = memoryview(payload)
                    while view:
                        view = view[os.write(fd, view):]
                    os.fsync(fd)
                except OSError as exc:  # a full disk, an I/O error: none of the batch stays
                    os.ftruncate(fd, size)
                    with contextlib.suppress(OSError):
                        os.fsync(fd)
                    raise BackendUnavailable(f"sandbox {self.folder.name}: nothing was written, the session "
                                             f"buffer could not be extended ({exc.strerror or exc})",
                                             sandbox_id=self.folder.name) from exc
                _witness(self.folder, seq + len(lines) - 1)
            finally:
                os.close(fd)

    def _check_witness(self, lines: int, size: int) -> None:
        """``Corrupted`` when more lines were acknowledged than the buffer's ``lines`` whole lines."""
        witnessed = _witnessed(self.folder)
        if witnessed > lines:
            missing = str(lines + 1) if witnessed == lines + 1 else f"{lines + 1} to {witnessed}"
            raise Corrupted(f"{self.path}:{lines + 1} is missing: {witnessed} lines were appended and acknowledged, "
                            f"the buffer holds {lines} whole ({size} bytes): line(s) {missing} were cut or deleted; "
                            f"{_REMEDY}", path=str(self.path), line=lines + 1)

    def events(self, after: int = 0) -> list[BufferEvent]:
        """Whole events in append order, past the first ``after``; a torn last line is skipped, a
        damaged whole line is ``Corrupted`` naming it."""
        return self._parse()[0][after:]

    def torn_lines(self) -> int:
        return self._parse()[1]

    def _parse(self) -> tuple[list[BufferEvent], int]:
        witnessed = _witnessed(self.folder)  # first: it is written after the lines it counts
        try:
            data = self.path.read_bytes()
        except FileNotFoundError:
            data = b""
        lines = data.split(b"\n")
        torn = 1 if lines[-1].strip() else 0  # no newline after it: an append cut short
        chain = buffer_chain(self.path)
        events: list[BufferEvent] = []
        for n, raw in enumerate(lines[:-1], 1):
            if raw.strip():
                events.append(event_of(chain.open(raw, n, len(events) + 1), self.path, n))
        if witnessed > len(events):
            self._check_witness(len(events), len(data))
        return events, torn

    def close(self, archived_as: int | None = None) -> None:
        """Remove the sandbox folder (buffer included); the caller holds :meth:`exclusive`."""
        remove_folder(self.folder)


_CRC = re.compile(rb',"crc":"([0-9a-f]{8})"\}\s*$')  # an earlier release's unchained checksum
_SEAL_BYTES = len(b',"seq":,"chain":"00000000"\n') + 19  # what sealing adds to a line, at most
_REMEDY = "copy the sandbox aside and discard it, or repair that line"


WITNESS = ".buffer.seq"  # the last line acknowledged, beside the buffer: a deleted last line is seen


def _witnessed(folder: Path) -> int:
    """How many lines were appended and acknowledged (0: unknown, a sandbox from an earlier release)."""
    try:
        raw = (folder / WITNESS).read_bytes()
    except FileNotFoundError:
        return 0
    return int(raw) if raw.strip().isdigit() else 0


def _witness(folder: Path, lines: int) -> None:
    """Note ``lines`` acknowledged, after they are durable. Not fsynced: after a power loss it can
    only be behind the buffer (whose lines were fsynced first), never ahead of it. Best effort: the
    lines are appended already, and a witness that lags only sees less."""
    with contextlib.suppress(OSError):
        fd = os.open(folder / WITNESS, os.O_WRONLY | os.O_CREAT, 0o644)
        try:
            os.pwrite(fd, b"%020d\n" % lines, 0)
        finally:
            os.close(fd)


def buffer_chain(path: Path) -> ChainCheck:
    """The check of a buffer's seals, line by line from the first."""
    return ChainCheck(path, "session buffer", _REMEDY)


def _next_seal(fd: int, size: int) -> tuple[int, str]:
    """The sequence number and chain link the next line appended to the buffer open on ``fd``
    (``size`` bytes, whole lines) takes."""
    if size == 0:
        return 1, START
    last = _last_line(fd, size)
    found = seal_of(last)
    if found is not None:
        return found.seq + 1, found.chain
    # a buffer an earlier release began: its lines are counted once, and sealed lines follow
    lines = [raw for raw in os.pread(fd, size, 0).split(b"\n")[:-1] if raw.strip()]
    return len(lines) + 1, link_of(last)


def _last_line(fd: int, size: int) -> bytes:
    """The last whole line of the file open on ``fd`` (``size`` bytes, ending with a newline)."""
    end = size - 1
    start = _whole(fd, end) if end > 0 else 0
    return os.pread(fd, end - start, start)


def event_of(raw: bytes, path: Path, n: int) -> BufferEvent:
    """Line ``n`` of a buffer (its seal checked and taken off already) as an event; ``Corrupted``
    naming ``path:n`` when it is damaged."""
    from pydantic import ValidationError

    from soulpass.records import BufferEvent

    body, found = raw, _CRC.search(raw)
    if found is not None:
        body = raw[:found.start()] + b"}"
        if b"%08x" % zlib.crc32(body) != found.group(1):
            raise Corrupted(f"{path}:{n} is damaged (its checksum does not match): the session buffer cannot "
                            f"be read whole; {_REMEDY}", path=str(path), line=n)
    try:
        return BufferEvent.model_validate(json.loads(body))
    except (ValueError, ValidationError, RecursionError) as exc:
        raise Corrupted(f"{path}:{n} is not a buffer event ({exc.__class__.__name__}): the session buffer cannot "
                        f"be read whole; {_REMEDY}", path=str(path), line=n) from exc


def _whole(fd: int, size: int) -> int:
    """The size of the file ``fd`` without its torn last line (up to and with its last newline)."""
    chunk = 1 << 16
    end = size
    while end > 0:
        start = max(0, end - chunk)
        at = os.pread(fd, end - start, start).rfind(b"\n")
        if at != -1:
            return start + at + 1
        end = start
    return 0


class SessionLogTail:
    """The events of one append-only buffer file, parsed incrementally: each read parses only the
    whole lines appended since the last one (a damaged line is ``Corrupted``, as
    :meth:`FileSessionLog.events` says); a replaced or truncated file is read again from the start."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.offset = 0
        self.lines = 0  # whole lines read so far (to name a damaged one)
        self.inode: int | None = None
        self.parsed: list[BufferEvent] = []
        self.chain = buffer_chain(path)

    def events(self) -> list[BufferEvent]:
        try:
            fd = os.open(self.path, os.O_RDONLY)
        except FileNotFoundError:
            return []
        try:
            st = os.fstat(fd)
            if st.st_ino != self.inode or st.st_size < self.offset:  # another file: start over
                self.inode, self.offset, self.lines, self.parsed = st.st_ino, 0, 0, []
                self.chain = buffer_chain(self.path)
            data = os.pread(fd, st.st_size - self.offset, self.offset) if st.st_size > self.offset else b""
        finally:
            os.close(fd)
        end = data.rfind(b"\n")
        if end == -1:
            return list(self.parsed)
        chain, parsed = dataclasses.replace(self.chain), list(self.parsed)  # kept only once all read
        for n, raw in enumerate(data[:end].split(b"\n"), self.lines + 1):
            if raw.strip():
                parsed.append(event_of(chain.open(raw, n, len(parsed) + 1), self.path, n))
        self.chain, self.parsed = chain, parsed
        self.lines += data.count(b"\n", 0, end + 1)
        self.offset += end + 1
        return list(self.parsed)


def remove_folder(folder: Path) -> None:
    """Rename, then delete: nobody ever sees a half-deleted sandbox (metadata but no buffer).

    A discard (or the deletion of a kept sandbox's history) is made durable at once; an archived
    sandbox's removal need not be: should it come back after a power loss, its ``ARCHIVED.json``
    (part of the commit) has recovery remove it."""
    trash = folder.with_name(f".trash-{folder.name}-{uuid.uuid4().hex[:8]}")
    try:
        folder.rename(trash)
    except FileNotFoundError:
        return
    try:
        marker = archived_marker(trash)
    except Corrupted:
        marker = None  # durable, as a discard
    if marker is None or marker.get("keep") is True:
        fsync_dir(trash.parent)
    shutil.rmtree(trash, ignore_errors=True)


def archived_marker(folder: Path) -> dict[str, Any] | None:
    """The sandbox folder's ``ARCHIVED.json`` (written by the commit that archived it: ``version``,
    ``archived_at`` and, for a sandbox kept for its history, ``keep``), or None while it is open."""
    try:
        marker = load_json(folder / ARCHIVED_MARKER)
    except FileNotFoundError:
        return None
    if not isinstance(marker, dict):
        raise Corrupted(f"{folder / ARCHIVED_MARKER} is not a JSON object", path=str(folder / ARCHIVED_MARKER))
    return marker


def sweep_finished(account: Path) -> list[str]:
    """Recovery of sandbox folders; the caller holds the account lock. A crash after an archive's
    commit point leaves the sandbox folder behind (its ``ARCHIVED.json`` came with the commit): it
    is removed, unless the marker says to keep it (an archive that excluded items keeps its sandbox
    for its history). A crash during a removal leaves the renamed ``.trash-*`` folder: it is deleted.

    A sandbox whose lock somebody else holds is left for later: that holder (an archive retried,
    an append) sees ``ARCHIVED.json`` itself, and waiting here, with the account lock held, for a
    lock whose holder may be waiting for the account lock would deadlock the two."""
    root = account / SANDBOXES
    if not root.is_dir():
        return []
    done = []
    for folder in sorted(root.iterdir()):
        if folder.name.startswith(".trash-"):
            shutil.rmtree(folder, ignore_errors=True)
            done.append(f"deleted {folder.name}")
        elif (marker := archived_marker(folder)) is not None and marker.get("keep") is not True:
            log = FileSessionLog(folder)
            try:
                with log.section("buffer", blocking=False):
                    log.close()
            except Conflict:
                continue  # somebody else removed it first
            except BlockingIOError:
                continue  # held: its holder, or the next recovery, removes it
            done.append(f"removed archived sandbox {folder.name}")
    return done
