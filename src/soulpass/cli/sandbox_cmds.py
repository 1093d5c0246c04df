"""``account``, ``sandbox``, ``write``, ``archive`` and ``discard``."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from soulpass.cli.output import console, emit_json, err_console, table
from soulpass.cli.state import State, account_option
from soulpass.engine import AlreadyArchived, AwaitingReview, Committed, Planned, Unchanged
from soulpass.errors import InvalidInput
from soulpass.store.fsio import json_or_text, parse_json

if TYPE_CHECKING:
    from soulpass.consolidation.preview import PreviewItem

__all__ = ["COMMANDS"]

json_option = click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")


def _json_arg(text: str, what: str) -> Any:
    return parse_json(text, what)


def _read_text_file(path: str) -> str:
    raw = sys.stdin.buffer.read() if path == "-" else Path(path).read_bytes()
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InvalidInput(f"{path} is not valid UTF-8 (byte {exc.start})", path=path) from exc


def _read_json_file(path: str) -> Any:
    return _json_arg(_read_text_file(path), path)


# --- account -------------------------------------------------------------------------------

@click.group()
def account() -> None:
    """Create, list and delete accounts."""


@account.command("create")
@click.argument("name")
@json_option
@click.pass_obj
def account_create(state: State, name: str, as_json: bool) -> None:
    """Create account NAME (an empty master at version 0)."""
    acct = state.account(name, create=True)
    if as_json:
        emit_json({"account": acct.name, "version": acct.head(), "home": state.location})
    else:
        console.print(f"account [bold]{acct.name}[/] at version {acct.head()} in {state.location}")


@account.command("list")
@json_option
@click.pass_obj
def account_list(state: State, as_json: bool) -> None:
    """List accounts with their HEAD version."""
    state.check_home()
    sp = state.engine()
    rows = [(name, sp.account(name).head()) for name in sp.accounts()]
    if as_json:
        emit_json([{"account": n, "version": v} for n, v in rows])
    else:
        table("Accounts", ["account", "version"], rows)


# --- sandbox -------------------------------------------------------------------------------

@click.group()
def sandbox() -> None:
    """Open, list, inspect and discard sandboxes."""


@sandbox.command("create")
@click.argument("name")
@account_option
@click.option("--id", "sandbox_id", default=None, help="Choose the sandbox id (default: generated).")
@json_option
@click.pass_obj
def sandbox_create(state: State, name: str, account: str, sandbox_id: str | None, as_json: bool) -> None:
    """Open a sandbox NAME on the account's current version; prints its id."""
    sb = state.account(account).create_sandbox(name, sandbox_id)
    if as_json:
        emit_json(sb.info.to_dict())
    else:
        click.echo(sb.id)


@sandbox.command("list")
@account_option
@click.option("--kept", is_flag=True, help="List the sandboxes kept for their history (archived with items left out).")
@json_option
@click.pass_obj
def sandbox_list(state: State, account: str, kept: bool, as_json: bool) -> None:
    """List live sandboxes (or, with --kept, those kept for their history)."""
    acct = state.account(account)
    infos = acct.kept_sandboxes() if kept else acct.sandboxes()
    if as_json:
        emit_json([i.to_dict() for i in infos])
    else:
        table("Sandboxes", ["sandbox_id", "name", "parent version", "created"],
              [(i.sandbox_id, i.name, i.parent_version, i.created_at.isoformat(timespec="seconds")) for i in infos])


@sandbox.command("show")
@click.argument("sandbox_id")
@account_option
@json_option
@click.pass_obj
def sandbox_show(state: State, sandbox_id: str, account: str, as_json: bool) -> None:
    """Show a sandbox's session buffer (the seed's session-buffer schema)."""
    buf = state.account(account).sandbox(sandbox_id).buffer()
    if as_json:
        emit_json(buf.model_dump(mode="json"))
        return
    table(f"Sandbox {sandbox_id} (parent version {buf.parent_version})", ["part", "count"], [
        ("episodes", len(buf.new_episodes)), ("turns", len(buf.new_turns)),
        ("semantic candidates", len(buf.semantic_candidates)), ("state deltas", len(buf.state_deltas)),
        ("core proposals", len(buf.core_proposals)), ("sensory", len(buf.sensory)),
        ("duration (s)", f"{buf.metadata['duration_seconds']:.0f}"),
    ])


@sandbox.command("history")
@click.argument("sandbox_id")
@account_option
@click.option("--delete", is_flag=True, help="Delete the kept sandbox and what it holds, for good.")
@json_option
@click.pass_obj
def sandbox_history(state: State, sandbox_id: str, account: str, delete: bool, as_json: bool) -> None:
    """Show a kept sandbox's history: each event, archived or excluded (by whom, why), with its text."""
    acct = state.account(account)
    if delete:
        acct.delete_sandbox_history(sandbox_id)
        if as_json:
            emit_json({"sandbox_id": sandbox_id, "status": "deleted"})
        else:
            console.print(f"deleted the history of sandbox {sandbox_id}")
        return
    history = acct.sandbox_history(sandbox_id)
    if as_json:
        emit_json(history.model_dump(mode="json"))
        return
    why = f"excluded by {history.excluded_by or '?'}: {history.excluded_reason or '(no reason given)'}"
    table(f"Sandbox {sandbox_id} (archived as version {history.archived_as}; {why})",
          ["event", "kind", "outcome", "record", "text"],
          [(e.event_id[:12], e.kind, e.outcome, e.record_id or "", e.text[:80]) for e in history.events])


