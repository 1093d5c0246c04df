"""``RemoteEmbedder``: vectors from ``soulpass worker`` processes over the Redis queue.

Queries (``embed_batch``, what ``rag_search`` uses) make one round trip in the seed's single form
with a short timeout and fall back to the local model when no worker answers in time. Indexing
(``embed_for_index``) sends batch tasks and waits longer; when the workers cannot be reached it
raises ``BackendUnavailable`` and the background indexer keeps the records in its backlog for
later (or embeds them locally once ``local_fallback_after`` seconds of failure have passed).
Vectors from a worker that runs another model are refused, never mixed into the index.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from soulpass.embed.base import Embedder, Vectors
from soulpass.embed.redis_queue import connect, live_workers, reap, redis_errors
from soulpass.embed.wire import QueueNames, decode_reply, encode_task, new_task
from soulpass.errors import BackendUnavailable, ConfigError, InvalidInput

__all__ = ["RemoteEmbedder"]

log = logging.getLogger(__name__)
LocalChoice = Embedder | Callable[[], Embedder] | None
_WORKER_CHECK_TTL = 1.0  # seconds a "which workers are alive" answer is reused


class RemoteEmbedder:
    """An :class:`~soulpass.embed.Embedder` served by workers on a Redis queue, with a local fallback.

    ``model_id``/``dim`` are those the workers must run (the embedded MiniLM's by default); a reply
    naming another model is refused. ``local`` is an embedder, or a function making one on first
    need (the model is then only loaded when a fallback happens).
    """

    def __init__(self, url: str | None = None, *, client: Any = None, names: QueueNames | None = None,
                 model_id: str = "all-MiniLM-L6-v2/onnx-int8", dim: int = 384, local: LocalChoice = None,
                 query_timeout: float = 2.0, index_timeout: float = 60.0, task_size: int = 64,
                 local_fallback_after: float | None = None) -> None:
        if client is None and url is None:
            raise InvalidInput("RemoteEmbedder needs a Redis url or a client")
        if task_size < 1 or query_timeout <= 0 or index_timeout <= 0:
            raise InvalidInput("task_size and the timeouts must be positive")
        self.url = url
        self.client = client if client is not None else connect(str(url))
        self.names = names or QueueNames()
        self._model_id, self._dim = model_id, dim
        self._local_choice = local
        self._local: Embedder | None = local if isinstance(local, Embedder) and not isinstance(local, type) else None
        self.query_timeout, self.index_timeout = query_timeout, index_timeout
        self.task_size = task_size
        self.local_fallback_after = local_fallback_after
        self._lock = threading.Lock()
        self._workers_checked = (0.0, False)
        self._failing_since: float | None = None
        #: counters: remote round trips, texts, fallbacks to the local model, remote failures
        self.stats = {"requests": 0, "texts": 0, "fallbacks": 0, "failures": 0, "duplicates": 0}

    @property
    def model_id(self) -> str:
        return self._model_id

    @property
    def dim(self) -> int:
        return self._dim

    # --- the Embedder contract: queries ----------------------------------------------------

    def embed_batch(self, texts: Sequence[str]) -> Vectors:
        """Remote within ``query_timeout``, else the local model (``BackendUnavailable`` without one)."""
        texts = _checked(texts)
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        try:
            return self.embed_remote(texts, timeout=self.query_timeout, single=len(texts) == 1)
        except (BackendUnavailable, ConfigError) as exc:
            local = self.local()
            if local is None:
                raise
            log.info("embedding %d text(s) locally: %s", len(texts), exc)
            self._count("fallbacks")
            return local.embed_batch(texts)

    # --- indexing ----------------------------------------------------------------------------

    def embed_for_index(self, texts: Sequence[str], *, cancelled: Callable[[], bool] | None = None) -> Vectors:
        """Remote, waiting up to ``index_timeout`` between answers. Raises ``BackendUnavailable`` when
        the workers cannot be used (or ``cancelled()`` turns true while waiting), unless they have
        failed for ``local_fallback_after`` seconds and a local model exists (then it is used)."""
        texts = _checked(texts)
        try:
            vectors = self.embed_remote(texts, timeout=self.index_timeout, cancelled=cancelled)
        except (BackendUnavailable, ConfigError):
            now = time.monotonic()
            with self._lock:
                self._failing_since = self._failing_since or now
                waited = now - self._failing_since
            if self.local_fallback_after is not None and waited >= self.local_fallback_after:
                local = self.local()
                if local is not None:
                    self._count("fallbacks")
                    return local.embed_batch(texts)
            raise
        with self._lock:
            self._failing_since = None
        return vectors

    def local(self) -> Embedder | None:
        """The local fallback model, loaded on first need (None when there is none)."""
        with self._lock:
            if self._local is None and self._local_choice is not None and callable(self._local_choice):
                made = self._local_choice()
                if made.model_id != self.model_id or made.dim != self.dim:
                    raise ConfigError(f"local fallback model {made.model_id!r} ({made.dim}-d) differs from the "
                                      f"workers' {self.model_id!r} ({self.dim}-d)", model_id=made.model_id)
                self._local = made
            return self._local

    # --- the round trip -------------------------------------------------------------------

    def workers_alive(self) -> dict[str, dict[str, Any]]:
        """Heartbeat info of the live workers (``BackendUnavailable`` when Redis is down)."""
        try:
            return live_workers(self.client, self.names)
        except redis_errors() as exc:
            raise BackendUnavailable(f"Redis at {self.url or 'the given client'} is unreachable: {exc}",
                                     url=self.url) from exc

    def _check_workers(self) -> None:
        now = time.monotonic()
        with self._lock:
            checked_at, ok = self._workers_checked
        if ok and now - checked_at < _WORKER_CHECK_TTL:
            return
        alive = self.workers_alive()
        models = {str(info.get("model")) for info in alive.values()}
        if not alive:
            raise BackendUnavailable(f"no embedding worker is serving {self.names.queue}", queue=self.names.queue)
        if self.model_id not in models:
            raise ConfigError(f"the workers on {self.names.queue} run {sorted(models)}, not {self.model_id!r}",
                              queue=self.names.queue, models=sorted(models))
        with self._lock:
            self._workers_checked = (now, True)

    def embed_remote(self, texts: Sequence[str], *, timeout: float, single: bool = False,
                     cancelled: Callable[[], bool] | None = None) -> Vectors:
        """Send ``texts`` to the workers and gather their vectors, in order; ``timeout`` is the longest
        wait with no answer arriving. ``single`` uses the seed's one-text form. ``cancelled``: checked
        about once a second while waiting; when true the tasks are taken back and the call fails."""
        texts = list(texts)
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        try:
            self._check_workers()
            return self._round_trip(texts, timeout, single, cancelled)
        except redis_errors() as exc:
            self._count("failures")
            with self._lock:
                self._workers_checked = (0.0, False)
            raise BackendUnavailable(f"Redis at {self.url or 'the given client'} failed: {exc}", url=self.url) from exc
        except (BackendUnavailable, ConfigError):
            self._count("failures")
            with self._lock:
                self._workers_checked = (0.0, False)
            raise

    def _round_trip(self, texts: list[str], timeout: float, single: bool,
                    cancelled: Callable[[], bool] | None) -> Vectors:
        reply_to = self.names.new_reply_key()
        expires = time.time() + timeout if single else None  # a query nobody waits for is not worth embedding
        tasks = [new_task(texts[i:i + self.task_size], reply_to, single=single and len(texts) == 1,
                          model=self.model_id, expires_at=expires) for i in range(0, len(texts), self.task_size)]
        start = {t.task_id: n * self.task_size for n, t in enumerate(tasks)}
        size = {t.task_id: len(t.contents) for t in tasks}
        encoded = [encode_task(t) for t in tasks]
        out = np.empty((len(texts), self.dim), dtype=np.float32)
        waiting = set(start)
        self.client.lpush(self.names.queue, *encoded)
        self._count("requests")
        try:
            deadline = time.monotonic() + timeout
            while waiting:
                left = deadline - time.monotonic()
                if cancelled is not None and cancelled():
                    self._give_up(encoded)
                    raise BackendUnavailable("embedding cancelled while waiting for the workers")
                if left <= 0:
                    self._give_up(encoded)
                    raise BackendUnavailable(f"no answer from the embedding workers within {timeout:g} s "
                                             f"({len(waiting)} of {len(tasks)} tasks unanswered)",
                                             queue=self.names.queue)
                got = self.client.blpop([reply_to], timeout=max(0.01, min(left, 1.0)))
                if got is None:
                    continue
                reply = decode_reply(got[1])
                if reply.task_id not in waiting:
                    self._count("duplicates")  # answered twice (a slow worker was reaped): keep the first
                    continue
                if reply.model != self.model_id:
                    raise ConfigError(f"worker {reply.worker} answered with model {reply.model!r}, not "
                                      f"{self.model_id!r}: vectors refused", worker=reply.worker, model=reply.model)
                if reply.error is not None or reply.vectors is None:
                    raise BackendUnavailable(f"worker {reply.worker} failed task {reply.task_id}: {reply.error}",
                                             worker=reply.worker, task_id=reply.task_id)
                n = size[reply.task_id]
                if reply.vectors.shape != (n, self.dim):
                    raise BackendUnavailable(f"worker {reply.worker} sent {reply.vectors.shape} vectors, expected "
                                             f"({n}, {self.dim})", worker=reply.worker)
                out[start[reply.task_id]:start[reply.task_id] + n] = reply.vectors
                waiting.discard(reply.task_id)
                deadline = time.monotonic() + timeout  # an answer arrived: the workers are alive
        except InvalidInput as exc:
            raise BackendUnavailable(f"malformed reply on {reply_to}: {exc}", reply_to=reply_to) from exc
        finally:
            self.client.delete(reply_to)
        self._count("texts", len(texts))
        return out

    def _give_up(self, encoded: list[str]) -> None:
        """Take the tasks nobody took back off the queue, and requeue those of dead workers."""
        pipe = self.client.pipeline(transaction=False)
        for raw in encoded:
            pipe.lrem(self.names.queue, 1, raw)
        pipe.execute()
        reap(self.client, self.names)

    def _count(self, key: str, n: int = 1) -> None:
        with self._lock:
            self.stats[key] += n


def _checked(texts: Sequence[str]) -> list[str]:
    if isinstance(texts, str):
        raise InvalidInput("embed_batch takes a sequence of strings, not one string")
    out = list(texts)
    if bad := [i for i, t in enumerate(out) if not isinstance(t, str)]:
        raise InvalidInput(f"embed_batch takes strings only; positions {bad[:5]} are not", positions=bad)
    return out
