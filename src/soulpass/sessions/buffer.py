"""Input limits, the JSON-safety check every buffered event passes, and a sandbox's buffer.

The buffer's storage (the files backend: one JSONL file, its lock, its reader) is the backend's
:class:`soulpass.store.contract.SessionLog`; this module adds the input limits.
"""

from __future__ import annotations

import contextlib
import math
import re
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from soulpass.errors import InvalidInput
from soulpass.store.contract import PendingEvent, SandboxStore, SessionTail

if TYPE_CHECKING:
    from soulpass.records import BufferEvent

__all__ = ["BODY_FIELDS", "MAX_DEPTH", "Limits", "SandboxBuffer", "check_json_safe"]

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
# Objects and lists nested deeper than this are refused: no real state or profile needs it, and
# every reader (this check, JSON, YAML, pydantic) would otherwise recurse until RecursionError.
MAX_DEPTH = 64


def check_json_safe(value: Any, limit: int, where: str = "data", skip: frozenset[str] = frozenset(),
                    bodies: frozenset[str] = frozenset(), body_limit: int = 0, depth: int = 0) -> None:
    """Refuse what JSON cannot hold faithfully, naming the field.

    Strings must be valid UTF-8 (no lone surrogates) and at most ``limit`` characters (the
    top-level fields named in ``bodies``: ``body_limit``); floats finite; keys strings; only JSON
    types (and datetimes of typed fields); objects and lists at most ``MAX_DEPTH`` levels deep.
    ``skip`` names top-level fields Soulpass derived itself (ids, hashes, the envelope's text copy).
    """
    if isinstance(value, dict | list | tuple) and depth > MAX_DEPTH:
        field = re.split(r"[.\[]", where)[1]  # the event's field: "data.value[0].a..." -> "value"
        raise InvalidInput(f"{field} is nested more than {MAX_DEPTH} levels deep", field=field)
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
            check_json_safe(v, body_limit if where == "data" and k in bodies else limit, f"{where}.{k}",
                            depth=depth + 1)
    elif isinstance(value, list | tuple):
        for i, v in enumerate(value):
            check_json_safe(v, limit, f"{where}[{i}]", depth=depth + 1)
    elif not isinstance(value, (*_JSON_SCALARS, datetime)):
        raise InvalidInput(f"{where} is a {type(value).__name__}, which JSON cannot hold", field=where)


class SandboxBuffer:
    """A sandbox's session log with the input limits applied to every append."""

    def __init__(self, sandboxes: SandboxStore, sandbox_id: str, limits: Limits | None = None) -> None:
        self.limits = limits or Limits()
        self.sandbox_id = sandbox_id
        self.log = sandboxes.session_log(sandbox_id, max_event_bytes=self.limits.max_event_bytes, check=self._check)

    def _check(self, event: PendingEvent) -> None:
        self.limits.check(event.type, dict(event.data), event.derived)

    def locked(self) -> contextlib.AbstractContextManager[None]:
        """Exclusive lock: held by every append and for the whole of an archive."""
        return self.log.exclusive()

    def section(self, name: str) -> contextlib.AbstractContextManager[None]:
        """A named exclusive section of the sandbox that appends never take (``Conflict`` once it is gone)."""
        return self.log.section(name)

    def tail(self) -> SessionTail:
        """An incremental reader of the buffer: each read parses only the lines appended since the last."""
        return self.log.tail()

    def append(self, type_: str, data: dict[str, Any], agent: str | None = None,
               at: datetime | None = None, skip: frozenset[str] = frozenset()) -> BufferEvent:
        """Validate, then durably append one event; refuse if the sandbox is closed."""
        return self.append_many([(type_, data, agent, skip)], at)[0]

    def append_many(self, items: list[tuple[str, dict[str, Any], str | None, frozenset[str]]],
                    at: datetime | None = None) -> list[BufferEvent]:
        """Append several events all-or-nothing: every one is validated before one write."""
        return self.log.append_many([PendingEvent(t, d, a, s) for t, d, a, s in items], at)

    def events(self) -> list[BufferEvent]:
        """All whole events in append order; torn or unparsable lines are skipped."""
        return self.log.events()

    def torn_lines(self) -> int:
        return self.log.torn_lines()
