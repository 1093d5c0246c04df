"""``search`` and ``index status|rebuild``."""

from __future__ import annotations

import contextlib
import time
from dataclasses import asdict
from datetime import datetime
from typing import TYPE_CHECKING

import click
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TaskID, TextColumn, TimeElapsedColumn

from soulpass.cli.output import console, emit_json, err_console, table
from soulpass.cli.state import State, account_option
from soulpass.consolidation.internals import people_kinds
from soulpass.consolidation.log_summary import session_names
from soulpass.index.relevance import relevance
from soulpass.integrity import reset_index

if TYPE_CHECKING:
    from soulpass.index.account import AccountIndex
    from soulpass.index.search import Hit

__all__ = ["COMMANDS"]

json_option = click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")


@click.command("search")
@click.argument("query")
@account_option
@click.option("-k", "k", type=int, default=10, show_default=True, help="How many results.")
@click.option("--kind", "kinds", multiple=True,
              type=click.Choice(["episode", "turn_user", "turn_llm", "fact", "sensory", "journal"]),
              help="Only these kinds.")
@click.option("--agent", help="Only what this agent or speaker wrote.")
@click.option("--tag", "tags", multiple=True, help="Only records with any of these tags.")
@click.option("--since", type=click.DateTime(), help="Event time from (inclusive, UTC).")
@click.option("--until", type=click.DateTime(), help="Event time until (exclusive, UTC).")
@click.option("--session", "session_id", help="Only this session (sandbox id).")
@click.option("--persona", "persona_id", help="Only episodes of this persona.")
@click.option("--event", "event_id", help="Only episodes of this event.")
@click.option("--source", help="Only what this importer or tool brought in (tag source:SOURCE: chatgpt, claude, "
                               "mem0, basic-memory, jsonl).")
@click.option("--at", type=int, default=None, help="Search the memory as it was at this version.")
@click.option("--rerank", is_flag=True, help="Re-order the best 30 with the cross-encoder (extra 'rerank').")
@click.option("--min-score", type=click.FloatRange(0.0, 1.0), default=None,
              help="Only hits of at least this relevance (0 to 1: the share of the query's words a hit holds, "
                   "or its cosine similarity, the larger).")
@json_option
@click.pass_obj
def search(state: State, query: str, account: str, k: int, kinds: tuple[str, ...], agent: str | None,
           tags: tuple[str, ...], since: datetime | None, until: datetime | None, session_id: str | None,
           persona_id: str | None, event_id: str | None, source: str | None, at: int | None, rerank: bool,
           min_score: float | None, as_json: bool) -> None:
    """Hybrid search (full text, and vectors with the 'embed' extra) over an account's committed memory.

    Without the 'embed' extra it is full text only, and a search that finds fewer than K hits says so."""
    acct = state.account(account, rerank=rerank)
    hits = acct.search(query, k, kinds=kinds, agent=agent, tags=tags, since=since, until=until,
                       session_id=session_id, persona_id=persona_id, event_id=event_id, source=source, at=at,
                       min_score=min_score)
    names = session_names(e.to_json() for e in acct.log()) if hits else {}
    if as_json:
        emit_json([{"id": h.id, "kind": h.kind, "version": h.version, "path": h.path,
                    "relevance": relevance(query, h), "score": h.score, "parts": h.parts, "text": h.text,
                    "event_time": h.row.event_time.isoformat() if h.row and h.row.event_time else None,
                    "agent": h.row.agent if h.row else None, "session_id": _session(h),
                    "session_name": names.get(_session(h) or "")} for h in hits])
        return
    table(f"{len(hits)} results for {query!r}",
          ["#", "id", "kind", "when", "who", "text", "from", "relevance", "score"], [
        (i, h.id, h.kind, h.row.event_time.date() if h.row and h.row.event_time else "",
         h.row.agent if h.row else "", h.text[:90] + ("…" if len(h.text) > 90 else ""),
         names.get(_session(h) or "", _session(h) or ""), f"{relevance(query, h):.2f}", f"{h.score:.4f}")
        for i, h in enumerate(hits, 1)])
    if hits.note and (len(hits) < k or not acct.sp.embedder_missing):  # a core-only install: where it matters
        console.print(f"note: {hits.note}", markup=False)


