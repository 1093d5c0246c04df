"""``account delete``: erase an account for good, after its name is typed again."""

from __future__ import annotations

import click

from soulpass.cli.output import console, emit_json
from soulpass.cli.sandbox_cmds import account
from soulpass.cli.state import State
from soulpass.errors import InvalidInput
from soulpass.server.keyring import key_store

__all__ = ["COMMANDS"]


@account.command("delete")
@click.argument("name")
@click.option("--yes", is_flag=True, help="Do not ask for the name again (scripts); the deletion is still logged.")
@click.option("--by", default=None, help="Who asks for the deletion, for the tombstone (default: cli).")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@click.pass_obj
def account_delete(state: State, name: str, yes: bool, by: str | None, as_json: bool) -> None:
    """Delete account NAME and everything it holds: every version, its history, sandboxes, index,
    vectors, local caches, the backups kept in the home and its API keys. Irreversible: type the
    name to confirm (or pass --yes). A tombstone (who, when; no content) stays in the home's
    deletion log."""
    sp = state.engine(embedder="none")
    acct = sp.account(name)  # NotFound before any question is asked
    acct.close()
    confirm = name
    if not yes:
        confirm = click.prompt(f"This erases account {name!r} ({acct.head()} versions) for good. "
                               "Type its name to confirm", default="", show_default=False, err=True)
        if confirm != name:
            raise InvalidInput(f"the name typed ({confirm!r}) is not {name!r}: nothing was deleted", field="confirm")
    done = sp.delete_account(name, confirm=confirm, by=by or "cli", keys=key_store(sp))
    if as_json:
        emit_json(done.to_json())
        return
    console.print(f"account [bold]{done.account}[/] deleted (it was at version {done.version}; "
                  f"{done.keys_revoked} API key(s) revoked)", soft_wrap=True)
    for path in done.backups_holding:
        console.print(f"[yellow]still holding its content:[/] the backup {path} (outside the home)",
                      soft_wrap=True)


COMMANDS = [account]
