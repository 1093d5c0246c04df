"""``migrate SRC DST``: move accounts between a home folder and a PostgreSQL database, whole history."""

from __future__ import annotations

import click

from soulpass.cli.output import console, emit_json, err_console, table
from soulpass.engine import Soulpass
from soulpass.migrate import migrate
from soulpass.server.keyring import key_store
from soulpass.server.keys import carry_keys

__all__ = ["COMMANDS"]


@click.command("migrate")
@click.argument("src")
@click.argument("dst")
@click.option("--account", "-a", "accounts", multiple=True, help="Only this account (repeatable; default: all).")
@click.option("--replace", is_flag=True, help="Overwrite accounts DST already has.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")
def migrate_cmd(src: str, dst: str, accounts: tuple[str, ...], replace: bool, as_json: bool) -> None:
    """Copy accounts from SRC to DST (each a home folder or a postgresql:// URL) with every version,
    then read them back and compare digests; their API keys and the admin keys go along. Indexes
    are rebuilt on first use."""
    source = Soulpass(src, embedder="none")
    target = Soulpass(dst, embedder="none")

    def progress(account: str, files: int) -> None:
        err_console.print(f"  {account}: {files:,} files", highlight=False)

    moved = migrate(source, target, accounts, replace=replace, progress=None if as_json else progress)
    keys = carry_keys(key_store(source), key_store(target), [m.account for m in moved])
    if as_json:
        emit_json({"from": source.location, "to": target.location, "accounts": [m.to_dict() for m in moved],
                   "keys": keys.to_dict()})
        return
    table(f"migrated {len(moved)} account(s) from {source.location} to {target.location}",
          ["account", "version", "files", "MB", "digest", "replaced"],
          [(m.account, m.version, m.files, f"{m.bytes / 1e6:.1f}", m.digest[:16], "yes" if m.replaced else "")
           for m in moved])
    console.print("[green]digests match[/]: every account reads back the same in the destination")
    for m in moved:
        if m.kept_behind:
            console.print(f"{m.account}: {len(m.kept_behind)} sandbox(es) kept for their history stay in the source "
                          f"({', '.join(m.kept_behind)})")
    console.print(f"API keys: {len(keys.carried)} carried (the accounts' and the admin keys, hashes only)"
                  + (f"; {len(keys.already_there)} already there" if keys.already_there else ""))


COMMANDS = [migrate_cmd]
