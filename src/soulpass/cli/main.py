"""Root of the ``soulpass`` CLI. Only this layer reads environment variables and config files."""

from __future__ import annotations

from pathlib import Path

import click

from soulpass.cli.output import ErrorHandlingGroup
from soulpass.cli.state import State
from soulpass.index.catalog import FullText
from soulpass.store.postgres.url import is_url, local_root

__all__ = ["cli", "main"]


@click.group(cls=ErrorHandlingGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--home", envvar="SOULPASS_HOME", default="~/.soulpass", show_default=True,
              metavar="DIRECTORY|URL", help="Soulpass home folder, or a postgresql:// URL (env SOULPASS_HOME).")
@click.option("--rules", "rules_file", envvar="SOULPASS_RULES", default=None,
              type=click.Path(dir_okay=False, path_type=Path),
              help="Consolidation rules YAML (default: <home>/rules.yaml if present).")
@click.option("--fulltext", envvar="SOULPASS_FULLTEXT", default=None, type=click.Choice(["fts5", "tantivy"]),
              help="Full-text engine, recorded in each account's index (default: the recorded one, else fts5; "
                   "tantivy needs the 'search' extra). Env SOULPASS_FULLTEXT.")
@click.version_option(package_name="soulpass")
@click.pass_context
def cli(ctx: click.Context, home: str, rules_file: Path | None, fulltext: FullText | None) -> None:
    """Soulpass: versioned, portable long-term memory for AI agents."""
    if is_url(home):  # the accounts are in the database; ``home`` is the local folder beside it
        ctx.obj = State(home=local_root(home), rules_file=rules_file, fulltext=fulltext, store=home)
    else:
        folder = _FOLDER.convert(home, _home_param(ctx), ctx)
        ctx.obj = State(home=folder.expanduser(), rules_file=rules_file, fulltext=fulltext)


_FOLDER = click.Path(file_okay=False, path_type=Path)  # what --home checks when it names a folder


def _home_param(ctx: click.Context) -> click.Parameter | None:
    return next((p for p in ctx.command.params if p.name == "home"), None)


def _register() -> None:
    import soulpass.cli.backlog_cmds  # noqa: F401  (adds `index drain` to the index group)
    from soulpass.cli import bench_cmds, demo, sandbox_cmds, search_cmds, server_cmds, version_cmds, worker_cmds

    for module in (sandbox_cmds, version_cmds, search_cmds, bench_cmds, demo, server_cmds, worker_cmds):
        for command in module.COMMANDS:
            cli.add_command(command)
    from soulpass.cli import integrity_cmds, journal_cmds

    for journal_module in (journal_cmds, integrity_cmds):  # journal, patterns, import, audit, backup
        for command in journal_module.COMMANDS:
            cli.add_command(command)
    from soulpass.cli import migrate_cmds

    cli.add_command(migrate_cmds.migrate_cmd)
    from soulpass.cli import agent_cmds  # clipboard, context, ingest, chat

    for command in agent_cmds.COMMANDS:
        cli.add_command(command)
    from soulpass.cli import imp_cmds  # import-from

    for command in imp_cmds.COMMANDS:
        cli.add_command(command)
    from soulpass.cli import memory_cmds  # edit, history, forget

    for command in memory_cmds.COMMANDS:
        cli.add_command(command)
    from soulpass.cli import exp_cmds  # export (and `import passport` on the import group)

    for command in exp_cmds.COMMANDS:
        cli.add_command(command)


_register()


def main() -> None:
    cli()
