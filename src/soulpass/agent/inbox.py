"""Agent inboxes: where tools (``rag_search``) deliver results for an agent to read on its next turn.

Two backends behind one small protocol: :class:`BufferInbox` keeps the messages as ``inbox``
events in the sandbox's session buffer (delivered and acknowledged by appends, so several
processes share it safely), :class:`RedisInbox` keeps one Redis list per agent
(``<prefix>:<account>:inbox:<agent>``), as in the Volition design.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from soulpass.agent.types import Clock, InboxMessage
from soulpass.errors import BackendUnavailable
from soulpass.ids import check_name
from soulpass.records import BufferEvent

if TYPE_CHECKING:
    from soulpass.engine import Sandbox

__all__ = ["BufferInbox", "Inbox", "RedisInbox"]


@runtime_checkable
class Inbox(Protocol):
    def push(self, message: InboxMessage) -> None:
        """Deliver ``message`` to ``message.to_agent`` (durable on return)."""
        ...

    def read(self, agent: str, *, pop: bool = False) -> list[InboxMessage]:
        """Unread messages for ``agent``, oldest first; ``pop`` marks them read."""
        ...


class BufferInbox:
    """A list in the session buffer: ``inbox`` events with ``op`` "deliver" or "ack"."""

    def __init__(self, sandbox: Callable[[], Sandbox], clock: Clock,
                 events: Callable[[], list[BufferEvent]] | None = None) -> None:
        self._sandbox = sandbox
        self._clock = clock
        self._read_events = events  # the memory's incremental reader, when it has one

    def _append(self, agent: str, data: dict[str, Any]) -> None:
        sb = self._sandbox()
        sb.info.buffer(sb.account.sp.limits).append("inbox", data, agent=agent, at=self._clock())

    def push(self, message: InboxMessage) -> None:
        self._append(message.to_agent, {"op": "deliver", "message": message.to_dict()})

    def read(self, agent: str, *, pop: bool = False) -> list[InboxMessage]:
        check_name(agent, "agent")
        sb = self._sandbox()
        events = self._read_events() if self._read_events else sb.info.buffer(sb.account.sp.limits).events()
        pending: dict[str, InboxMessage] = {}
        for ev in events:
            if ev.type != "inbox" or ev.agent != agent:
                continue
            if ev.data.get("op") == "deliver":
                msg = InboxMessage.from_dict(ev.data["message"])
                pending[msg.id] = msg
            elif ev.data.get("op") == "ack":
                for mid in ev.data.get("ids", []):
                    pending.pop(mid, None)
        out = list(pending.values())
        if pop and out:
            self._append(agent, {"op": "ack", "ids": [m.id for m in out]})
        return out


class RedisInbox:
    """One Redis list per agent; ``pop`` reads and empties it in one transaction."""

    def __init__(self, client: Any, account: str, prefix: str = "soulpass") -> None:
        self.client = client
        self.account = check_name(account, "account name")
        self.prefix = prefix

    @classmethod
    def from_url(cls, url: str, account: str, prefix: str = "soulpass") -> RedisInbox:
        try:
            import redis
        except ImportError as exc:
            raise BackendUnavailable("the Redis inbox needs the redis package: pip install 'soulpass[redis]'",
                                     extra="redis") from exc
        return cls(redis.Redis.from_url(url), account, prefix)

    def key(self, agent: str) -> str:
        return f"{self.prefix}:{self.account}:inbox:{check_name(agent, 'agent')}"

    def push(self, message: InboxMessage) -> None:
        try:
            self.client.rpush(self.key(message.to_agent), json.dumps(message.to_dict(), ensure_ascii=False))
        except Exception as exc:  # redis.ConnectionError and friends, without importing redis here
            raise BackendUnavailable(f"Redis inbox push failed: {exc}", key=self.key(message.to_agent)) from exc

    def read(self, agent: str, *, pop: bool = False) -> list[InboxMessage]:
        key = self.key(agent)
        try:
            if pop:
                pipe = self.client.pipeline(transaction=True)
                pipe.lrange(key, 0, -1)
                pipe.delete(key)
                raw = pipe.execute()[0]
            else:
                raw = self.client.lrange(key, 0, -1)
        except Exception as exc:
            raise BackendUnavailable(f"Redis inbox read failed: {exc}", key=key) from exc
        return [InboxMessage.from_dict(json.loads(r)) for r in raw]
