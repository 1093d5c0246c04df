"""A search's query vector: embedded on a thread of its own while the full-text search runs.

Embedding a query (~2-4 ms with the embedded MiniLM in int8, 3-6 in float32) is the longest step of a
search, and nothing in the full-text search needs it: started first, it overlaps that search
(ONNX Runtime and SQLite both run without the GIL). The query is tokenised before, on the searching
thread (``soulpass.embed.base.prepare_query``): on the embedding thread the tokenizer waited for the
GIL the full-text search holds between its SQLite calls. The last ``size`` queries' vectors are kept,
so a query asked again (an agent's turn often searches its message twice) is not embedded again.

The threads serve every index of a process (``soulpass.side_threads``).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any

from soulpass.embed.base import Embedder, prepare_query
from soulpass.errors import BackendUnavailable
from soulpass.side_threads import beside

__all__ = ["QueryVector", "QueryVectors"]

#: What waiting for a query vector gives: the vector, or None and why not (None: no vector asked for).
QueryVector = tuple[Any, str | None]

class QueryVectors:
    """The query vectors of one index's searches: ``start(query)`` begins one and returns what
    waits for it; the last ``size`` are kept."""

    def __init__(self, embedder: Embedder, size: int) -> None:
        self.embedder = embedder
        self.size = size
        self._kept: OrderedDict[str, Any] = OrderedDict()
        self._running: dict[str, Future[Any]] = {}  # being embedded: a second start waits for the same
        self._lock = threading.Lock()

    def start(self, query: str) -> Callable[[], QueryVector]:
        """Begin embedding ``query`` (at once when it was kept; the same embedding when it is being
        embedded). Waiting gives ``(vector, None)``, or ``(None, why)`` when the embedder cannot answer
        now (e.g. Redis down and no local model: the search then answers by full text and says so)."""
        with self._lock:
            found = self._kept.get(query)
            if found is not None:
                self._kept.move_to_end(query)
            future = self._running.get(query)
        if found is not None:
            return lambda: (found, None)
        if future is None:
            # The query is tokenised here: on the thread the embedding would wait for the GIL the
            # full-text search holds between its SQLite calls (~0.1 ms, against 0.02 here).
            prepared = prepare_query(self.embedder, query)
            with self._lock:
                future = self._running.get(query)
                if future is None:
                    future = self._running[query] = beside().submit(self._embed, query, prepared)
        running = future

        def wait() -> QueryVector:
            try:
                return running.result(), None
            except BackendUnavailable as exc:
                return None, str(exc)
        return wait

    def _embed(self, query: str, embedded: Callable[[], Any]) -> Any:
        try:
            vector = embedded()
        except BaseException:
            with self._lock:
                self._running.pop(query, None)
            raise
        with self._lock:
            self._kept[query] = vector
            self._kept.move_to_end(query)
            while len(self._kept) > self.size:
                self._kept.popitem(last=False)
            self._running.pop(query, None)
        return vector
