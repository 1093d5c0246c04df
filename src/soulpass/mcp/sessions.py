"""Where an MCP agent's writes go, and when its sessions are archived without being asked.

An agent works in one session per account: the sandbox it created (``create_sandbox``) or named
(``sandbox_id``) last, else the newest live sandbox named ``mcp``, else a new one. Sessions persist
without ``archive_session`` (:class:`AutoArchive`): after every N writes, when idle for T seconds,
and when the server stops (stdio end of input, HTTP shutdown). Archiving a session with nothing new
commits no version (``Unchanged``), so these triggers never add empty versions.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from soulpass.engine import AlreadyArchived, AwaitingReview, Committed, Unchanged
from soulpass.errors import InvalidInput, NotFound, SoulpassError
from soulpass.pool import AccountPool

__all__ = ["AutoArchive", "SessionKeeper"]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class AutoArchive:
    """When the server archives a session by itself: after ``every`` writes (None: never), after
    ``idle`` seconds without a write (None: never), and ``on_close`` when it stops."""

    every: int | None = None
    idle: float | None = 600.0
    on_close: bool = True

    def __post_init__(self) -> None:
        if self.every is not None and self.every < 1:
            raise InvalidInput(f"archive every N writes needs N >= 1, not {self.every}", field="every")
        if self.idle is not None and self.idle <= 0:
            raise InvalidInput(f"archive on idle needs a positive number of seconds, not {self.idle}", field="idle")

    @classmethod
    def from_env(cls, env: dict[str, str] | None = None) -> AutoArchive:
        """``SOULPASS_MCP_ARCHIVE_EVERY`` (N, 0: never), ``SOULPASS_MCP_ARCHIVE_IDLE`` (seconds, 0:
        never; default 600), ``SOULPASS_MCP_ARCHIVE_ON_CLOSE`` (1/0, default 1)."""
        env = dict(os.environ if env is None else env)
        try:
            every = int(env.get("SOULPASS_MCP_ARCHIVE_EVERY", "0"))
            idle = float(env.get("SOULPASS_MCP_ARCHIVE_IDLE", "600"))
        except ValueError as exc:
            raise InvalidInput(f"SOULPASS_MCP_ARCHIVE_EVERY / _IDLE must be numbers: {exc}", field="env") from exc
        on_close = env.get("SOULPASS_MCP_ARCHIVE_ON_CLOSE", "1").strip().lower() not in ("0", "false", "no", "off")
        return cls(every=every or None, idle=idle or None, on_close=on_close)


class SessionKeeper:
    """The current session of each account and the writes not archived yet; thread-safe."""

    def __init__(self, pool: AccountPool, policy: AutoArchive | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.pool, self.policy, self.clock = pool, policy or AutoArchive(), clock
        self._lock = threading.RLock()
        self._current: dict[str, str] = {}  # account -> sandbox id
        self._writes: dict[tuple[str, str], int] = {}  # written since its last archive
        self._last: dict[tuple[str, str], float] = {}
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def use(self, account: str, sandbox_id: str) -> None:
        """The agent works in ``sandbox_id`` from now on (it created or named it)."""
        with self._lock:
            self._current[account] = sandbox_id

    def current(self, account: str) -> str | None:
        with self._lock:
            return self._current.get(account)

    def done(self, account: str, sandbox_id: str) -> None:
        """``sandbox_id`` was archived or discarded: nothing of it is pending, it is no one's session."""
        with self._lock:
            self._writes.pop((account, sandbox_id), None)
            self._last.pop((account, sandbox_id), None)
            if self._current.get(account) == sandbox_id:
                del self._current[account]

    def drop_account(self, account: str) -> None:
        """Forget the sessions of ``account`` (deleted): nothing of it is pending any more."""
        with self._lock:
            for key in [k for k in (*self._writes, *self._last) if k[0] == account]:
                self.done(*key)
            self._current.pop(account, None)

    def wrote(self, account: str, sandbox_id: str) -> dict[str, Any] | None:
        """Count a write; the archive's summary when it reached ``every`` and was archived."""
        with self._lock:
            key = (account, sandbox_id)
            self._writes[key] = self._writes.get(key, 0) + 1
            self._last[key] = self.clock()
            due = self.policy.every is not None and self._writes[key] >= self.policy.every
        return self._archive(account, sandbox_id, "every") if due else None

    def archive_idle(self) -> list[dict[str, Any]]:
        """Archive the sessions idle for longer than ``idle`` seconds; their summaries."""
        if self.policy.idle is None:
            return []
        now = self.clock()
        with self._lock:
            due = [k for k, at in self._last.items() if now - at >= self.policy.idle]
        return [r for account, sid in due if (r := self._archive(account, sid, "idle")) is not None]

    def close(self) -> list[dict[str, Any]]:
        """Stop the idle timer and, with ``on_close``, archive every session with pending writes."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)
        if not self.policy.on_close:
            return []
        with self._lock:
            pending = list(self._writes)
        return [r for account, sid in pending if (r := self._archive(account, sid, "close")) is not None]

    def start(self) -> SessionKeeper:
        """Run the idle check in a background thread (a long-running server's)."""
        if self.policy.idle is not None and self._thread is None:
            period = min(max(self.policy.idle / 4, 0.05), 30.0)

            def loop() -> None:
                while not self._stop.wait(period):
                    self.archive_idle()

            self._thread = threading.Thread(target=loop, name="soulpass-mcp-archive", daemon=True)
            self._thread.start()
        return self

    def _archive(self, account: str, sandbox_id: str, why: str) -> dict[str, Any] | None:
        try:
            result = self.pool.get(account).archive(sandbox_id)
        except NotFound:  # discarded or archived elsewhere: nothing of it is pending here
            self.done(account, sandbox_id)
            return None
        except SoulpassError as exc:  # the session stays; try again after another idle period
            log.warning("auto-archive (%s) of sandbox %s in %s failed: %s", why, sandbox_id, account, exc)
            with self._lock:
                self._last[(account, sandbox_id)] = self.clock()
            return None
        self.done(account, sandbox_id)
        version = result.version if isinstance(result, Committed | AlreadyArchived | Unchanged) else None
        status = {Committed: "committed", AlreadyArchived: "already_archived", Unchanged: "unchanged",
                  AwaitingReview: "awaiting_review"}.get(type(result), "planned")  # awaiting: the sandbox stays
        log.info("auto-archived (%s) sandbox %s in %s: %s", why, sandbox_id, account, status)
        return {"sandbox_id": sandbox_id, "trigger": why, "status": status, "version": version}
