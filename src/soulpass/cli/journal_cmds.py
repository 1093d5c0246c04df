"""``journal add|list|show``, ``patterns`` and ``index export --format mira`` (``import mira`` is in imp_cmds)."""

from __future__ import annotations

import sys
from datetime import datetime
from pathlib import Path

import click

from soulpass.cli.output import console, emit_json, table
from soulpass.cli.search_cmds import index
from soulpass.cli.state import State, account_option
from soulpass.errors import InvalidInput
from soulpass.importers.mira import export_mira
from soulpass.prose import ENTRY_TYPES, render_markdown

__all__ = ["COMMANDS"]

json_option = click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")


@click.group("journal")
def journal() -> None:
    """Verbatim prose records: journal, experiment, reflection and conversation entries."""


def _decode(raw: bytes, source: str) -> str:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InvalidInput(f"{source} is not valid UTF-8 (byte {exc.start})", field="text", path=source) from None


@journal.command("add")
@account_option
@click.argument("text", required=False)
@click.option("--file", "file", type=click.Path(dir_okay=False, exists=True, path_type=Path),
              help="Read the entry's text from this file ('-' or no TEXT: standard input).")
@click.option("--type", "type_", type=click.Choice(list(ENTRY_TYPES)), default="journal", show_default=True,
              help="Entry type; decides the folder under core/04_Journal/.")
@click.option("--title", default="", help="Title (file name); default: the first heading or sentence.")
@click.option("--tag", "tags", multiple=True, help="A tag (repeatable).")
@click.option("--insight", "core_insight", default="", help="The core insight (what the semantic hash is of).")
@click.option("--summary", "brief_summary", default="", help="A 1-2 sentence summary; default: the first sentences.")
@click.option("--at", "timestamp", type=click.DateTime(), default=None, help="When it happened (UTC); default now.")
@click.option("--agent", default=None, help="The agent that wrote it.")
@json_option
@click.pass_obj
def journal_add(state: State, account: str, text: str | None, file: Path | None, type_: str, title: str,
                tags: tuple[str, ...], core_insight: str, brief_summary: str, timestamp: datetime | None,
                agent: str | None, as_json: bool) -> None:
    """Add one entry in one step (open a sandbox, write it, archive). An exact repeat is not stored:
    the existing entry is named instead."""
    if file is not None:
        text = _decode(file.read_bytes(), str(file))
    elif text is None or text == "-":
        text = _decode(sys.stdin.buffer.read(), "standard input")
    acct = state.account(account)
    out = acct.journal().add(text, type=type_, title=title, tags=tags, core_insight=core_insight,
                             brief_summary=brief_summary, timestamp=timestamp, agent=agent)
    if as_json:
        emit_json(out)
    elif out["stored"]:
        extra = f" (recurring insight: repeats {out['repeats']})" if out["repeats"] else ""
        console.print(f"version {out['version']}: {out['id']} -> {out['path']}{extra}")
    else:
        console.print(f"not stored: an exact repeat of {out['duplicate_of']} ({out['path']})")


@journal.command("list")
@account_option
@click.option("--tag", "tags", multiple=True, help="Only entries with any of these tags.")
@click.option("--since", type=click.DateTime(), help="From (inclusive, UTC).")
@click.option("--until", type=click.DateTime(), help="Until (exclusive, UTC).")
@click.option("--hash", "semantic_hash", default=None, help="Only entries with this semantic hash.")
@click.option("--type", "type_", type=click.Choice(list(ENTRY_TYPES)), default=None, help="Only this type.")
@json_option
@click.pass_obj
def journal_list(state: State, account: str, tags: tuple[str, ...], since: datetime | None,
                 until: datetime | None, semantic_hash: str | None, type_: str | None, as_json: bool) -> None:
    """Fast lookup by tag, time range, semantic hash and type (from the index), oldest first."""
    items = state.account(account).journal().find(tags=tags, since=since, until=until,
                                                  semantic_hash=semantic_hash, type=type_)
    if as_json:
        emit_json([{"id": i.id, "type": i.type, "path": i.path, "timestamp": i.timestamp, "tags": list(i.tags),
                    "semantic_hash": i.semantic_hash, "version": i.version} for i in items])
        return
    table(f"{len(items)} entries", ["id", "type", "when", "tags", "path", "hash"], [
        (i.id, i.type, i.timestamp.isoformat(timespec="minutes") if i.timestamp else "", ", ".join(i.tags),
         i.path, i.semantic_hash[:12]) for i in items])


@journal.command("show")
@account_option
@click.argument("entry_id")
@click.pass_obj
def journal_show(state: State, account: str, entry_id: str) -> None:
    """Print an entry's file verbatim (front matter and body)."""
    entry, _path = state.account(account).journal().get(entry_id)
    click.echo(render_markdown(entry).decode("utf-8"), nl=False)


@click.command("patterns")
@account_option
@click.option("--threshold", type=float, default=0.85, show_default=True,
              help="Cosine similarity of two core insights' embeddings that counts as the same insight.")
@click.option("--no-similar", is_flag=True, help="Only identical semantic hashes (no embedder needed).")
@json_option
@click.pass_obj
def patterns(state: State, account: str, threshold: float, no_similar: bool, as_json: bool) -> None:
    """Recurring insights over time: identical semantic hashes and near-duplicates by embedding."""
    found = state.account(account).journal().patterns(threshold, similar=not no_similar)
    if as_json:
        emit_json(found.to_json())
        return
    rows = []
    for n, g in enumerate([*found.identical, *found.similar], 1):
        for e in g.entries:
            rows.append((n, g.how, f"{g.similarity:.3f}", e["timestamp"][:10], e["id"], e["path"],
                         e["core_insight"][:60]))
    table(f"{len(found.identical)} identical-hash and {len(found.similar)} similar groups over {found.entries} "
          "entries", ["group", "how", "similarity", "date", "id", "file", "insight"], rows)
    for note in found.notes:
        console.print(f"note: {note}", markup=False)


@index.command("export")
@account_option
@click.argument("file", type=click.Path(path_type=Path))
@click.option("--format", "fmt", type=click.Choice(["mira"]), default="mira", show_default=True,
              help="Export format (the Mira memory_index.json).")
@click.option("--with-files", is_flag=True, help="Copy the Markdown files beside the index (a full Mira folder; "
                                               "FILE is that folder, created if missing, unless it ends in .json).")
@json_option
@click.pass_obj
def index_export(state: State, account: str, file: Path, fmt: str, with_files: bool, as_json: bool) -> None:
    """Write the journal's index in the seed's memory_index.json schema to FILE (or FILE/memory_index.json)."""
    doc = export_mira(state.account(account), file, with_files=with_files)
    if as_json:
        emit_json({"entries": len(doc["entries"]), "format": fmt})
    else:
        console.print(f"{len(doc['entries'])} entries written ({fmt})")


COMMANDS = [journal, patterns]
