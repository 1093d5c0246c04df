"""A sandbox's session buffer on disk: ``sandboxes/<id>/session_buffer.jsonl``, one event a line.

Writers in several processes append under an ``flock`` with a single ``write`` per batch, so lines
are always whole. A torn last line (a crash mid-write: no newline at its end) is skipped when
reading and cut by the next append, never glued to the next event. Each line ends with a CRC-32 of
its bytes (``,"crc":"…"}``), so a line damaged on disk is an error naming the file and line
(``Corrupted``), never a turn silently lost at archive; lines written before the checksums still
read. This is the one JSONL reader of session buffers.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import uuid
import zlib
from collections.abc import Callable, Iterator, Sequence
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING

from soulpass.errors import BackendUnavailable, Conflict, Corrupted, InvalidInput
from soulpass.ids import utc_now
from soulpass.store.contract import PendingEvent
from soulpass.store.fsio import fsync_dir, resource_lock
from soulpass.store.keys import BUFFER_FILE

if TYPE_CHECKING:  # the event model loads when a buffer is written or read, not when an account opens
    from soulpass.records import BufferEvent

__all__ = [
    "ARCHIVED_MARKER",
    "SANDBOXES",
    "FileSessionLog",
    "SessionLogTail",
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
                line = json.dumps(event.model_dump(mode="json"), ensure_ascii=False, allow_nan=False)
                raw = with_crc(line.encode("utf-8")) + b"\n"
            except (ValueError, UnicodeError) as exc:
                raise InvalidInput(f"{pending.type} event cannot be stored as JSON: {exc}") from exc
            if len(raw) > self.max_event_bytes:
                raise InvalidInput(f"{pending.type} event is {len(raw)} bytes (limit {self.max_event_bytes})",
                                   field="data")
            out.append(event)
            lines.append(raw)
        self._write(b"".join(lines))
        return out

    def _write(self, payload: bytes) -> None:
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
                if size and os.pread(fd, 1, size - 1) != b"\n":  # a torn line: an append that never returned
                    size = _whole(fd, size)
                    os.ftruncate(fd, size)
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
            finally:
                os.close(fd)

    def events(self, after: int = 0) -> list[BufferEvent]:
        """Whole events in append order, past the first ``after``; a torn last line is skipped, a
        damaged whole line is ``Corrupted`` naming it."""
        return self._parse()[0][after:]

    def torn_lines(self) -> int:
        return self._parse()[1]

    def _parse(self) -> tuple[list[BufferEvent], int]:
        try:
            data = self.path.read_bytes()
        except FileNotFoundError:
            return [], 0
        lines = data.split(b"\n")
        torn = 1 if lines[-1].strip() else 0  # no newline after it: an append cut short
        return [event_of(raw, self.path, n) for n, raw in enumerate(lines[:-1], 1) if raw.strip()], torn

    def close(self, archived_as: int | None = None) -> None:
        """Remove the sandbox folder (buffer included); the caller holds :meth:`exclusive`."""
        remove_folder(self.folder)


_CRC = re.compile(rb',"crc":"([0-9a-f]{8})"\}\s*$')


def with_crc(line: bytes) -> bytes:
    """A JSON object's line with its checksum as the last member: CRC-32 of the line without it."""
    return line[:-1] + b',"crc":"%08x"}' % zlib.crc32(line)


def event_of(raw: bytes, path: Path, n: int) -> BufferEvent:
    """Line ``n`` of a buffer as an event; ``Corrupted`` naming ``path:n`` when it is damaged."""
    from pydantic import ValidationError

    from soulpass.records import BufferEvent

    body, found = raw, _CRC.search(raw)
    if found is not None:
        body = raw[:found.start()] + b"}"
        if b"%08x" % zlib.crc32(body) != found.group(1):
            raise Corrupted(f"{path}:{n} is damaged (its checksum does not match): the session buffer cannot "
                            "be read whole; copy the sandbox aside and discard it, or repair that line",
                            path=str(path), line=n)
    try:
        return BufferEvent.model_validate(json.loads(body))
    except (ValueError, ValidationError) as exc:
        raise Corrupted(f"{path}:{n} is not a buffer event ({exc.__class__.__name__}): the session buffer cannot "
                        "be read whole; copy the sandbox aside and discard it, or repair that line",
                        path=str(path), line=n) from exc


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
    whole lines appended since the last one (unparsable lines are skipped, as
    :meth:`FileSessionLog.events` does); a replaced or truncated file is read again from the start."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.offset = 0
        self.lines = 0  # whole lines read so far (to name a damaged one)
        self.inode: int | None = None
        self.parsed: list[BufferEvent] = []

    def events(self) -> list[BufferEvent]:
        try:
            fd = os.open(self.path, os.O_RDONLY)
        except FileNotFoundError:
            return []
        try:
            st = os.fstat(fd)
            if st.st_ino != self.inode or st.st_size < self.offset:  # another file: start over
                self.inode, self.offset, self.lines, self.parsed = st.st_ino, 0, 0, []
            data = os.pread(fd, st.st_size - self.offset, self.offset) if st.st_size > self.offset else b""
        finally:
            os.close(fd)
        end = data.rfind(b"\n")
        if end == -1:
            return list(self.parsed)
        first = self.lines
        for n, raw in enumerate(data[:end].split(b"\n"), first + 1):
            if raw.strip():
                self.parsed.append(event_of(raw, self.path, n))
        self.lines += data.count(b"\n", 0, end + 1)
        self.offset += end + 1
        return list(self.parsed)


def remove_folder(folder: Path) -> None:
    """Rename, then delete: nobody ever sees a half-deleted sandbox (metadata but no buffer).

    A discard is made durable at once; an archived sandbox's removal need not be: should it come
    back after a power loss, its ``ARCHIVED.json`` (part of the commit) has recovery remove it."""
    trash = folder.with_name(f".trash-{folder.name}-{uuid.uuid4().hex[:8]}")
    try:
        folder.rename(trash)
    except FileNotFoundError:
        return
    if not (trash / ARCHIVED_MARKER).exists():
        fsync_dir(trash.parent)
    shutil.rmtree(trash, ignore_errors=True)


def sweep_finished(account: Path) -> list[str]:
    """Recovery of sandbox folders; the caller holds the account lock. A crash after an archive's
    commit point leaves the sandbox folder behind (its ``ARCHIVED.json`` came with the commit): it
    is removed. A crash during a removal leaves the renamed ``.trash-*`` folder: it is deleted.

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
        elif (folder / ARCHIVED_MARKER).exists():
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
