"""The embedding worker: take tasks in batches, embed, reply, never lose a task.

One loop iteration: refresh the heartbeat; now and then run the reaper; ``BLMOVE`` one task from
the queue into this worker's processing list (waiting up to ``block`` seconds), then ``LMOVE`` more
without waiting until ``max_texts`` texts are gathered; embed all their texts in one call; in one
``MULTI`` push every reply (with an expiry on the reply list), remove the tasks from the processing
list and count them. A worker killed anywhere before that ``MULTI`` leaves its tasks in the
processing list, and the reaper of any other worker (or client) puts them back on the queue once
the heartbeat has expired (the visibility timeout). SIGTERM/SIGINT stop the loop after the batch in
hand is answered.
"""

from __future__ import annotations

import collections
import json
import logging
import os
import signal
import socket
import time
import uuid
from dataclasses import dataclass
from types import FrameType
from typing import Any

from soulpass.embed.base import Embedder
from soulpass.embed.redis_queue import reap, redis_errors
from soulpass.embed.wire import QueueNames, Task, decode_task, encode_reply, error_reply
from soulpass.errors import InvalidInput

__all__ = ["Worker", "WorkerSettings"]

log = logging.getLogger(__name__)
_STATS_TTL = 7 * 24 * 3600  # a worker's counters outlive it by a week, then vanish


@dataclass(frozen=True)
class WorkerSettings:
    """``visibility``: seconds without a heartbeat after which a worker's tasks go back to the queue
    (must exceed the time one batch takes). ``block``: longest wait for a task per iteration."""

    max_texts: int = 128
    visibility: float = 30.0
    block: float = 1.0
    reap_every: float = 5.0
    reply_ttl: int = 300

    def __post_init__(self) -> None:
        if self.max_texts < 1 or self.visibility <= 0 or self.block <= 0 or self.reply_ttl < 1:
            raise InvalidInput("max_texts, visibility, block and reply_ttl must be positive")
        if self.block * 2 >= self.visibility:
            raise InvalidInput(f"visibility ({self.visibility} s) must be more than twice block ({self.block} s)")


