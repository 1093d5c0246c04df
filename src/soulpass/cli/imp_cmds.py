"""``import-from SOURCE PATH``: memories from ChatGPT, Claude, Mem0, Basic Memory or a JSONL of
messages (``soulpass.importers.import_from``), with a progress bar on stderr and a summary table."""

from __future__ import annotations

from pathlib import Path

import click
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from soulpass.cli.output import console, emit_json, err_console, table
from soulpass.cli.state import State, account_option
from soulpass.importers import SOURCES, import_from

__all__ = ["COMMANDS"]


@click.command("import-from")
@click.argument("source", type=click.Choice(list(SOURCES)))
@click.argument("path", type=click.Path(exists=True, path_type=Path))
@account_option
@click.option("--create", is_flag=True, help="Create the account if it does not exist.")
@click.option("--dry-run", is_flag=True, help="Report what would be imported; write nothing.")
@click.option("--json", "as_json", is_flag=True, help="Print the summary as JSON.")
@click.pass_obj
def import_from_cmd(state: State, source: str, path: Path, account: str, create: bool, dry_run: bool,
                    as_json: bool) -> None:
    """Import another tool's memories: a ChatGPT or Claude export's conversations.json, a Mem0
    get_all JSON, a Basic Memory folder or a JSONL of messages (docs/importers.md). What the account
    already holds is skipped as a duplicate, so importing the same file again adds nothing."""
    acct = state.account(account, create=create)
    with Progress(TextColumn(f"importing {source}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  console=err_console, transient=True) as bar:
        task = bar.add_task(source, total=None)

        def progress(done: int, total: int) -> None:
            bar.update(task, completed=done, total=total)

        summary = import_from(acct, source, path, dry_run=dry_run, progress=progress)
    if as_json:
        emit_json(summary.to_json())
        return
    kinds = sorted({*summary.imported, *summary.duplicates, *summary.forgotten})
    title = f"{'would import (dry run)' if dry_run else 'imported'} from {source} {path}"
    if summary.versions:
        title += f": version{'s' if len(summary.versions) > 1 else ''} {summary.versions[0]}"
        title += f"..{summary.versions[-1]}" if len(summary.versions) > 1 else ""
    table(title, ["kind", "imported", "skipped as duplicates", "skipped: forgotten"],
          [(k, summary.imported[k], summary.duplicates[k], summary.forgotten[k]) for k in kinds] or [("-", 0, 0, 0)])
    console.print(f"{len(summary.failures)} failed")
    if summary.failures:
        table("failed", ["item", "reason"], [(f.item, f.reason) for f in summary.failures])


COMMANDS = [import_from_cmd]
