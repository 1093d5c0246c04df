"""Redis mechanics shared by embedding clients and workers: connecting, the reaper, metrics.

Reliable delivery: a worker moves each task it takes from the queue into its own processing list
(``BLMOVE``), answers, and only then removes it (reply and removal in one ``MULTI``). While it runs
it refreshes a heartbeat key that expires after the *visibility timeout*. The reaper (a Lua script,
so atomic) finds registered workers whose heartbeat has expired and moves their processing lists
back onto the queue: a task taken by a worker that was killed mid-batch is answered by another.
A worker that was only slow may answer a task twice; clients keep the first answer per task id.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from soulpass.embed.wire import QueueNames
from soulpass.errors import BackendUnavailable

__all__ = [
    "QueueMetrics",
    "WorkerInfo",
    "connect",
    "live_workers",
    "prometheus_text",
    "queue_metrics",
    "reap",
    "redis_errors",
]

# KEYS: none (names are derived). ARGV: workers set, processing prefix, heartbeat prefix, queue, queue
# stats, deliveries hash, most deliveries, worker id for error replies, reply ttl.
# A task whose workers died MAX times (it may be what kills them) is answered with an error instead.
_REAP = """
local moved, poisoned = 0, 0
for _, wid in ipairs(redis.call('SMEMBERS', ARGV[1])) do
  if redis.call('EXISTS', ARGV[3] .. wid) == 0 then
    local plist = ARGV[2] .. wid
    while true do
      local raw = redis.call('LPOP', plist)
      if not raw then break end
      local ok, task = pcall(cjson.decode, raw)
      local tid = (ok and type(task) == 'table' and type(task['task_id']) == 'string') and task['task_id'] or raw
      local n = redis.call('HINCRBY', ARGV[6], tid, 1)
      redis.call('EXPIRE', ARGV[6], 86400)
      if n >= tonumber(ARGV[7]) and ok and type(task) == 'table' and type(task['reply_to']) == 'string' then
        redis.call('RPUSH', task['reply_to'], cjson.encode({task_id = tid, worker = ARGV[8],
          error = 'task dropped: the workers that took it stopped answering ' .. n .. ' times'}))
        redis.call('EXPIRE', task['reply_to'], tonumber(ARGV[9]))
        redis.call('HDEL', ARGV[6], tid)
        poisoned = poisoned + 1
      else
        redis.call('RPUSH', ARGV[4], raw)
        moved = moved + 1
      end
    end
    redis.call('SREM', ARGV[1], wid)
  end
