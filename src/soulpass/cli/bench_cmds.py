"""``bench locomo``: turn-level evidence retrieval on LoCoMo, through the normal write and search paths."""

from __future__ import annotations

import json
from pathlib import Path

import click
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from soulpass.bench import locomo
from soulpass.cli.main import State
from soulpass.cli.output import console, table
from soulpass.store.files.fsio import atomic_write

__all__ = ["COMMANDS"]


@click.group("bench")
def bench() -> None:
    """Benchmarks run through the public engine."""


@bench.command("locomo")
@click.option("--data", type=click.Path(exists=True, dir_okay=False, path_type=Path), required=True,
              help="locomo10.json (a list of conversations with QA items and evidence dialog ids).")
@click.option("--out", type=click.Path(dir_okay=False, path_type=Path), required=True,
              help="Where to write the result JSON.")
@click.option("--limit", type=int, default=None, help="Only the first N conversations.")
@click.option("--reuse", is_flag=True, help="Query accounts already ingested in this home instead of failing.")
@click.option("--check-rebuild", is_flag=True,
              help="Also delete each index, rebuild it from the files and compare every query's top 10.")
@click.option("--rerank", is_flag=True, help="Re-order the best 30 with the cross-encoder (extra 'rerank').")
@click.option("--rows", "rows_out", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Also write every question's ranked dialog ids (JSON lines).")
@click.pass_obj
def bench_locomo(state: State, data: Path, out: Path, limit: int | None, reuse: bool, check_rebuild: bool,
                 rerank: bool, rows_out: Path | None) -> None:
    """Each conversation its own account (sessions as sandboxes); every QA item a query.

    Prints and saves Recall@1/5/10/20 and NDCG@10 overall and per category, ingest throughput and
    search latency p50/p95.
    """
    conversations = locomo.load(data)[:limit]
    sp = state.engine(rerank=rerank)
    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  console=console) as bar:
        task = bar.add_task("conversations", total=len(conversations))

        def progress(sample_id: str, done: int, total: int) -> None:
            bar.update(task, completed=done, description=f"done {sample_id}")

        result = locomo.run(sp, conversations, reuse=reuse, check_rebuild=check_rebuild, progress=progress)
    rows = result.pop("_rows")
    atomic_write(out, (json.dumps(result, indent=1) + "\n").encode("utf-8"))
    if rows_out is not None:
        atomic_write(rows_out, "".join(json.dumps(r) + "\n" for r in rows).encode("utf-8"))
    header = ["", "questions", *(f"R@{k}" for k in locomo.KS), "NDCG@10"]
    lines = [("overall", *_cells(result["overall"]))]
    lines += [(name, *_cells(s)) for name, s in result["per_category"].items()]
    table(f"LoCoMo turn retrieval ({result['conversations']} conversations, {result['turns']} turns)", header, lines)
    ing, lat = result["ingest"], result["latency_ms"]
    console.print(f"ingest: {ing['turns']} turns in {ing['seconds']} s ({ing['turns_per_s']} turns/s), "
                  f"indexing {ing['index_seconds']} s; search latency p50 {lat['p50']} ms, p95 {lat['p95']} ms")
    if "rebuild" in result:
        console.print(f"rebuild: {result['rebuild']['queries_with_other_top10']} queries with another top 10")
    console.print(f"result written to {out}")


def _cells(s: dict[str, object]) -> list[object]:
    return [s["questions"], *(s[f"recall@{k}"] for k in locomo.KS), s["ndcg@10"]]


COMMANDS = [bench]
