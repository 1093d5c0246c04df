"""``import SOURCE PATH``: memories from ChatGPT, Claude, Mem0, Basic Memory, a JSONL of messages
(``soulpass.importers.import_from``) or a Mira folder (``import_mira``), with a progress bar on
stderr and a summary table; ``import passport`` lives with ``export`` (exp_cmds). ``import-from
SOURCE PATH``, the older spelling, still works for a release and says the new one."""

from __future__ import annotations

import contextlib
import shlex
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

import click
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from soulpass.cli.output import console, emit_json, err_console, table
from soulpass.cli.state import State, account_option
from soulpass.errors import NotFound
from soulpass.importers import SOURCES, import_from
from soulpass.importers.mira import import_mira

if TYPE_CHECKING:
    from soulpass.engine import Account

__all__ = ["COMMANDS", "import_group"]

create_option = click.option("--create", is_flag=True, help="Create the account if it does not exist "
                             "(with --dry-run nothing is created).")
dry_run_option = click.option("--dry-run", is_flag=True, help="Report what would be imported; write nothing.")
json_option = click.option("--json", "as_json", is_flag=True, help="Print the summary as JSON.")

_SOURCE_HELP = {
    "chatgpt": "a ChatGPT data export's conversations.json",
    "claude": "a Claude data export's conversations.json",
    "jsonl": "a JSONL of messages, one per line",
    "mem0": "a Mem0 get_all JSON",
    "basic-memory": "a Basic Memory folder of notes",
}


@click.group("import")
def import_group() -> None:
    """Take memories from other formats into an account."""


@contextmanager
def target(state: State, name: str, *, create: bool, dry_run: bool) -> Iterator[Account]:
    """The account an import goes to. A dry run writes nothing: on an account that does not exist
    yet (``--create``) it plans against an empty one in a scratch folder, where every item is new."""
    engine = state.engine()
    exists = name in engine.accounts()
    if not exists and not create:
        raise NotFound(f"account {name!r} does not exist in {state.location}; add --create to import into a new "
                       "account", account=name)
    with contextlib.ExitStack() as stack:
        if not exists and dry_run:
            from soulpass.engine import Soulpass

            scratch = stack.enter_context(tempfile.TemporaryDirectory(prefix="soulpass-dry-run-"))
            engine = Soulpass(scratch, rules=engine.rules, limits=engine.limits, embedder="none")
        acct = engine.account(name, create=not exists)
        stack.callback(acct.close)  # release the index (its vector files are locked while open)
        yield acct


def run_import(state: State, source: str, path: Path, account: str, create: bool, dry_run: bool,
               as_json: bool) -> None:
    """One import of ``source`` (a name of :data:`SOURCES`) and its summary, as a table or JSON."""
    with target(state, account, create=create, dry_run=dry_run) as acct, \
            Progress(TextColumn(f"importing {source}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
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


def _source_command(source: str) -> click.Command:
    """``import SOURCE PATH``: the same options for every source of :data:`SOURCES`."""

    @import_group.command(source, help=f"Import {_SOURCE_HELP[source]}. What the account already holds is skipped "
                          "as a duplicate, so importing the same source again adds nothing (docs/importers.md).")
    @click.argument("path", type=click.Path(exists=True, file_okay=source != "basic-memory", path_type=Path))
    @account_option
    @create_option
    @dry_run_option
    @json_option
    @click.pass_obj
    def command(state: State, path: Path, account: str, create: bool, dry_run: bool, as_json: bool) -> None:
        run_import(state, source, path, account, create, dry_run, as_json)

    return command


for _source in SOURCES:
    _source_command(_source)


@import_group.command("mira")
@click.argument("folder", type=click.Path(file_okay=False, exists=True, path_type=Path))
@account_option
@create_option
@dry_run_option
@json_option
@click.pass_obj
def import_mira_cmd(state: State, folder: Path, account: str, create: bool, dry_run: bool, as_json: bool) -> None:
    """Import a Mira folder (journal/, experiments/, reflections/, conversations/, optional
    memory_index.json) as one version; exact repeats are reported, not stored twice."""
    with target(state, account, create=create, dry_run=dry_run) as acct:
        report = import_mira(acct, folder, dry_run=dry_run)
    if as_json:
        emit_json(report.to_json())
        return
    what = "would import" if dry_run else f"version {report.version}: imported"
    console.print(f"{what} {len(report.imported)} of {report.files} files; {len(report.duplicates)} exact "
                  f"repeats skipped, {len(report.repeats)} recurring insights linked, "
                  f"{len(report.hash_mismatches)} stated hashes recomputed, {len(report.failures)} files not read")
    if report.duplicates:
        table("exact repeats (not stored)", ["file", "same as"], [
            (d["source"], d.get("duplicate_of_source") or d["duplicate_of"]) for d in report.duplicates])
    if report.failures:
        table("files not imported", ["file", "reason"], [(f.item, f.reason) for f in report.failures])


@click.command("import-from")
@click.argument("source", type=click.Choice(list(SOURCES)))
@click.argument("path", type=click.Path(exists=True, path_type=Path))
@account_option
@create_option
@dry_run_option
@json_option
@click.pass_obj
def import_from_cmd(state: State, source: str, path: Path, account: str, create: bool, dry_run: bool,
                    as_json: bool) -> None:
    """Deprecated spelling of `soulpass import SOURCE PATH` (removed in a later release): the same
    import, with a note on stderr that gives the new form."""
    flags = [flag for flag, on in (("--create", create), ("--dry-run", dry_run), ("--json", as_json)) if on]
    new = shlex.join(["soulpass", "import", source, str(path), "-a", account, *flags])
    err_console.print(f"note: 'import-from' is deprecated and will be removed; use: {new}", soft_wrap=True,
                      markup=False)
    run_import(state, source, path, account, create, dry_run, as_json)


COMMANDS = [import_group, import_from_cmd]
