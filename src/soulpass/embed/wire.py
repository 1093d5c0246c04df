"""The embedding queue's wire format (Volition 7.0, seed 004 §2) and its Redis key names.

A client pushes a task (JSON) onto the list ``queue:gpu_heavy`` and waits on its ``reply_to`` list::

    {"task_id": "<uuid>", "type": "embed", "content": "text", "reply_to": "temp:req:<uuid>"}
    -> {"task_id": "<uuid>", "vector": [0.01, ...], "model": "<model id>", "worker": "<id>"}
    -> {"task_id": "<uuid>", "error": "what went wrong", ...}

The batch variant carries several texts in one task and gets one vector per text, in order::

    {"task_id", "type": "embed_batch", "contents": ["a", "b"], "reply_to", "format": "f32"}
    -> {"task_id", "vectors_f32": "<base64 of len*dim little-endian float32>", "dim": 384, "model", ...}
    -> {"task_id", "vectors": [[...], [...]], "model", ...}        (without "format": "f32")

Optional request fields: ``model`` (the model id the client expects; a worker running another
model answers with an error) and ``expires_at`` (Unix time after which nobody waits for the answer:
a worker drops the task). Replies always name the worker's ``model``: a client refuses vectors of
another model. Several tasks may share one ``reply_to`` list; the ``task_id`` tells them apart.

This module is pure (no Redis): encoding, decoding, validation and the key names.
"""

from __future__ import annotations

import base64
import json
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from soulpass.embed.base import Vectors
from soulpass.errors import InvalidInput

__all__ = [
    "DEFAULT_QUEUE",
    "DEFAULT_REPLY_PREFIX",
    "QueueNames",
    "Reply",
    "Task",
    "decode_reply",
    "decode_task",
    "encode_reply",
    "encode_task",
    "error_reply",
    "new_task",
]

DEFAULT_QUEUE = "queue:gpu_heavy"
DEFAULT_REPLY_PREFIX = "temp:req:"
MAX_TEXTS_PER_TASK = 4096
TaskType = Literal["embed", "embed_batch"]


@dataclass(frozen=True)
class QueueNames:
    """The Redis keys of one queue. Every key but the replies' derives from ``queue``.

    * ``queue``                         tasks waiting (clients LPUSH, workers take from the right)
    * ``<queue>:processing:<worker>``   tasks a worker took and has not answered yet
    * ``<queue>:workers``               set of worker ids that may hold tasks
    * ``<queue>:worker:<worker>``       a worker's heartbeat (JSON, expires after the visibility timeout)
    * ``<queue>:stats:<worker>``        a worker's counters (hash)
    * ``<queue>:stats``                 queue-wide counters (hash: requeued, poisoned)
    * ``<queue>:deliveries``            how often each requeued task was taken by a worker that died
    * ``<reply_prefix><uuid>``          a reply list
    """

    queue: str = DEFAULT_QUEUE
    reply_prefix: str = DEFAULT_REPLY_PREFIX

    def __post_init__(self) -> None:
        for name in ("queue", "reply_prefix"):
            value = getattr(self, name)
            if not isinstance(value, str) or not value or len(value) > 200 or any(c.isspace() for c in value):
                raise InvalidInput(f"{name} must be a non-empty key name without spaces, not {value!r}", field=name)

    @property
    def workers(self) -> str:
        return f"{self.queue}:workers"

    @property
    def processing_prefix(self) -> str:
        return f"{self.queue}:processing:"

    @property
    def heartbeat_prefix(self) -> str:
        return f"{self.queue}:worker:"

    @property
    def stats_prefix(self) -> str:
        return f"{self.queue}:stats:"

    @property
    def queue_stats(self) -> str:
        return f"{self.queue}:stats"

    @property
    def deliveries(self) -> str:
        return f"{self.queue}:deliveries"

    def processing(self, worker_id: str) -> str:
        return self.processing_prefix + worker_id

    def heartbeat(self, worker_id: str) -> str:
        return self.heartbeat_prefix + worker_id

    def stats(self, worker_id: str) -> str:
        return self.stats_prefix + worker_id

    def new_reply_key(self) -> str:
        return f"{self.reply_prefix}{uuid.uuid4()}"


@dataclass(frozen=True)
class Task:
    """One task as a worker sees it: ``contents`` has one text for the single form."""

    task_id: str
    type: TaskType
    contents: tuple[str, ...]
    reply_to: str
    model: str | None = None
    expires_at: float | None = None
    f32: bool = False


@dataclass(frozen=True)
class Reply:
    """A decoded reply: ``vectors`` (one row per text of the task) or ``error``."""

    task_id: str
    model: str | None
    vectors: Vectors | None
    error: str | None
    worker: str | None = None


def new_task(texts: Sequence[str], reply_to: str, *, single: bool = False, model: str | None = None,
             expires_at: float | None = None, f32: bool = True) -> Task:
    """A task for ``texts`` with a fresh uuid: the seed's single form when ``single`` (one text)."""
    contents = tuple(texts)
    if single and len(contents) != 1:
        raise InvalidInput(f"the single form carries one text, not {len(contents)}")
    return Task(task_id=str(uuid.uuid4()), type="embed" if single else "embed_batch", contents=contents,
                reply_to=reply_to, model=model, expires_at=expires_at, f32=f32 and not single)