@click.command("discard")
@click.argument("sandbox_id")
@account_option
@json_option
@click.pass_obj
def discard(state: State, sandbox_id: str, account: str, as_json: bool) -> None:
    """Throw a sandbox and its buffer away; the master is untouched."""
    state.account(account).discard(sandbox_id)
    if as_json:
        emit_json({"sandbox_id": sandbox_id, "status": "discarded"})
    else:
        console.print(f"discarded {sandbox_id}")


sandbox.add_command(discard)


# --- write ---------------------------------------------------------------------------------

@click.group()
def write() -> None:
    """Write to a sandbox's session buffer (never to the master)."""


@write.command("turn")
@click.argument("sandbox_id")
@account_option
@click.option("--speaker", default="user", show_default=True, help="'user' or the agent's name.")
@click.option("--text", default=None, help="What was said (short turns; see --file for long ones).")
@click.option("--file", "path", default=None, metavar="PATH",
              help="Read what was said from a UTF-8 file ('-' for stdin): turns longer than a command line holds.")
@click.pass_obj
def write_turn(state: State, sandbox_id: str, account: str, speaker: str, text: str | None, path: str | None) -> None:
    """Append a user or agent turn (--text, or --file PATH / - for stdin); prints its temporary id."""
    if path is not None and text is None:
        text = _read_text_file(path)
    elif text is None or path is not None:
        raise InvalidInput("give the turn's text as --text TEXT or --file PATH ('-' for stdin), one of them",
                           field="text")
    click.echo(state.account(account).sandbox(sandbox_id).add_turn(speaker, text))


@write.command("episode")
@click.argument("sandbox_id")
@account_option
@click.option("--file", "path", required=True, help="JSON file with the episode ('-' for stdin).")
@click.pass_obj
def write_episode(state: State, sandbox_id: str, account: str, path: str) -> None:
    """Append an episode (V3 or the seed's shape with inline turn_1/turn_2)."""
    data = _read_json_file(path)
    if not isinstance(data, dict):
        raise InvalidInput(f"{path} must hold one JSON object", path=path)
    click.echo(state.account(account).sandbox(sandbox_id).write_episode(data))


@write.command("fact")
@click.argument("sandbox_id")
@account_option
@click.option("--subject")
@click.option("--predicate")
@click.option("--object", "obj")
@click.option("--content", help="Free text such as 'User likes coffee' (split into SPO).")
@click.option("--confidence", type=float, required=True)
@click.pass_obj
def write_fact(state: State, sandbox_id: str, account: str, subject: str | None, predicate: str | None,
               obj: str | None, content: str | None, confidence: float) -> None:
    """Propose a semantic fact (validated and merged at archive)."""
    sb = state.account(account).sandbox(sandbox_id)
    click.echo(sb.add_fact(subject, predicate, obj, confidence=confidence, content=content))
    if (warning := sb.fact_warning(confidence)) is not None:
        err_console.print(f"[yellow]warning:[/] {warning}")


@write.command("state")
@click.argument("sandbox_id")
@click.argument("name")
@account_option
@click.option("--data", required=True, help="JSON object of keys to set.")
@click.pass_obj
def write_state(state: State, sandbox_id: str, name: str, account: str, data: str) -> None:
    """Set keys of the named state (latest wins at archive)."""
    value = _json_arg(data, "--data")
    if not isinstance(value, dict):
        raise InvalidInput("--data must be a JSON object", field="--data")
    state.account(account).sandbox(sandbox_id).update_state(name, value)


@write.command("profile")
@click.argument("sandbox_id")
@account_option
@click.option("--data", required=True, help="JSON object of profile fields to set.")
@click.pass_obj
def write_profile(state: State, sandbox_id: str, account: str, data: str) -> None:
    """Set fields of the user profile (latest wins at archive)."""
    value = _json_arg(data, "--data")
    if not isinstance(value, dict):
        raise InvalidInput("--data must be a JSON object", field="--data")
    state.account(account).sandbox(sandbox_id).update_profile(value)