class Worker:
    """Serves one queue with one embedder. ``run()`` until ``stop()`` or a signal."""

    def __init__(self, client: Any, embedder: Embedder, names: QueueNames | None = None,
                 settings: WorkerSettings | None = None, worker_id: str | None = None) -> None:
        self.client = client
        self.embedder = embedder
        self.names = names or QueueNames()
        self.settings = settings or WorkerSettings()
        self.worker_id = worker_id or f"{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:6]}"
        self.processing = self.names.processing(self.worker_id)
        self._stopping = False
        self._started = time.time()
        self._last_reap = 0.0
        self._recent: collections.deque[tuple[float, int]] = collections.deque()
        self.counts = {"tasks": 0, "texts": 0, "batches": 0, "errors": 0, "expired": 0}

    # --- lifecycle ------------------------------------------------------------------------

    def stop(self, *_: Any) -> None:
        """Finish the batch in hand, answer it, then leave (safe to call from a signal handler)."""
        self._stopping = True

    def install_signal_handlers(self) -> None:
        def handler(signum: int, frame: FrameType | None) -> None:
            log.info("signal %d: stopping after the current batch", signum)
            self.stop()

        signal.signal(signal.SIGTERM, handler)
        signal.signal(signal.SIGINT, handler)

    def run(self, *, max_batches: int | None = None) -> None:
        """Serve until stopped (or ``max_batches`` batches). Redis outages are waited out."""
        log.info("worker %s serving %s with %s", self.worker_id, self.names.queue, self.embedder.model_id)
        batches, pause, requeue_own = 0, 0.0, False
        while not self._stopping and (max_batches is None or batches < max_batches):
            try:
                self._heartbeat()
                if requeue_own:  # a batch cut short by an outage: its tasks go back, nothing is lost
                    while self.client.lmove(self.processing, self.names.queue, "LEFT", "RIGHT"):
                        pass
                    requeue_own = False
                if time.monotonic() - self._last_reap >= self.settings.reap_every:
                    self._last_reap = time.monotonic()
                    if moved := reap(self.client, self.names):
                        log.warning("requeued %d task(s) of workers that stopped answering", moved)
                if self.process_once():
                    batches += 1
                pause = 0.0
            except redis_errors() as exc:
                pause, requeue_own = min(5.0, max(0.2, pause * 2)), True
                log.warning("Redis unavailable (%s); retrying in %.1f s", exc, pause)
                time.sleep(pause)
        self._leave()

    def _leave(self) -> None:
        """Deregister; any task still held goes back to the queue first."""
        try:
            while self.client.lmove(self.processing, self.names.queue, "LEFT", "RIGHT"):
                pass
            pipe = self.client.pipeline(transaction=True)
            pipe.srem(self.names.workers, self.worker_id)
            pipe.delete(self.names.heartbeat(self.worker_id))
            pipe.execute()
        except redis_errors() as exc:
            log.warning("could not deregister from Redis: %s (the reaper will requeue)", exc)
        log.info("worker %s stopped after %d task(s)", self.worker_id, self.counts["tasks"])

    def _heartbeat(self) -> None:
        now = time.time()
        while self._recent and self._recent[0][0] < now - 60:
            self._recent.popleft()
        window = max(1.0, min(60.0, now - self._started))
        info = {"worker": self.worker_id, "model": self.embedder.model_id, "dim": self.embedder.dim,
                "pid": os.getpid(), "host": socket.gethostname(), "started_at": self._started, "at": now,
                "max_texts": self.settings.max_texts,
                "texts_per_second": round(sum(n for _, n in self._recent) / window, 3)}
        pipe = self.client.pipeline(transaction=True)
        pipe.set(self.names.heartbeat(self.worker_id), json.dumps(info), px=int(self.settings.visibility * 1000))
        pipe.sadd(self.names.workers, self.worker_id)
        pipe.execute()

    # --- one batch ---------------------------------------------------------------------------

    def process_once(self) -> int:
        """Take up to ``max_texts`` texts' worth of tasks and answer them; returns tasks handled."""
        first = self.client.blmove(self.names.queue, self.processing, self.settings.block, "RIGHT", "LEFT")
        if first is None:
            return 0
        raws: list[bytes] = [first]
        taken: list[tuple[bytes, Task]] = []
        replies: list[tuple[bytes, str | None, str | None]] = []  # raw, reply_to, payload (None: drop)
        texts = 0
        while True:
            raw = raws[-1]
            try:
                task = decode_task(raw)
            except InvalidInput as exc:
                reply_to, task_id = exc.details.get("reply_to"), exc.details.get("task_id")
                payload = error_reply(task_id or "", str(exc), model=self.embedder.model_id, worker=self.worker_id)
                replies.append((raw, reply_to, payload if reply_to else None))
                self.counts["errors"] += 1
            else:
                if task.expires_at is not None and task.expires_at < time.time():
                    replies.append((raw, None, None))
                    self.counts["expired"] += 1
                elif task.model is not None and task.model != self.embedder.model_id:
                    replies.append((raw, task.reply_to, error_reply(
                        task.task_id, f"this worker runs {self.embedder.model_id!r}, not {task.model!r}",
                        model=self.embedder.model_id, worker=self.worker_id)))
                    self.counts["errors"] += 1
                else:
                    taken.append((raw, task))
                    texts += len(task.contents)
            if texts >= self.settings.max_texts:
                break
            more = self.client.lmove(self.names.queue, self.processing, "RIGHT", "LEFT")
            if more is None:
                break
            raws.append(more)
        started = time.monotonic()
        replies += self._embed(taken)
        busy = time.monotonic() - started
        self._answer(replies, busy, sum(len(t.contents) for _, t in taken))
        return len(raws)

    def _embed(self, taken: list[tuple[bytes, Task]]) -> list[tuple[bytes, str | None, str | None]]:
        if not taken:
            return []
        model, me = self.embedder.model_id, self.worker_id
        try:
            vectors = self.embedder.embed_batch([text for _, task in taken for text in task.contents])
        except Exception as exc:  # one bad task must not sink the others: embed them one by one
            log.warning("batch of %d task(s) failed (%s); retrying task by task", len(taken), exc)
            out: list[tuple[bytes, str | None, str | None]] = []
            for raw, task in taken:
                try:
                    reply = encode_reply(task, self.embedder.embed_batch(list(task.contents)), model=model, worker=me)
                except Exception as one:
                    reply = error_reply(task.task_id, f"embedding failed: {one}", model=model, worker=me)
                    self.counts["errors"] += 1
                out.append((raw, task.reply_to, reply))
            self.counts["batches"] += 1
            return out
        row = 0
        out = []
        for raw, task in taken:
            n = len(task.contents)
            out.append((raw, task.reply_to, encode_reply(task, vectors[row:row + n], model=model, worker=me)))
            row += n
        self.counts["batches"] += 1
        return out

    def _answer(self, replies: list[tuple[bytes, str | None, str | None]], busy: float, texts: int) -> None:
        """Replies, removal from the processing list and counters: all or nothing."""
        tasks = sum(1 for _, reply_to, payload in replies if reply_to and payload)
        self.counts["tasks"] += tasks
        self.counts["texts"] += texts
        self._recent.append((time.time(), texts))
        stats = self.names.stats(self.worker_id)
        pipe = self.client.pipeline(transaction=True)
        for raw, reply_to, payload in replies:
            if reply_to and payload:
                pipe.rpush(reply_to, payload)
                pipe.expire(reply_to, self.settings.reply_ttl)
            pipe.lrem(self.processing, 1, raw)
        pipe.hset(stats, mapping={"model": self.embedder.model_id, **{k: v for k, v in self.counts.items()}})
        pipe.hincrbyfloat(stats, "busy_seconds", busy)
        pipe.expire(stats, _STATS_TTL)
        pipe.execute()