def encode_task(task: Task) -> str:
    body: dict[str, Any] = {"task_id": task.task_id, "type": task.type}
    if task.type == "embed":
        body["content"] = task.contents[0]
    else:
        body["contents"] = list(task.contents)
    body["reply_to"] = task.reply_to
    if task.model is not None:
        body["model"] = task.model
    if task.expires_at is not None:
        body["expires_at"] = task.expires_at
    if task.f32:
        body["format"] = "f32"
    return json.dumps(body, ensure_ascii=False)


def decode_task(raw: str | bytes) -> Task:
    """Parse and check a task; ``InvalidInput`` names what is wrong (``details['reply_to']`` when known)."""
    try:
        body = json.loads(raw)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise InvalidInput(f"task is not JSON: {exc}") from exc
    if not isinstance(body, dict):
        raise InvalidInput("task must be a JSON object")
    reply_to = body.get("reply_to")
    task_id = body.get("task_id")
    where = {"reply_to": reply_to if isinstance(reply_to, str) and reply_to else None,
             "task_id": task_id if isinstance(task_id, str) else None}
    if not isinstance(task_id, str) or not task_id:
        raise InvalidInput("task_id must be a non-empty string", **where)
    if not isinstance(reply_to, str) or not reply_to:
        raise InvalidInput("reply_to must be a non-empty string (a Redis list name)", **where)
    kind = body.get("type")
    if kind == "embed":
        content = body.get("content")
        if not isinstance(content, str):
            raise InvalidInput("an 'embed' task needs 'content': a string", **where)
        contents: tuple[str, ...] = (content,)
    elif kind == "embed_batch":
        raw_contents = body.get("contents")
        if not isinstance(raw_contents, list) or not all(isinstance(c, str) for c in raw_contents):
            raise InvalidInput("an 'embed_batch' task needs 'contents': a list of strings", **where)
        if len(raw_contents) > MAX_TEXTS_PER_TASK:
            raise InvalidInput(f"a task carries at most {MAX_TEXTS_PER_TASK} texts, not {len(raw_contents)}", **where)
        contents = tuple(raw_contents)
    else:
        raise InvalidInput(f"unknown task type {kind!r} (embed or embed_batch)", **where)
    model = body.get("model")
    expires = body.get("expires_at")
    if expires is not None and (isinstance(expires, bool) or not isinstance(expires, int | float)):
        raise InvalidInput("expires_at must be a number (Unix time)", **where)
    return Task(task_id=task_id, type=kind, contents=contents, reply_to=reply_to,
                model=model if isinstance(model, str) else None,
                expires_at=float(expires) if expires is not None else None,
                f32=body.get("format") == "f32")


def encode_reply(task: Task, vectors: Vectors, *, model: str, worker: str) -> str:
    """The answer to ``task``: one vector (single form) or all rows (batch form)."""
    body: dict[str, Any] = {"task_id": task.task_id}
    if task.type == "embed":
        body["vector"] = [float(x) for x in vectors[0]]
    elif task.f32:
        body["vectors_f32"] = base64.b64encode(np.ascontiguousarray(vectors, dtype="<f4").tobytes()).decode("ascii")
        body["dim"] = int(vectors.shape[1])
    else:
        body["vectors"] = [[float(x) for x in row] for row in vectors]
    body["model"] = model
    body["worker"] = worker
    return json.dumps(body)


def error_reply(task_id: str, error: str, *, model: str | None, worker: str) -> str:
    return json.dumps({"task_id": task_id, "error": error, "model": model, "worker": worker})


def decode_reply(raw: str | bytes, expected_rows: int | None = None) -> Reply:
    """Parse a reply; vectors come back as a float32 ``(n, dim)`` array. ``InvalidInput`` when malformed."""
    try:
        body = json.loads(raw)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise InvalidInput(f"reply is not JSON: {exc}") from exc
    if not isinstance(body, dict) or not isinstance(body.get("task_id"), str):
        raise InvalidInput("reply must be a JSON object with a task_id")
    task_id, model, worker = body["task_id"], body.get("model"), body.get("worker")
    model = model if isinstance(model, str) else None
    worker = worker if isinstance(worker, str) else None
    if "error" in body:
        return Reply(task_id, model, None, str(body["error"]), worker)
    if "vector" in body:
        rows = np.asarray([body["vector"]], dtype=np.float32)
    elif "vectors_f32" in body:
        dim = body.get("dim")
        if isinstance(dim, bool) or not isinstance(dim, int) or dim <= 0:
            raise InvalidInput("a vectors_f32 reply needs a positive 'dim'", task_id=task_id)
        data = base64.b64decode(str(body["vectors_f32"]))
        if len(data) % (4 * dim):
            raise InvalidInput(f"vectors_f32 holds {len(data)} bytes, not a whole number of {dim}-d rows",
                               task_id=task_id)
        rows = np.frombuffer(data, dtype="<f4").reshape(-1, dim).astype(np.float32)
    elif "vectors" in body:
        rows = np.asarray(body["vectors"], dtype=np.float32)
    else:
        raise InvalidInput("reply has neither vector(s) nor error", task_id=task_id)
    if rows.ndim != 2 or (expected_rows is not None and rows.shape[0] != expected_rows):
        raise InvalidInput(f"reply has {rows.shape[0] if rows.ndim == 2 else '?'} vectors, expected "
                           f"{expected_rows}", task_id=task_id)
    if not np.all(np.isfinite(rows)):
        raise InvalidInput("reply vectors are not finite", task_id=task_id)
    return Reply(task_id, model, rows, None, worker)
