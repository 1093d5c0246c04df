"""``index drain``: embed what waits in the embedding backlog, locally or on the Redis workers."""

from __future__ import annotations

import click
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from soulpass.cli.output import console
from soulpass.cli.search_cmds import index
from soulpass.cli.state import State, account_option
from soulpass.embed.base import Embedder
from soulpass.embed.remote import RemoteEmbedder
from soulpass.embed.wire import DEFAULT_QUEUE, QueueNames
from soulpass.engine import EmbedderChoice
from soulpass.errors import ConfigError
from soulpass.index.backlog import indexing_embed

__all__ = ["COMMANDS"]


@index.command("drain")
@account_option
@click.option("--redis", "redis_url", envvar="SOULPASS_REDIS_URL", default=None,
              help="Embed on the workers of this Redis (env SOULPASS_REDIS_URL); default: the local model.")
@click.option("--queue", default=DEFAULT_QUEUE, show_default=True, envvar="SOULPASS_QUEUE",
              help="The workers' queue (env SOULPASS_QUEUE).")
@click.option("--timeout", type=click.FloatRange(min=0.1), default=60.0, show_default=True,
              help="Longest wait for a worker's answer before giving up (the backlog is kept).")
@click.pass_obj
def index_drain(state: State, account: str, redis_url: str | None, queue: str, timeout: float) -> None:
    """Embed the records waiting in the embedding backlog (background indexing catches up the same way)."""
    embedder: EmbedderChoice = "auto"
    if redis_url:
        embedder = RemoteEmbedder(redis_url, names=QueueNames(queue), index_timeout=timeout)
    idx = state.account(account, indexing="deferred", embedder=embedder).index()
    if idx.backlog is None or idx.embedder is None:
        raise ConfigError("nothing embeds here: install the 'embed' extra or pass --redis to use workers")
    model: Embedder = idx.embedder
    with Progress(TextColumn("embedding"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  console=console) as bar:
        task = bar.add_task("drain", total=idx.backlog.pending() or None)

        def progress(done: int, total: int) -> None:
            bar.update(task, completed=done, total=total)

        done = idx.backlog.drain_all(indexing_embed(model), 256, progress)
    console.print(f"embedded {done} record(s) with {model.model_id}; {idx.backlog.pending()} waiting")


COMMANDS: list[click.Command] = []  # ``drain`` joins the ``index`` group
