"""``edit``, ``history``, ``forget`` and ``adopt``: correct one memory, read its past, erase it, take
in what was edited by hand."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import click

from soulpass.cli.output import console, emit_json, table
from soulpass.cli.state import State, account_option
from soulpass.errors import InvalidInput
from soulpass.store.fsio import json_or_text

if TYPE_CHECKING:
    from soulpass.engine.views import FieldChanges

__all__ = ["COMMANDS"]

json_option = click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")


def _fields(pairs: tuple[str, ...]) -> dict[str, Any]:
    """``FIELD=VALUE`` pairs; a value that parses as JSON is taken as JSON (numbers, lists), else as text."""
    out: dict[str, Any] = {}
    for pair in pairs:
        name, sep, raw = pair.partition("=")
        if not sep or not name:
            raise InvalidInput(f"--set needs FIELD=VALUE, got {pair!r}", field="set")
        out[name] = json_or_text(raw, f"--set {name}")
    return out


@click.command("edit")
@click.argument("record_id")
@click.option("--set", "pairs", multiple=True, metavar="FIELD=VALUE", help="A field to change (repeatable).")
@click.option("--reason", default="", help="Why, kept in the version log.")
@account_option
@json_option
@click.pass_obj
def edit(state: State, record_id: str, pairs: tuple[str, ...], reason: str, account: str, as_json: bool) -> None:
    """Commit a version in which RECORD_ID carries the new fields (a fact is superseded by a new one)."""
    acct = state.account(account)
    version = acct.edit(record_id, reason=reason, **_fields(pairs))
    now = acct.log()[-1].edited_as or record_id
    if as_json:
        emit_json({"version": version, "record": record_id, "now": now})
    else:
        console.print(f"version [bold]{version}[/]: {record_id} edited" + (f", now {now}" if now != record_id else ""))


def _summary(changes: FieldChanges | None) -> str:
    if changes is None:
        return "(removed)"
    parts = [f"+{k}" for k in changes.added] + [f"~{k}: {v[0]!r} → {v[1]!r}" for k, v in changes.changed.items()]
    return "; ".join(parts + [f"-{k}" for k in changes.removed]) or "-"


@click.command("history")
@click.argument("record_id")
@account_option
@json_option
@click.pass_obj
def history(state: State, record_id: str, account: str, as_json: bool) -> None:
    """Every version that wrote RECORD_ID, oldest first, with the fields each one changed."""
    rows = state.account(account).history(record_id)
    if as_json:
        emit_json([r.to_json() for r in rows])
        return
    table(f"History of {record_id}", ["version", "kind", "time (UTC)", "changes"],
          [(r.version, r.kind, (r.timestamp or "")[:19], _summary(r.changes)) for r in rows])


@click.command("forget")
@click.argument("record_ids", nargs=-1)
@click.option("--subject", default=None, help="Forget every fact about this subject.")
@click.option("--query", default=None, help="Forget what a search for this finds (the top --k hits).")
@click.option("--k", type=int, default=10, show_default=True, help="How many hits of --query.")
@click.option("--reason", required=True, help="Why, kept in the tombstone.")
@click.option("--by", default=None, help="Who asked, kept in the tombstone.")
@click.option("--dry-run", is_flag=True, help="List what would be forgotten; write nothing.")
@account_option
@json_option
@click.pass_obj
def forget(state: State, record_ids: tuple[str, ...], subject: str | None, query: str | None, k: int, reason: str,
           by: str | None, dry_run: bool, account: str, as_json: bool) -> None:
    """Erase RECORD_IDS (or a subject's facts, or a query's hits) from HEAD, history and the index.

    Old versions then show "[forgotten]" in their place; a tombstone version says who, when, why.
    On PostgreSQL the touched tables are then rewritten (VACUUM FULL) so no relation file holds the
    content; its WAL still does until recycled, and backups made before still do: see
    docs/passport.md "Forget" for how to finish. Killed midway: run it again (audit flags it)."""
    result = state.account(account).forget(record_ids, subject=subject, query=query, k=k, reason=reason, by=by,
                                           dry_run=dry_run)
    if as_json:
        emit_json(result.to_json())
        return
    verb = "would forget" if dry_run else f"version [bold]{result.version}[/]: forgot"
    console.print(f"{verb} {len(result.ids)} record(s): {', '.join(result.ids)}")
    for repo in result.backups_holding:
        console.print(f"[yellow]the backup at {repo} still holds the content in its earlier commits[/]")


@click.command("adopt")
@account_option
@click.option("--dry-run", is_flag=True, help="List the files edited by hand and what changed; write nothing.")
@json_option
@click.pass_obj
def adopt(state: State, account: str, dry_run: bool, as_json: bool) -> None:
    """Commit the files edited by hand (see `audit`) as new versions, the originals kept in the history."""
    rows = state.account(account).adopt(dry_run=dry_run)
    if as_json:
        emit_json(rows)
        return
    if not rows:
        console.print("no file was edited by hand")
        return
    table("Files edited by hand" + (" (dry run)" if dry_run else ""), ["version", "id", "fields", "key", "note"],
          [(r["version"] or "", r["id"], ", ".join(r["fields"]), r["key"], r.get("note", "")) for r in rows])


@click.command("retag")
@account_option
@click.option("--dry-run", is_flag=True, help="List the turns whose tags would change; write nothing.")
@json_option
@click.pass_obj
def retag(state: State, account: str, dry_run: bool, as_json: bool) -> None:
    """Read again which turns give a standing instruction or preference; commit the tags that changed."""
    rows = state.account(account).retag(dry_run=dry_run)
    if as_json:
        emit_json(rows)
        return
    if not rows:
        console.print("every turn's standing tags are as the reader reads them now")
        return
    table("Standing tags read again" + (" (dry run)" if dry_run else ""), ["version", "id", "added", "removed"],
          [(r["version"] or "", r["id"], ", ".join(r["added"]), ", ".join(r["removed"])) for r in rows])


COMMANDS = [edit, history, forget, adopt, retag]
