"""A framework's conversation kept in a sandbox: its items verbatim, its messages as turns.

The items (whatever JSON the framework hands over) are the state document ``transcript.<id>``, one
key per item in the order they came (a removed item's key holds null). While a conversation is
open its changes are that state's deltas in a sandbox's buffer (durable at once, read back by a new
process); ``archive`` adds a turn for each message the sandbox's items hold (tagged
``conversation:<id>``) and commits the sandbox as one version, after which the conversation goes
on in a new sandbox.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from datetime import UTC, datetime
from typing import Any

from soulpass import Account, ArchiveResult, Sandbox
from soulpass.ids import check_name

__all__ = ["ItemTurn", "Transcript"]

# An item -> (speaker, text) when it is a message worth remembering ("user" or an agent's name), else None.
ItemTurn = Callable[[dict[str, Any]], tuple[str, str] | None]

_KEY_DIGITS = 10


class Transcript:
    """The items of one conversation (``conversation``: a name, ``[A-Za-z0-9._-]``) in ``account``.

    ``archive_every``: archive once the open sandbox holds that many new items (None: only when
    ``archive`` is called). Safe to share between threads; several processes may hold the same
    conversation (their writes are appends to one buffer).
    """

    def __init__(self, account: Account, conversation: str, to_turn: ItemTurn, *,
                 archive_every: int | None = None) -> None:
        if archive_every is not None and archive_every < 1:
            raise ValueError(f"archive_every must be at least 1, not {archive_every}")
        self.account = account
        self.conversation = check_name(conversation, "conversation id")
        self.state = check_name(f"transcript.{conversation}", "conversation id")
        self.label = f"transcript {conversation}"
        self.tag = f"conversation:{conversation}"  # on its turns: a search can keep to one conversation
        self._to_turn = to_turn
        self._archive_every = archive_every
        self._lock = threading.Lock()

    # --- reading ---------------------------------------------------------------------------

    def items(self, limit: int | None = None) -> list[dict[str, Any]]:
        """The items in order (the latest ``limit`` of them when given)."""
        items = [entry["item"] for entry in self._entries().values() if entry is not None]
        return items if limit is None else items[max(len(items) - limit, 0):]

    def _entries(self) -> dict[str, dict[str, Any] | None]:
        """Every key ever used, in order: the committed state, then the open sandbox's changes."""
        committed = self.account.state(self.state)
        entries: dict[str, dict[str, Any] | None] = dict(committed.data) if committed is not None else {}
        sandbox = self._open_sandbox()
        if sandbox is not None:
            entries.update(self._pending(sandbox))
        return dict(sorted(entries.items()))

    def _pending(self, sandbox: Sandbox) -> dict[str, dict[str, Any] | None]:
        deltas: dict[str, dict[str, Any] | None] = sandbox.buffer().state_deltas.get(f"{self.state}_state", {})
        return deltas

    def _open_sandbox(self) -> Sandbox | None:
        for info in self.account.sandboxes():
            if info.name == self.label:
                return self.account.sandbox(info.sandbox_id)
        return None

    # --- writing ---------------------------------------------------------------------------

    def add(self, items: Iterable[dict[str, Any]]) -> None:
        """Append items (written to the buffer before this returns)."""
        batch = list(items)
        if not batch:
            return
        with self._lock:
            entries = self._entries()
            first = int(max(entries, default="0")) + 1
            now = datetime.now(UTC).isoformat()
            delta = {f"{first + n:0{_KEY_DIGITS}d}": {"at": now, "item": item} for n, item in enumerate(batch)}
            sandbox = self._open_sandbox() or self.account.create_sandbox(self.label)
            sandbox.update_state(self.state, delta)
            due = self._archive_every is not None and len(self._pending(sandbox)) >= self._archive_every
        if due:
            self.archive()

    def pop(self) -> dict[str, Any] | None:
        """Remove and return the latest item (None when there is none). An item already archived
        leaves the transcript, but the turn it became stays in memory."""
        with self._lock:
            live = [(key, entry) for key, entry in self._entries().items() if entry is not None]
            if not live:
                return None
            key, entry = live[-1]
            (self._open_sandbox() or self.account.create_sandbox(self.label)).update_state(self.state, {key: None})
            item: dict[str, Any] = entry["item"]
            return item

    def clear(self) -> None:
        """Remove every item (the same caveat as ``pop`` for archived ones)."""
        with self._lock:
            live = [key for key, entry in self._entries().items() if entry is not None]
            if live:
                (self._open_sandbox() or self.account.create_sandbox(self.label)).update_state(
                    self.state, dict.fromkeys(live))

    def archive(self) -> ArchiveResult | None:
        """Turn the open sandbox's messages into turns and commit it (None: nothing was open)."""
        with self._lock:
            sandbox = self._open_sandbox()
            if sandbox is None:
                return None
            # turns an archive that failed already wrote are not written again
            written = {(datetime.fromisoformat(str(turn["created_at"])), turn["text_excerpt"])
                       for turn in sandbox.buffer().new_turns}
            for entry in self._pending(sandbox).values():
                said = None if entry is None else self._to_turn(entry["item"])
                if entry is not None and said is not None:
                    speaker, text = said
                    if (datetime.fromisoformat(entry["at"]), text) not in written:
                        sandbox.add_turn(speaker, text, created_at=entry["at"], tags=[self.tag])
            return sandbox.archive()