@write.command("core")
@click.argument("sandbox_id")
@account_option
@click.option("--section", type=click.Choice(["identity", "values", "worldview"]), required=True)
@click.option("--key")
@click.option("--value", required=True, help="A JSON value or plain text.")
@click.option("--confidence", type=float, required=True)
@click.option("--reason", required=True)
@click.pass_obj
def write_core(state: State, sandbox_id: str, account: str, section: str, key: str | None, value: str,
               confidence: float, reason: str) -> None:
    """Propose a change to core memory (careful merge at archive)."""
    parsed: Any = json_or_text(value, "value")
    state.account(account).sandbox(sandbox_id).propose_core(section, parsed, key=key, confidence=confidence,
                                                            reason=reason)


# --- archive -------------------------------------------------------------------------------

@click.command("archive")
@click.argument("sandbox_id")
@account_option
@click.option("--dry-run", is_flag=True, help="Show what the archive would do, item by item; write nothing.")
@click.option("--exclude", "exclude", multiple=True, metavar="ITEM",
              help="Leave this item (an id the preview lists) out of the archive; repeat for several.")
@click.option("--approve", is_flag=True,
              help="Approve what the review policy (rules: review) holds for a person: you are the owner.")
@click.option("--by", default=None, help="Who archives (recorded in the version entry with the exclusions).")
@click.option("--reason", default=None, help="Why items are excluded (recorded in the version entry).")
@json_option
@click.pass_obj
def archive(state: State, sandbox_id: str, account: str, dry_run: bool, exclude: tuple[str, ...], approve: bool,
            by: str | None, reason: str | None, as_json: bool) -> None:
    """Consolidate a sandbox into the next master version (exit 8 while it awaits review)."""
    result = state.account(account).archive(sandbox_id, dry_run=dry_run, exclude=exclude, by=by, reason=reason,
                                            may_approve=approve)
    if isinstance(result, AlreadyArchived):
        if as_json:
            emit_json({"status": "already_archived", "version": result.version})
        else:
            console.print(f"{sandbox_id} was already archived as version {result.version}")
        return
    summary = result.plan.summary()
    status = archive_status(result)
    warning = result.warning if isinstance(result, Committed) else None  # durable; recovery finishes the rest
    items = result.plan.items
    if as_json:
        emit_json({"status": status, **summary, "items": [i.model_dump(mode="json") for i in items],
                   **({"warning": warning} if warning else {})})
    else:
        _print_archive(sandbox_id, status, summary, items, warning)
    if isinstance(result, AwaitingReview):
        sys.exit(8)  # no error, yet nothing committed: a script must not go on as if it were


def archive_status(result: Committed | Planned | Unchanged | AwaitingReview) -> str:
    return {Committed: "committed", Planned: "planned", Unchanged: "unchanged",
            AwaitingReview: "awaiting_review"}[type(result)]


def _print_archive(sandbox_id: str, status: str, summary: dict[str, Any], items: tuple[PreviewItem, ...],
                   warning: str | None) -> None:
    if warning:
        err_console.print(f"[yellow]warning:[/] {warning}")
    if status == "awaiting_review":
        held = [i for i in items if i.review]
        console.print(f"{sandbox_id} awaits review: nothing committed; {len(held)} item(s) need a person "
                      f"(`soulpass archive {sandbox_id} --approve [--exclude ITEM]`)")
    elif summary["empty"]:
        verb = "would commit" if status == "planned" else "committed"
        console.print(f"{sandbox_id} {verb} nothing: no new version (HEAD stays {summary['version']})")
    else:
        verb = "would become" if status == "planned" else "committed as"
        rebased = f" (rebased from {summary['parent_version']})" if summary["rebased"] else ""
        console.print(f"{sandbox_id} {verb} version [bold]{summary['version']}[/]{rebased}")
    if status in ("planned", "awaiting_review"):
        table("Items", ["id", "kind", "action", "text", "detail"],
              [(i.id, i.kind, i.action, i.text, item_detail(i)) for i in items])
    else:
        rows = [(f"added {k}", len(v)) for k, v in summary["added"].items()]
        rows += [(name, len(summary[name])) for name in ("superseded", "duplicates", "rejected", "conflicts",
                                                         "core_changes", "state_changes") if summary[name]]
        if excluded := [i for i in items if i.action == "exclude"]:
            rows.append(("excluded", len(excluded)))
        table("Consolidation", ["what", "count"], rows)
    for c in summary["conflicts"]:
        console.print(f"[yellow]conflict:[/] {c.get('type')}: {c.get('why')}")


def item_detail(item: PreviewItem) -> str:
    """One line on what an item becomes: its id, what it retires, its key changes, why."""
    parts = []
    if item.record_id:
        parts.append(("duplicate of " if item.action == "skip-duplicate" else "as ") + item.record_id)
    if item.supersedes:
        parts.append("supersedes " + ", ".join(item.supersedes))
    parts += [f"{c.document}.{c.key}: {c.before!r} -> {c.after!r}" for c in item.changes]
    if item.reason:
        parts.append(f"{item.rule}: {item.reason}" if item.rule else item.reason)
    if item.review:
        parts.append(f"needs review: {item.review}")
    return "; ".join(parts)


COMMANDS = [account, sandbox, write, archive, discard]