def _session(hit: Hit) -> str | None:
    """The sandbox (conversation) a hit was written in."""
    return hit.row.session_id if hit.row else None


@click.group("index")
def index() -> None:
    """The derived index: status and rebuild from the files."""


@index.command("status")
@account_option
@click.option("--internal", is_flag=True, help="Also count the knowledge graph's own documents (gks, gks_shard, "
                                               "gks_functional) among the records in force.")
@json_option
@click.pass_obj
def index_status(state: State, account: str, internal: bool, as_json: bool) -> None:
    """How far the index follows the store, what it holds, and the embedding backlog."""
    idx = state.account(account, indexing="deferred").index()  # report the backlog, don't drain it
    st, fulltext = idx.status(), idx.catalog.status().fulltext
    if as_json:
        emit_json({**asdict(st), "fulltext": fulltext})
        return
    table(f"Index of {account}", ["what", "value"], [
        ("store version", st.store_version), ("catalog version", st.catalog_version), ("full text", fulltext),
        ("catalog rows", st.rows), ("vectors", st.vectors), ("embedder", st.embedder or "none (full text only)"),
        ("embedding backlog (not embedded yet)", st.pending_embeddings),
        *((f"in force: {kind}", n) for kind, n in (st.in_force if internal else people_kinds(st.in_force)).items()),
    ])


@index.command("rebuild")
@account_option
@click.option("--graph", "graph_only", is_flag=True,
              help="Only rebuild the vector graph from the stored vectors (nothing is embedded again): "
                   "a graph built by an earlier release searches with more candidates.")
@json_option
@click.pass_obj
def index_rebuild(state: State, account: str, graph_only: bool, as_json: bool) -> None:
    """Recreate the catalog from the files (identical to incremental indexing) and re-embed."""
    acct = state.account(account)
    if graph_only:
        _rebuild_graph(acct.index(), account, as_json)
        return
    out = err_console if as_json else console  # with --json, stdout holds the JSON only
    reset = reset_index(acct)
    if reset:
        out.print("the catalog could not be opened: deleted it (it is derived from the files)")
    idx = acct.index()
    with Progress(TextColumn("rebuilding"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  console=out) as bar:
        task = bar.add_task("rebuild", total=None)

        def progress(done: int, total: int) -> None:
            bar.update(task, completed=done, total=total or None)

        report = idx.rebuild(progress)
    if as_json:
        emit_json({"version": report.to_version, "rows": report.rows_added, "catalog_reset": reset})
    else:
        console.print(f"catalog rebuilt at version {report.to_version}: {report.rows_added} rows")


def _rebuild_graph(idx: AccountIndex, account: str, as_json: bool) -> None:
    """``index rebuild --graph``: the local vector index's graph built again from its rows."""
    graph = idx.graph
    started = time.perf_counter()
    rows = None
    if graph is not None:
        with contextlib.ExitStack() as stack:
            shown: list[tuple[Progress, TaskID]] = []  # a bar once there are rows to add

            def progress(done: int, total: int) -> None:
                if not shown:
                    bar = stack.enter_context(Progress(
                        TextColumn("rebuilding the vector graph"), BarColumn(), MofNCompleteColumn(),
                        TimeElapsedColumn(), console=err_console if as_json else console))
                    shown.append((bar, bar.add_task("graph", total=total)))
                bar, task = shown[0]
                bar.update(task, completed=done, total=total)

            rows = graph.rebuild_graph(progress)
    seconds = round(time.perf_counter() - started, 3)
    if as_json:
        emit_json({"graph_rows": rows, "seconds": seconds})
    elif rows is None:
        console.print(f"{account}: its vector index has no graph to rebuild (no embedder, or another backend)")
    elif rows == 0:
        console.print(f"{account}: too few vectors for a graph (searched exactly): nothing to rebuild")
    else:
        console.print(f"{account}: vector graph rebuilt from the stored vectors: {rows} rows in {seconds:.1f} s")


COMMANDS = [search, index]
