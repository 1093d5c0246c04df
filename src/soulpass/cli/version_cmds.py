"""``log``, ``diff``, ``show``, ``rollback`` and ``schema export``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click
from rich.json import JSON

from soulpass.cli.output import console, emit_json, table
from soulpass.cli.state import State, account_option
from soulpass.consolidation.internals import personal_diff
from soulpass.consolidation.log_summary import added_counts, refused_counts
from soulpass.consolidation.rules import Rules
from soulpass.prose import JournalEntry
from soulpass.records import (
    DOCUMENT_MODELS,
    RECORD_MODELS,
    BufferEvent,
    CoreProposal,
    MasterState,
    SemanticCandidate,
    SessionBuffer,
)
from soulpass.store.fsio import atomic_write

__all__ = ["COMMANDS"]

json_option = click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")


def _added(entry: dict[str, Any]) -> str:
    return ", ".join(f"{n} {k}" for k, n in added_counts(entry).items()) or "-"


@click.command("log")
@account_option
@click.option("--limit", "-n", type=int, default=None, help="Only the last N versions.")
@json_option
@click.pass_obj
def log(state: State, account: str, limit: int | None, as_json: bool) -> None:
    """The version log: one row per version, newest last. A version whose copies the account does not
    hold (imported from a passport without history) says "history not carried"."""
    acct = state.account(account)
    entries = acct.log()
    floor = acct.history_floor() or 0
    if limit is not None:
        entries = entries[-limit:]
    if as_json:
        emit_json([e.to_json() for e in entries])
        return
    rows = []
    for entry in entries:
        e = entry.to_json()  # the summaries read what each kind of version logs
        note = []
        if e.get("rebased"):
            note.append(f"rebased {e['rebased']['from']}→{e['rebased']['onto']}")
        if e.get("rolled_back_to") is not None:
            note.append(f"rollback to {e['rolled_back_to']}")
        if e.get("conflicts"):
            note.append(f"{len(e['conflicts'])} conflict(s)")
        if e.get("superseded"):
            note.append(f"{len(e['superseded'])} superseded")
        note += [f"{n} {what}" for what, n in refused_counts(e).items()]
        if int(e["version"]) < floor:
            note.append("history not carried")
        rows.append((e["version"], e.get("kind", ""), e["timestamp"][:19], e.get("source_sandbox") or "",
                     e.get("sandbox_name") or "", _added(e), "; ".join(note)))
    table(f"Versions of {account}", ["version", "kind", "time (UTC)", "sandbox", "name", "added", "notes"], rows)


_DOC_SIGN = {"created": "+", "changed": "~", "removed": "-"}


def _document_row(doc: dict[str, Any]) -> tuple[str, str]:
    """``~ changed | core/10_state/mood_state.json: +data.joy, ~data.calm``."""
    inside = [f"{sign}{k}" for sign, name in (("+", "added"), ("~", "changed"), ("-", "removed"))
              for k in doc["keys"][name]]
    shown = ", ".join(inside[:8]) + (f" … (+{len(inside) - 8})" if len(inside) > 8 else "")
    return f"{_DOC_SIGN[doc['change']]} {doc['change']}", f"{doc['path']}: {shown}" if shown else doc["path"]


@click.command("diff")
@click.argument("a", type=int)
@click.argument("b", type=int)
@account_option
@click.option("--internal", is_flag=True,
              help="Also list the knowledge graph's own files (derived from the facts, rewritten by every "
                   "fact change).")
@json_option
@click.pass_obj
def diff(state: State, a: int, b: int, account: str, internal: bool, as_json: bool) -> None:
    """What changed from version A to version B: records added, superseded, replaced and retired;
    documents created, changed and removed, with the keys that changed inside them. The knowledge
    graph's own files are left out of the table unless --internal (--json gives everything)."""
    d = state.account(account).diff(a, b).to_json()
    if as_json:  # for machines: the library's whole answer
        emit_json(d)
        return
    hidden = 0
    if not internal:
        d, hidden = personal_diff(d)
    rows: list[tuple[str, str]] = []
    for kind, ids in d["added"].items():
        shown = ", ".join(ids[:6]) + (f" … (+{len(ids) - 6})" if len(ids) > 6 else "")
        rows.append((f"+ {len(ids)} {kind}", shown))
    for s in d["superseded"]:
        rows.append(("~ superseded", f"{s['fact']} by {s['by']}"))
    rows += [_document_row(doc) for doc in d["documents"]]
    documents = {doc["path"] for doc in d["documents"]}  # shown with their keys: not again as paths
    for path in d["replaced"]:
        if path not in documents:
            rows.append(("~ replaced", path))
    for path in d["retired"]:
        if path not in documents:
            rows.append(("- retired", path))
    for r in d["rebases"]:
        rows.append(("rebase", f"version {r['version']}: sandbox from {r['from']} onto {r['onto']}"))
    table(f"Diff {a} → {b}", ["change", "what"], rows)
    if hidden:
        console.print(f"{hidden} internal change{'s' if hidden != 1 else ''} of the knowledge graph's files hidden "
                      "(--internal lists them)")


@click.command("show")
@click.argument("ref")
@account_option
@click.option("--at", type=int, default=None, help="Read as of this version (default HEAD).")
@json_option
@click.pass_obj
def show(state: State, ref: str, account: str, at: int | None, as_json: bool) -> None:
    """Show a record (EP_…, TU_…, TL_…, SF_…, SR_…) or a document (core, profile, gks, state:NAME)."""
    value = state.account(account).show(ref, at).model_dump(mode="json")
    if as_json or not console.is_terminal:  # piped or redirected: valid JSON, no line cut inside a string
        emit_json(value)
    else:
        console.print(JSON(json.dumps(value, ensure_ascii=False)), soft_wrap=True)


@click.command("rollback")
@click.argument("version", type=int)
@account_option
@json_option
@click.pass_obj
def rollback(state: State, version: int, account: str, as_json: bool) -> None:
    """Commit a new version whose content equals VERSION (nothing is destroyed)."""
    new = state.account(account).rollback(version)
    if as_json:
        emit_json({"version": new, "equals": version})
    else:
        console.print(f"version [bold]{new}[/] now equals version {version}")


@click.group()
def schema() -> None:
    """JSON Schemas of the records and documents."""


SCHEMA_MODELS: dict[str, Any] = {
    **{f"record.{k}": m for k, m in RECORD_MODELS.items()},
    "record.journal": JournalEntry,  # front matter + text of a prose record (Markdown on disk)
    **{f"document.{k}": m for k, m in DOCUMENT_MODELS.items()},
    "buffer.event": BufferEvent,
    "buffer.semantic_candidate": SemanticCandidate,
    "buffer.core_proposal": CoreProposal,
    "view.session_buffer": SessionBuffer,
    "view.master_state": MasterState,
    "config.rules": Rules,
}


@schema.command("export")
@click.argument("directory", type=click.Path(file_okay=False, path_type=Path))
def schema_export(directory: Path) -> None:
    """Write one JSON Schema file per model into DIRECTORY."""
    for name, model in SCHEMA_MODELS.items():
        body = json.dumps(model.model_json_schema(), indent=2, sort_keys=True) + "\n"
        atomic_write(directory / f"{name}.schema.json", body.encode("utf-8"))
    console.print(f"wrote {len(SCHEMA_MODELS)} schemas to {directory}")


COMMANDS = [log, diff, show, rollback, schema]
