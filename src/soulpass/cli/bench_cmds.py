"""``bench locomo``: turn-level evidence retrieval on LoCoMo, through the normal write and search paths."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from soulpass.bench import locomo
from soulpass.bench.context import ContextMeter
from soulpass.cli.output import console, table
from soulpass.cli.state import State
from soulpass.store.fsio import atomic_write

__all__ = ["COMMANDS"]

MAX_FAILURES_SHOWN = 20


@click.group("bench")
def bench() -> None:
    """Benchmarks run through the public engine."""


@bench.command("locomo")
@click.option("--data", type=click.Path(exists=True, dir_okay=False, path_type=Path), required=True,
              help="Conversations in the LoCoMo layout with QA items and evidence dialog ids (locomo10.json, "
                   "beam500k.json).")
@click.option("--out", type=click.Path(dir_okay=False, path_type=Path), required=True,
              help="Where to write the result JSON.")
@click.option("--limit", type=int, default=None, help="Only the first N conversations.")
@click.option("--reuse", is_flag=True, help="Query accounts already ingested in this home instead of failing.")
@click.option("--check-rebuild", is_flag=True,
              help="Also delete each index, rebuild it from the files and compare every query's top 10.")
@click.option("--rerank", is_flag=True, help="Re-order the best 30 with the cross-encoder (extra 'rerank').")
@click.option("--late", is_flag=True,
              help="Score every candidate by late interaction (answerai-colbert-small-v1, extra 'rerank').")
@click.option("--plans", is_flag=True,
              help="Search with every retrieval plan by question shape (person, hop, session units, standing), "
                   "not the engine's search.")
@click.option("--k-context", type=click.IntRange(min=1), default=10, show_default=True,
              help="Hits whose context block is measured in tokens, per question.")
@click.option("--no-embed", is_flag=True, help="Full text only: no embedder (fast ingest; no dense half).")
@click.option("--rows", "rows_out", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Also write every question's ranked dialog ids (JSON lines).")
@click.pass_obj
def bench_locomo(state: State, data: Path, out: Path, limit: int | None, reuse: bool, check_rebuild: bool,
                 rerank: bool, late: bool, plans: bool, k_context: int, no_embed: bool,
                 rows_out: Path | None) -> None:
    """Each conversation its own account (sessions as sandboxes); every QA item a query.

    Prints and saves Recall@1/5/10/20 and NDCG@10 overall and per category, ingest throughput,
    search latency p50/p95, how many questions have each score part beyond the hybrid ones in their
    top 10 (reply, standing, when, late; with --plans person, hop, topic, unit), the context block's
    tokens for the top --k-context hits (mean, p50, p95) and the items that could not be ingested
    (each with the reason; the rest is stored).
    """
    conversations, failures = locomo.read(data)
    conversations = conversations[:limit]
    sp = state.engine(rerank=rerank, late="auto" if late else "none", **({"embedder": "none"} if no_embed else {}))
    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  console=console) as bar:
        task = bar.add_task("conversations", total=len(conversations))

        def progress(sample_id: str, done: int, total: int) -> None:
            bar.update(task, completed=done, description=f"done {sample_id}")

        result = locomo.run(sp, conversations, reuse=reuse, check_rebuild=check_rebuild, progress=progress,
                            meter=ContextMeter(k_context), failures=failures,
                            searcher=locomo.planned_searcher if plans else locomo.default_searcher)
    rows = result.pop("_rows")
    result["search"] = "plans" if plans else "engine"  # planned_search, or Account.search
    atomic_write(out, (json.dumps(result, indent=1) + "\n").encode("utf-8"))
    if rows_out is not None:
        atomic_write(rows_out, "".join(json.dumps(r) + "\n" for r in rows).encode("utf-8"))
    header = ["", "questions", *(f"R@{k}" for k in locomo.KS), "NDCG@10"]
    lines = [("overall", *_cells(result["overall"]))]
    lines += [(name, *_cells(s)) for name, s in result["per_category"].items()]
    title = f"{data.name}: turn retrieval ({result['conversations']} conversations, {result['turns']} turns)"
    table(title, header, lines)
    ing, lat = result["ingest"], result["latency_ms"]
    console.print(f"ingest: {ing['turns']} turns in {ing['seconds']} s ({ing['turns_per_s']} turns/s), "
                  f"indexing {ing['index_seconds']} s; search latency p50 {lat['p50']} ms, p95 {lat['p95']} ms")
    if result["late"]:
        console.print(f"late interaction: {result['late']} (every hit's 'late' part)")
    parts = ", ".join(f"{name} {n}" for name, n in result["parts"].items()) or "none"
    console.print(f"score parts beyond the hybrid ones, questions with one in the top 10: {parts}")
    ctx = result["context_tokens"]
    console.print(f"context block of the top {ctx['k']} hits: mean {ctx['mean']}, p50 {ctx['p50']}, p95 {ctx['p95']} "
                  f"tokens ({ctx['tokenizer']})")
    _print_failures(result["failures"])
    if "rebuild" in result:
        console.print(f"rebuild: {result['rebuild']['queries_with_other_top10']} queries with another top 10")
    console.print(f"result written to {out}")


def _print_failures(failures: dict[str, Any]) -> None:
    console.print(f"items not ingested: {failures['count']}")
    shown = failures["items"][:MAX_FAILURES_SHOWN]
    if shown:
        more = failures["count"] - len(shown)
        table("not ingested" + (f" (first {len(shown)}; all in the result JSON)" if more else ""), ["item", "reason"],
              [(f["item"], f["reason"][:200]) for f in shown])


def _cells(s: dict[str, object]) -> list[object]:
    return [s["questions"], *(s[f"recall@{k}"] for k in locomo.KS), s["ndcg@10"]]


COMMANDS = [bench]
