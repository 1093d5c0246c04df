"""The session buffer: an append-only JSONL file, one event per line, fsynced per event.

Writers in several processes append under an ``flock`` with a single ``write`` per line, so lines
are always whole. A torn last line (a crash mid-write) is skipped when reading and never glued to
the next event.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import math
import os
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from soulpass.errors import Conflict, InvalidInput
from soulpass.ids import utc_now
from soulpass.records import BufferEvent

__all__ = ["BODY_FIELDS", "Limits", "SessionBufferFile", "check_json_safe"]

BUFFER_FILE = "session_buffer.jsonl"
ARCHIVED_MARKER = "ARCHIVED.json"


# The message bodies of a buffer event type: what someone said or pasted, kept verbatim whatever
# its length. Every other string (names, labels, tags, summaries, fact and state values) is short.
BODY_FIELDS: dict[str, frozenset[str]] = {
    "turn": frozenset({"text_excerpt"}),
    "sensory": frozenset({"content"}),
    "journal": frozenset({"text"}),
}


@dataclass(frozen=True)
class Limits:
    """Input limits; over-size input is refused with ``InvalidInput`` naming the field.

    ``max_body_chars`` bounds a message body (a turn's ``text_excerpt``, a sensory record's
    ``content``, a journal entry's ``text``): 8 Mi characters, so a pasted document of 8 MB is
    one turn. ``max_text_chars`` bounds every other string. ``max_event_bytes`` bounds one buffer
    line as JSON; the default holds any event whose fields are within the two character limits
    (a turn's body is written twice: ``text_excerpt`` and the envelope's ``text``).
    """

    max_text_chars: int = 100_000
    max_body_chars: int = 8 * 1024 * 1024
    max_event_bytes: int = 128 * 1024 * 1024

    def check(self, type_: str, data: dict[str, Any], skip: frozenset[str] = frozenset()) -> None:
        """Refuse ``data`` of a ``type_`` event that JSON cannot hold or that is over a limit."""
        check_json_safe(data, self.max_text_chars, skip=skip,
                        bodies=BODY_FIELDS.get(type_, frozenset()), body_limit=self.max_body_chars)


_JSON_SCALARS = (bool, int, str, type(None))


def check_json_safe(value: Any, limit: int, where: str = "data", skip: frozenset[str] = frozenset(),
                    bodies: frozenset[str] = frozenset(), body_limit: int = 0) -> None:
    """Refuse what JSON cannot hold faithfully, naming the field.

    Strings must be valid UTF-8 (no lone surrogates) and at most ``limit`` characters (the
    top-level fields named in ``bodies``: ``body_limit``); floats finite; keys strings; only JSON
    types (and datetimes of typed fields). ``skip`` names top-level fields Soulpass derived itself
    (ids, hashes, the envelope's text copy).
    """
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError as exc:
            raise InvalidInput(f"{where} is not valid UTF-8 ({exc.reason} at position {exc.start})",
                               field=where) from None
        if len(value) > limit:
            raise InvalidInput(f"{where} is {len(value)} characters long (limit {limit})", field=where)
    elif isinstance(value, float):
        if not math.isfinite(value):
            raise InvalidInput(f"{where} is {value}: JSON has no NaN or infinity", field=where)
    elif isinstance(value, dict):
        for k, v in value.items():
            if not isinstance(k, str):
                raise InvalidInput(f"{where} has a non-string key {k!r}", field=where)
            check_json_safe(k, limit, f"{where} key")
            if where == "data" and k in skip:
                continue
            check_json_safe(v, body_limit if where == "data" and k in bodies else limit, f"{where}.{k}")
    elif isinstance(value, list | tuple):
        for i, v in enumerate(value):
            check_json_safe(v, limit, f"{where}[{i}]")
    elif not isinstance(value, (*_JSON_SCALARS, datetime)):
        raise InvalidInput(f"{where} is a {type(value).__name__}, which JSON cannot hold", field=where)


class SessionBufferFile:
    """``sandboxes/<id>/session_buffer.jsonl`` and the lock that guards it."""

    def __init__(self, folder: Path, limits: Limits | None = None) -> None:
        self.folder = folder
        self.path = folder / BUFFER_FILE
        self.limits = limits or Limits()

    @contextlib.contextmanager
    def locked(self) -> Iterator[None]:
        """Exclusive lock: held by every append and for the whole of an archive."""
        try:
            fd = os.open(self.folder / ".buffer.lock", os.O_RDWR | os.O_CREAT, 0o644)
        except FileNotFoundError:
            raise Conflict(f"sandbox {self.folder.name} no longer exists", sandbox_id=self.folder.name) from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)

    def append(self, type_: str, data: dict[str, Any], agent: str | None = None,
               at: datetime | None = None, skip: frozenset[str] = frozenset()) -> BufferEvent:
        """Validate, then durably append one event; refuse if the sandbox is closed."""
        return self.append_many([(type_, data, agent, skip)], at)[0]

    def append_many(self, items: list[tuple[str, dict[str, Any], str | None, frozenset[str]]],
                    at: datetime | None = None) -> list[BufferEvent]:
        """Append several events all-or-nothing: every one is validated before one write."""
        events, lines = [], []
        for type_, data, agent, skip in items:
            self.limits.check(type_, data, skip)
            try:
                event = BufferEvent(event_id=uuid.uuid4().hex, type=type_, at=at or utc_now(),
                                    agent=agent, data=data)
            except ValidationError as exc:
                raise InvalidInput(f"invalid buffer event: {exc}") from exc
            try:
                line = json.dumps(event.model_dump(mode="json"), ensure_ascii=False, allow_nan=False)
                raw = (line + "\n").encode("utf-8")
            except (ValueError, UnicodeError) as exc:
                raise InvalidInput(f"{type_} event cannot be stored as JSON: {exc}") from exc
            if len(raw) > self.limits.max_event_bytes:
                raise InvalidInput(f"{type_} event is {len(raw)} bytes (limit {self.limits.max_event_bytes})",
                                   field="data")
            events.append(event)
            lines.append(raw)
        self._write(b"".join(lines))
        return events

    def _write(self, payload: bytes) -> None:
        with self.locked():
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
                if size and os.pread(fd, 1, size - 1) != b"\n":
                    payload = b"\n" + payload  # never glue an event to a torn line
                view = memoryview(payload)
                while view:
                    view = view[os.write(fd, view):]
                os.fsync(fd)
            finally:
                os.close(fd)

    def events(self) -> list[BufferEvent]:
        """All whole events in append order; torn or unparsable lines are skipped."""
        return [e for e, _ in self._parse() if e is not None]

    def torn_lines(self) -> int:
        return sum(1 for e, _ in self._parse(keep_bad=True) if e is None)

    def _parse(self, keep_bad: bool = False) -> list[tuple[BufferEvent | None, int]]:
        if not self.path.exists():
            return []
        out: list[tuple[BufferEvent | None, int]] = []
        for n, raw in enumerate(self.path.read_bytes().split(b"\n"), 1):
            if not raw.strip():
                continue
            try:
                out.append((BufferEvent.model_validate(json.loads(raw)), n))
            except (ValueError, ValidationError):
                if keep_bad:
                    out.append((None, n))
        return out
