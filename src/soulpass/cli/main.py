"""Root of the ``soulpass`` CLI. Only this layer reads environment variables and config files."""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import TYPE_CHECKING

import click

from soulpass.cli.commands import COMMANDS
from soulpass.cli.output import PLAIN, ErrorHandlingGroup
from soulpass.cli.state import State
from soulpass.store.location import locate

if TYPE_CHECKING:
    from soulpass.index.catalog import FullText

__all__ = ["LazyGroup", "cli", "main"]


class LazyGroup(ErrorHandlingGroup):
    """The root group: commands come from ``soulpass.cli.commands.COMMANDS``, their modules imported
    when a command is asked for; the help lists them from the table without importing any."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*self.commands, *COMMANDS})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in self.commands and cmd_name in COMMANDS:
            first = importlib.import_module(f"soulpass.cli.{COMMANDS[cmd_name][0][0]}")
            for command in first.COMMANDS:  # it defines this command, and maybe others
                for module in COMMANDS.get(command.name or "", ((),))[0][1:]:  # their subcommands' modules
                    importlib.import_module(f"soulpass.cli.{module}")
                self.add_command(command)
        return self.commands.get(cmd_name)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        names = self.list_commands(ctx)
        if not names:
            return
        limit = formatter.width - 6 - max(len(n) for n in names)
        rows = []
        for name in names:
            if name in COMMANDS:
                text = _short_help(COMMANDS[name][1], limit)
            else:
                text = self.commands[name].get_short_help_str(limit)
            rows.append((name, text))
        with formatter.section("Commands"):
            formatter.write_dl(rows)


def _short_help(text: str, limit: int) -> str:
    """``text`` cut at a word to fit ``limit`` characters, with "..." when cut (as click does)."""
    if len(text) <= limit:
        return text
    out = ""
    for word in text.split():
        longer = f"{out} {word}" if out else word
        if len(longer) + 3 > limit:
            break
        out = longer
    return f"{out}..."


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--home", envvar="SOULPASS_HOME", default="~/.soulpass", show_default=True,
              metavar="DIRECTORY|URL", help="Soulpass home folder, or a postgresql:// URL (env SOULPASS_HOME).")
@click.option("--rules", "rules_file", envvar="SOULPASS_RULES", default=None,
              type=click.Path(dir_okay=False, path_type=Path),
              help="Consolidation rules YAML (default: <home>/rules.yaml if present).")
@click.option("--fulltext", envvar="SOULPASS_FULLTEXT", default=None, type=click.Choice(["fts5", "tantivy"]),
              help="Full-text engine, recorded in each account's index (default: the recorded one, else fts5; "
                   "tantivy needs the 'search' extra). Env SOULPASS_FULLTEXT.")
@click.option("--plain", is_flag=True, envvar="SOULPASS_PLAIN",
              help="Tables as tab-separated lines (a header, then one line per row) for scripts. Env SOULPASS_PLAIN.")
@click.version_option(package_name="soulpass")
@click.pass_context
def cli(ctx: click.Context, home: str, rules_file: Path | None, fulltext: FullText | None, plain: bool) -> None:
    """Soulpass: versioned, portable long-term memory for AI agents."""
    ctx.meta[PLAIN] = plain
    where = locate(home)
    if where.kind == "postgresql":  # the accounts are in the database; ``home`` is the local folder beside it
        ctx.obj = State(home=where.local, rules_file=rules_file, fulltext=fulltext, store=home)
    else:
        folder = _FOLDER.convert(home, _home_param(ctx), ctx)
        ctx.obj = State(home=folder.expanduser(), rules_file=rules_file, fulltext=fulltext)


_FOLDER = click.Path(file_okay=False, path_type=Path)  # what --home checks when it names a folder


def _home_param(ctx: click.Context) -> click.Parameter | None:
    return next((p for p in ctx.command.params if p.name == "home"), None)


def main() -> None:
    cli()
