"""``audit``, ``prune``, ``backup`` and ``restore``."""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path

import click

from soulpass.backup import backup, restore
from soulpass.cli.output import console, emit_json, table
from soulpass.cli.state import State, account_option
from soulpass.integrity import audit, prune

__all__ = ["COMMANDS"]

json_option = click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")


@click.command("audit")
@account_option
@json_option
@click.pass_obj
def audit_cmd(state: State, account: str, as_json: bool) -> None:
    """Reconcile files, index and vectors; exit 1 when anything is found."""
    report = audit(state.engine(), account)
    if as_json:
        emit_json(report.to_json())
    elif report.ok:
        lag = (f"; the index is {report.index_lag} version(s) behind, caught up by the next search"
               if report.index_lag else "")
        console.print(f"{account}: ok (version {report.store_version}, {report.files} files, "
                      f"{report.rows_in_force} rows in force{lag})")
    else:
        table(f"{account}: {len(report.findings)} findings (store version {report.store_version}, "
              f"catalog {report.catalog_version})", ["check", "subject", "detail"],
              [(f.check, f.subject, f.detail) for f in report.findings])
    if not report.ok:
        click.get_current_context().exit(1)


@click.command("prune")
@account_option
@click.option("--dry-run", is_flag=True, help="List the orphan rows; remove nothing.")
@json_option
@click.pass_obj
def prune_cmd(state: State, account: str, dry_run: bool, as_json: bool) -> None:
    """Remove index rows whose file is gone. Never deletes a source file."""
    report = prune(state.account(account), dry_run=dry_run)
    if as_json:
        emit_json(asdict(report))
        return
    verb = "would remove" if dry_run else "removed"
    console.print(f"{verb} {len(report.rows_removed)} orphan index rows")
    for r in report.rows_removed:
        console.print(f"  {r['id']} v{r['version']} {r['path']}")


@click.command("backup")
@account_option
@click.option("--to", "to", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Git repository folder (default <home>/backups/<account>).")
@json_option
@click.pass_obj
def backup_cmd(state: State, account: str, to: Path | None, as_json: bool) -> None:
    """Snapshot the account's files into a git repository: one commit per run, naming the version."""
    res = backup(state.engine(), account, to)
    if as_json:
        emit_json(asdict(res))
        return
    console.print(f"{res.commit[:12]} {res.message} -> {res.repo}")


@click.command("restore")
@account_option
@click.option("--from", "source", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Backup repository (default <home>/backups/<account>).")
@click.option("--commit", "ref", default="HEAD", show_default=True, help="Which backup (a commit or ref).")
@click.option("--force", is_flag=True, help="Replace the account if it exists.")
@json_option
@click.pass_obj
def restore_cmd(state: State, account: str, source: Path | None, ref: str, force: bool, as_json: bool) -> None:
    """Bring an account back from a backup; every file is checked against the backup's hashes."""
    res = restore(state.engine(), account, source, ref=ref, force=force)
    if as_json:
        emit_json(asdict(res))
        return
    console.print(f"restored {res.account} at version {res.version} ({res.files} files verified) "
                  f"from {res.commit[:12]}")


COMMANDS = [audit_cmd, prune_cmd, backup_cmd, restore_cmd]
