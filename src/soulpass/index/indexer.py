"""The background indexer: a thread that keeps an account's vectors following its catalog.

It catches the catalog up (new records are searchable by full text at once), turns what is new into
backlog entries and drains them with the index's embedder: through the Redis workers when that is a
:class:`~soulpass.embed.remote.RemoteEmbedder`, else the local model. When the workers cannot be
reached it backs off and tries again; nothing leaves the backlog before its vector is stored, so a
crash or restart simply resumes from the backlog.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass

from soulpass.errors import BackendUnavailable, ConfigError
from soulpass.index.account import AccountIndex
from soulpass.index.backlog import indexing_embed

__all__ = ["BackgroundIndexer", "IndexerStatus"]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class IndexerStatus:
    running: bool
    pending: int
    embedded: int
    failures: int
    last_error: str | None


class BackgroundIndexer:
    """Drains ``index``'s backlog in a daemon thread; ``wake()`` after a commit, ``stop()`` to end."""

    def __init__(self, index: AccountIndex, *, batch: int = 256, poll: float = 2.0, max_backoff: float = 10.0) -> None:
        if index.backlog is None or index.embedder is None:
            raise ConfigError("background indexing needs an embedder (the index has none)")
        self.index = index
        self.batch, self.poll, self.max_backoff = batch, poll, max_backoff
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._embed = indexing_embed(index.embedder, cancelled=self._stop.is_set)
        self._idle = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"soulpass-indexer-{index.store.name}", daemon=True)
        self.embedded = self.failures = 0
        self.last_error: str | None = None

    def start(self) -> BackgroundIndexer:
        self._thread.start()
        return self

    def wake(self) -> None:
        """Look for new versions and backlog now instead of at the next poll."""
        self._idle.clear()
        self._wake.set()

    def stop(self, timeout: float = 30.0) -> None:
        """Stop after the step in hand (entries in flight stay in the backlog if it is cut short)."""
        self._stop.set()
        self._wake.set()
        if self._thread.is_alive():
            self._thread.join(timeout)

    def wait_idle(self, timeout: float = 60.0) -> bool:
        """Block until the backlog is empty and the catalog at HEAD (True), or ``timeout`` passed."""
        deadline = time.monotonic() + timeout
        self.wake()
        while time.monotonic() < deadline:
            if self._idle.wait(min(0.5, max(0.0, deadline - time.monotonic()))):
                return True
            if not self._thread.is_alive():
                return False
        return False

    def status(self) -> IndexerStatus:
        assert self.index.backlog is not None
        return IndexerStatus(running=self._thread.is_alive(), pending=self.index.backlog.pending(),
                             embedded=self.embedded, failures=self.failures, last_error=self.last_error)

    def _run(self) -> None:
        backlog = self.index.backlog
        assert backlog is not None
        backoff = 0.0
        while not self._stop.is_set():
            self._wake.clear()
            try:
                self.index.catch_up()  # the catalog, then new backlog entries (the index does not embed)
                n = backlog.drain(self._embed, self.batch)
            except (BackendUnavailable, ConfigError) as exc:
                self.failures += 1
                self.last_error = str(exc)
                backoff = min(self.max_backoff, max(0.5, backoff * 2))
                log.warning("background indexing waits %.1f s: %s", backoff, exc)
                self._wake.wait(backoff)
                continue
            except Exception as exc:  # keep the thread alive; the entries stay in the backlog
                self.failures += 1
                self.last_error = f"{type(exc).__name__}: {exc}"
                backoff = min(self.max_backoff, max(0.5, backoff * 2))
                log.exception("background indexing failed; retrying in %.1f s", backoff)
                self._wake.wait(backoff)
                continue
            backoff = 0.0
            self.last_error = None
            if n:
                self.embedded += n
                continue
            if self.index.store.head() == self.index.catalog.version() and backlog.pending() == 0:
                self._idle.set()
            self._wake.wait(self.poll)
