"""A framework's conversation kept in a sandbox: its items verbatim, its messages as turns.

The items (whatever JSON the framework hands over) are the state document ``transcript.<id>``, one
key per item, keys in the order the items came (a removed item's key holds null). While a
conversation is open its changes are that state's deltas in a sandbox's buffer (durable at once,
read back by a new process); ``archive`` adds a turn for each message the sandbox's items hold (tagged
``conversation:<id>``) and commits the sandbox as one version, after which the conversation goes
on in a new sandbox.
"""

from __future__ import annotations

import contextlib
import secrets
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable
from datetime import UTC, datetime
from typing import Any

from soulpass import Account, ArchiveResult, Conflict, Sandbox
from soulpass.ids import check_name

__all__ = ["ItemTurn", "Transcript"]

# An item -> (speaker, text) when it is a message worth remembering ("user" or an agent's name), else None.
ItemTurn = Callable[[dict[str, Any]], tuple[str, str] | None]

_KEY_DIGITS = 20  # nanoseconds since the epoch
_WRITE_ATTEMPTS = 3  # a sandbox archived under a write, then the next one too: give up and say so


class Transcript:
    """The items of one conversation (``conversation``: a name, ``[A-Za-z0-9._-]``) in ``account``.

    ``archive_every``: archive once the open sandbox holds that many new items (None: only when
    ``archive`` is called). Safe to share between threads; several processes may write the same
    conversation (an item's key is its time and a random part: none overwrites another's).
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
        self._last_key = 0

    # --- reading ---------------------------------------------------------------------------

    def items(self, limit: int | None = None) -> list[dict[str, Any]]:
        """The items in order (the latest ``limit`` of them when given)."""
        items = [entry["item"] for entry in self._entries().values() if entry is not None]
        return items if limit is None else items[max(len(items) - limit, 0):]

    def _entries(self) -> dict[str, dict[str, Any] | None]:
        """Every key ever used, in order: the committed state, then the open sandboxes' changes."""
        committed = self.account.state(self.state)
        entries: dict[str, dict[str, Any] | None] = dict(committed.data) if committed is not None else {}
        for sandbox in self._open_sandboxes():
            entries.update(self._pending(sandbox))
        return dict(sorted(entries.items()))

    def _pending(self, sandbox: Sandbox) -> dict[str, dict[str, Any] | None]:
        deltas: dict[str, dict[str, Any] | None] = sandbox.buffer().state_deltas.get(f"{self.state}_state", {})
        return deltas

    def _open_sandboxes(self) -> list[Sandbox]:
        """The conversation's open sandboxes, oldest first: one, unless several processes each
        opened one at the same moment."""
        infos = sorted((i for i in self.account.sandboxes() if i.name == self.label), key=lambda i: i.created_at)
        return [self.account.sandbox(info.sandbox_id) for info in infos]

    # --- writing ---------------------------------------------------------------------------

    def add(self, items: Iterable[dict[str, Any]]) -> None:
        """Append items (written to the buffer before this returns)."""
        batch = list(items)
        if not batch:
            return
        with self._lock:
            # Keys by time, so that processes writing one conversation never pick the same key; a
            # random part for two that pick the same nanosecond; never below this process's last.
            first = self._last_key = max(time.time_ns(), self._last_key + 1)
            self._last_key += len(batch) - 1
            mark, now = secrets.token_hex(3), datetime.now(UTC).isoformat()
            sandbox = self._write({f"{first + n:0{_KEY_DIGITS}d}.{mark}": {"at": now, "item": item}
                                   for n, item in enumerate(batch)})
            due = self._archive_every is not None and len(self._pending(sandbox)) >= self._archive_every
        if due:
            self.archive()

    def _write(self, delta: dict[str, dict[str, Any] | None]) -> Sandbox:
        """Append a change of the transcript to the oldest open sandbox (made when there is none)."""
        for _ in range(_WRITE_ATTEMPTS - 1):
            with contextlib.suppress(Conflict):  # another process archived it meanwhile: the next one takes it
                return self._write_once(delta)
        return self._write_once(delta)

    def _write_once(self, delta: dict[str, dict[str, Any] | None]) -> Sandbox:
        open_now = self._open_sandboxes()
        sandbox = open_now[0] if open_now else self.account.create_sandbox(self.label)
        sandbox.update_state(self.state, delta)
        return sandbox

    def pop(self) -> dict[str, Any] | None:
        """Remove and return the latest item (None when there is none). An item already archived
        leaves the transcript, but the turn it became stays in memory."""
        with self._lock:
            live = [(key, entry) for key, entry in self._entries().items() if entry is not None]
            if not live:
                return None
            key, entry = live[-1]
            self._write({key: None})
            item: dict[str, Any] = entry["item"]
            return item

    def clear(self) -> None:
        """Remove every item (the same caveat as ``pop`` for archived ones)."""
        with self._lock:
            live = [key for key, entry in self._entries().items() if entry is not None]
            if live:
                self._write(dict.fromkeys(live))

    def archive(self) -> ArchiveResult | None:
        """Turn the open sandbox's messages into turns and commit it (None: nothing was open)."""
        with self._lock:
            result = None
            for sandbox in self._open_sandboxes():
                self._add_turns(sandbox)
                result = sandbox.archive()
            return result

    def _add_turns(self, sandbox: Sandbox) -> None:
        # the turns an archive that failed already wrote are not written again
        written = Counter((datetime.fromisoformat(str(turn["created_at"])), turn["text_excerpt"])
                          for turn in sandbox.buffer().new_turns)
        for entry in self._pending(sandbox).values():
            said = None if entry is None else self._to_turn(entry["item"])
            if entry is None or said is None:
                continue
            speaker, text = said
            if written[datetime.fromisoformat(entry["at"]), text] > 0:
                written[datetime.fromisoformat(entry["at"]), text] -= 1
            else:
                sandbox.add_turn(speaker, text, created_at=entry["at"], tags=[self.tag])
