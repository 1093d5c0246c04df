"""``worker`` (run an embedding worker), ``worker status`` and ``worker metrics``."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any, cast

import click

from soulpass.cli.output import console, emit_json, table
from soulpass.embed.redis_queue import connect, prometheus_text, queue_metrics, redis_errors
from soulpass.embed.wire import DEFAULT_QUEUE, DEFAULT_REPLY_PREFIX, QueueNames
from soulpass.errors import BackendUnavailable

__all__ = ["COMMANDS"]

DEFAULT_REDIS = "redis://127.0.0.1:6379/0"


def _queue_options(fn: Callable[..., Any]) -> Callable[..., Any]:
    fn = click.option("--reply-prefix", default=DEFAULT_REPLY_PREFIX, show_default=True,
                      help="Prefix of reply lists (the seed's temp:req:).")(fn)
    fn = click.option("--queue", default=DEFAULT_QUEUE, show_default=True, envvar="SOULPASS_QUEUE",
                      help="Redis list the tasks arrive on (env SOULPASS_QUEUE).")(fn)
    return click.option("--redis", "redis_url", default=DEFAULT_REDIS, show_default=True,
                        envvar="SOULPASS_REDIS_URL", help="Redis URL (env SOULPASS_REDIS_URL).")(fn)


@click.group("worker", invoke_without_command=True)
@_queue_options
@click.option("--batch", "max_texts", type=click.IntRange(1, 4096), default=128, show_default=True,
              help="Most texts embedded in one batch.")
@click.option("--visibility", type=click.FloatRange(min=1.0), default=30.0, show_default=True,
              help="Seconds without a heartbeat after which a worker's unanswered tasks are requeued.")
@click.option("--threads", type=click.IntRange(1, 64), default=2, show_default=True,
              help="Threads the embedded model uses.")
@click.option("--device", type=click.Choice(["auto", "cpu", "cuda"]), default="auto", show_default=True,
              help="Run the model on the GPU (cuda, needs onnxruntime-gpu), the CPU, or the GPU when there is one.")
@click.option("--id", "worker_id", default=None, help="Worker id (default host-pid-random).")
@click.pass_context
def worker(ctx: click.Context, redis_url: str, queue: str, reply_prefix: str, max_texts: int, visibility: float,
           threads: int, device: str, worker_id: str | None) -> None:
    """Run an embedding worker on the Redis queue until SIGTERM (see also `worker status`)."""
    if ctx.invoked_subcommand is not None:
        return
    from soulpass.worker import WorkerSettings, serve
    from soulpass.worker.serve import Device

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    settings = WorkerSettings(max_texts=max_texts, visibility=visibility, block=min(1.0, visibility / 4))
    done = serve(redis_url, names=QueueNames(queue, reply_prefix), settings=settings, threads=threads,
                 device=cast(Device, device), worker_id=worker_id)
    console.print(f"worker {done.worker_id} stopped: {done.counts['tasks']} tasks, {done.counts['texts']} texts")


def _metrics(redis_url: str, queue: str, reply_prefix: str) -> Any:
    try:
        return queue_metrics(connect(redis_url), QueueNames(queue, reply_prefix))
    except redis_errors() as exc:
        raise BackendUnavailable(f"Redis at {redis_url} is unreachable: {exc}", url=redis_url) from exc


@worker.command("status")
@_queue_options
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")
def worker_status(redis_url: str, queue: str, reply_prefix: str, as_json: bool) -> None:
    """Queue depth, tasks in flight, and each worker's model, counters and throughput."""
    m = _metrics(redis_url, queue, reply_prefix)
    if as_json:
        emit_json(m.to_json())
        return
    console.print(f"queue {m.queue}: {m.depth} waiting, {m.in_flight} in flight, {m.alive} worker(s) alive, "
                  f"{m.texts_per_second:.1f} texts/s, {m.requeued} requeued")
    table("Workers", ["worker", "alive", "model", "in flight", "tasks", "texts", "errors", "texts/s"], [
        (w.worker_id, "yes" if w.alive else "NO", w.model, w.in_flight, w.tasks, w.texts, w.errors,
         f"{w.texts_per_second:.1f}") for w in m.workers])


@worker.command("metrics")
@_queue_options
def worker_metrics(redis_url: str, queue: str, reply_prefix: str) -> None:
    """The queue's metrics in the Prometheus text format (what a /metrics endpoint serves)."""
    click.echo(prometheus_text(_metrics(redis_url, queue, reply_prefix)), nl=False)


COMMANDS = [worker]
