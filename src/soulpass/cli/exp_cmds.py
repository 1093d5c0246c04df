"""``export ACCOUNT -o FILE`` and ``import passport FILE [--as NAME]``: the passport (docs/passport.md)."""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path

import click

from soulpass.cli.imp_cmds import import_group
from soulpass.cli.output import console, emit_json
from soulpass.cli.state import State
from soulpass.passport import MAX_ENTRY_BYTES, MAX_TOTAL_BYTES, export_account, import_account

json_option = click.option("--json", "as_json", is_flag=True, help="Print JSON instead of text.")


@click.command("export")
@click.argument("account")
@click.option("-o", "--output", "output", type=click.Path(dir_okay=False, path_type=Path), required=True,
              help="The passport file to write (a zip).")
@click.option("--history", is_flag=True, help="Include every superseded copy, not only what is in force at HEAD.")
@click.option("--vectors", is_flag=True, help="Include the account's vectors, so an import with the same embedder "
              "embeds nothing again.")
@json_option
@click.pass_obj
def export_cmd(state: State, account: str, output: Path, history: bool, vectors: bool, as_json: bool) -> None:
    """Write ACCOUNT as one verified passport file."""
    res = export_account(state.engine(), account, output, history=history, vectors=vectors, progress=not as_json)
    if as_json:
        emit_json(asdict(res))
        return
    with_vectors = "" if res.vectors is None else f", {res.vectors} vectors"
    console.print(f"exported {res.account} at version {res.head} ({res.files} files, {res.bytes} bytes{with_vectors})"
                  f" -> {res.path}\nmanifest sha256 {res.manifest_sha256}")


@import_group.command("passport")
@click.argument("file", type=click.Path(dir_okay=False, exists=True, path_type=Path))
@click.option("--as", "as_name", default=None, help="Name of the new account (default: the one in the file).")
@click.option("--max-entry-bytes", type=click.IntRange(min=1), default=MAX_ENTRY_BYTES, show_default=True,
              envvar="SOULPASS_PASSPORT_MAX_ENTRY", help="Refuse a file in the passport larger than this.")
@click.option("--max-total-bytes", type=click.IntRange(min=1), default=MAX_TOTAL_BYTES, show_default=True,
              envvar="SOULPASS_PASSPORT_MAX_TOTAL", help="Refuse a passport whose files add up to more.")
@json_option
@click.pass_obj
def import_passport_cmd(state: State, file: Path, as_name: str | None, max_entry_bytes: int, max_total_bytes: int,
                        as_json: bool) -> None:
    """Create an account from a passport file; every entry is verified before anything is written."""
    res = import_account(state.engine(), file, as_name=as_name, max_entry=max_entry_bytes,
                         max_total=max_total_bytes, progress=not as_json)
    if as_json:
        emit_json(asdict(res))
        return
    console.print(f"imported {res.account} at version {res.head} ({res.files} files verified)\n"
                  f"manifest sha256 {res.manifest_sha256}")
    if res.vectors is not None:
        console.print(f"vectors: {res.vectors}")


COMMANDS = [export_cmd]