end
if moved > 0 then redis.call('HINCRBY', ARGV[5], 'requeued', moved) end
if poisoned > 0 then redis.call('HINCRBY', ARGV[5], 'poisoned', poisoned) end
return moved
"""
MAX_DELIVERIES = 5


def redis_errors() -> tuple[type[BaseException], ...]:
    """The redis-py exceptions that mean "the server cannot be used right now"."""
    import redis

    return (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError, redis.exceptions.BusyLoadingError,
            redis.exceptions.ReadOnlyError)


def connect(url: str, *, socket_timeout: float = 10.0) -> Any:
    """A redis-py client for ``url`` (bytes in and out). Connects lazily; raises ``BackendUnavailable``
    when the ``redis`` extra is missing."""
    try:
        import redis
    except ImportError as exc:
        raise BackendUnavailable("the Redis embedding queue needs redis-py: pip install 'soulpass[redis]'",
                                 extra="redis", missing=exc.name) from exc
    if not isinstance(url, str) or not url.startswith(("redis://", "rediss://", "unix://")):
        raise BackendUnavailable(f"not a Redis URL: {url!r} (redis://host:port/db)", url=str(url))
    return redis.Redis.from_url(url, socket_timeout=socket_timeout, socket_connect_timeout=min(socket_timeout, 3.0),
                                health_check_interval=30)


def reap(client: Any, names: QueueNames, *, max_deliveries: int = MAX_DELIVERIES, reply_ttl: int = 300) -> int:
    """Move the tasks of workers whose heartbeat expired back onto the queue; returns how many. A task
    taken ``max_deliveries`` times by workers that then died is answered with an error instead."""
    moved = client.eval(_REAP, 0, names.workers, names.processing_prefix, names.heartbeat_prefix, names.queue,
                        names.queue_stats, names.deliveries, max_deliveries, "reaper", reply_ttl)
    return int(moved or 0)


def live_workers(client: Any, names: QueueNames) -> dict[str, dict[str, Any]]:
    """Heartbeat info of the workers alive now, by worker id."""
    ids = sorted(_text(w) for w in client.smembers(names.workers))
    if not ids:
        return {}
    beats = client.mget([names.heartbeat(w) for w in ids])
    out = {}
    for wid, beat in zip(ids, beats, strict=True):
        if beat is not None:
            try:
                info = json.loads(beat)
            except (UnicodeDecodeError, json.JSONDecodeError):
                info = {}
            out[wid] = info if isinstance(info, dict) else {}
    return out


@dataclass(frozen=True)
class WorkerInfo:
    worker_id: str
    alive: bool
    model: str | None
    host: str | None
    pid: int | None
    in_flight: int
    tasks: int
    texts: int
    batches: int
    errors: int
    expired: int
    busy_seconds: float
    texts_per_second: float


@dataclass(frozen=True)
class QueueMetrics:
    """A snapshot of one queue: waiting, in flight, per-worker counters."""

    queue: str
    depth: int
    in_flight: int
    requeued: int
    workers: tuple[WorkerInfo, ...] = field(default=())
    poisoned: int = 0

    @property
    def alive(self) -> int:
        return sum(1 for w in self.workers if w.alive)

    @property
    def texts_per_second(self) -> float:
        return sum(w.texts_per_second for w in self.workers if w.alive)

    def to_json(self) -> dict[str, Any]:
        return {"queue": self.queue, "depth": self.depth, "in_flight": self.in_flight, "requeued": self.requeued,
                "poisoned": self.poisoned,
                "workers_alive": self.alive, "texts_per_second": self.texts_per_second,
                "workers": [w.__dict__ for w in self.workers]}


def queue_metrics(client: Any, names: QueueNames) -> QueueMetrics:
    """Read the queue's depth, in-flight tasks and the counters of every worker registered now or
    seen in the last week (a dead worker's counters stay: its answers happened)."""
    pattern = "".join(f"\\{c}" if c in "*?[]\\" else c for c in names.stats_prefix) + "*"
    seen = {_text(w) for w in client.smembers(names.workers)}
    seen |= {_text(key)[len(names.stats_prefix):] for key in client.scan_iter(match=pattern, count=1000)}
    ids = sorted(seen)
    alive = live_workers(client, names)
    pipe = client.pipeline(transaction=False)
    pipe.llen(names.queue)
    pipe.hget(names.queue_stats, "requeued")
    pipe.hget(names.queue_stats, "poisoned")
    for wid in ids:
        pipe.llen(names.processing(wid))
        pipe.hgetall(names.stats(wid))
    got = pipe.execute()
    workers = []
    for n, wid in enumerate(ids):
        in_flight, stats = got[3 + 2 * n], {_text(k): _text(v) for k, v in got[4 + 2 * n].items()}
        beat = alive.get(wid, {})
        workers.append(WorkerInfo(
            worker_id=wid, alive=wid in alive, model=beat.get("model") or stats.get("model"),
            host=beat.get("host"), pid=beat.get("pid"), in_flight=int(in_flight),
            tasks=int(stats.get("tasks", 0)), texts=int(stats.get("texts", 0)), batches=int(stats.get("batches", 0)),
            errors=int(stats.get("errors", 0)), expired=int(stats.get("expired", 0)),
            busy_seconds=float(stats.get("busy_seconds", 0.0)),
            texts_per_second=float(beat.get("texts_per_second", 0.0)) if wid in alive else 0.0))
    return QueueMetrics(queue=names.queue, depth=int(got[0]), in_flight=sum(w.in_flight for w in workers),
                        requeued=int(got[1] or 0), workers=tuple(workers), poisoned=int(got[2] or 0))


def prometheus_text(metrics: QueueMetrics, prefix: str = "soulpass_embed") -> str:
    """The snapshot in the Prometheus text exposition format (what a ``/metrics`` endpoint serves)."""
    q = _label(metrics.queue)
    lines: list[str] = []

    def family(name: str, kind: str, help_: str, samples: list[tuple[str, float]]) -> None:
        lines.append(f"# HELP {prefix}_{name} {help_}")
        lines.append(f"# TYPE {prefix}_{name} {kind}")
        lines.extend(f"{prefix}_{name}{{{labels}}} {_number(value)}" for labels, value in samples)

    family("queue_depth", "gauge", "Tasks waiting in the queue.", [(f'queue="{q}"', metrics.depth)])
    family("in_flight", "gauge", "Tasks taken by a worker and not answered yet.", [(f'queue="{q}"', metrics.in_flight)])
    family("workers_alive", "gauge", "Workers with a live heartbeat.", [(f'queue="{q}"', metrics.alive)])
    family("requeued_total", "counter", "Tasks moved back to the queue from workers that stopped answering.",
           [(f'queue="{q}"', metrics.requeued)])
    family("poisoned_total", "counter", "Tasks answered with an error after killing their workers repeatedly.",
           [(f'queue="{q}"', metrics.poisoned)])
    per_worker = [
        ("tasks_total", "counter", "Tasks answered.", "tasks"),
        ("texts_total", "counter", "Texts embedded.", "texts"),
        ("batches_total", "counter", "Batches run through the model.", "batches"),
        ("errors_total", "counter", "Tasks answered with an error.", "errors"),
        ("expired_total", "counter", "Tasks dropped because nobody waited for them any more.", "expired"),
        ("busy_seconds_total", "counter", "Seconds spent embedding.", "busy_seconds"),
        ("texts_per_second", "gauge", "Recent throughput (last minute).", "texts_per_second"),
        ("worker_in_flight", "gauge", "Tasks this worker holds.", "in_flight"),
    ]
    for name, kind, help_, attr in per_worker:
        family(name, kind, help_, [
            (f'queue="{q}",worker="{_label(w.worker_id)}",model="{_label(w.model or "")}"', getattr(w, attr))
            for w in metrics.workers])
    return "\n".join(lines) + "\n"


def _label(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _number(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else f"{value:.6g}"


def _text(value: Any) -> str:
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)
