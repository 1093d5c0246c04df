"""Output for people (rich tables) and machines (``--json``), and error-to-exit-code mapping."""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from typing import Any

import click
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from soulpass.errors import SoulpassError

__all__ = ["ErrorHandlingGroup", "console", "emit_json", "table"]

console = Console(highlight=False)
err_console = Console(stderr=True, highlight=False)


class ErrorHandlingGroup(click.Group):
    """Turns our errors into one clear line on stderr and a non-zero exit code."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except SoulpassError as exc:
            err_console.print(f"[bold red]error:[/] {type(exc).__name__}: {escape(str(exc))}", soft_wrap=True)
            ctx.exit(exc.exit_code)  # each error class carries its own (soulpass.errors)
        except OSError as exc:  # disk full, permissions: still one clear line
            err_console.print(f"[bold red]error:[/] {type(exc).__name__}: {escape(str(exc))}", soft_wrap=True)
            ctx.exit(1)


def emit_json(value: Any) -> None:
    click.echo(json.dumps(value, indent=2, ensure_ascii=False, default=str))


# Piped or redirected output has no screen to fit: a table is as wide as its rows need (rich
# would otherwise assume 80 columns and cut ids and paths with "…").
piped_console = Console(highlight=False, width=100_000)


def table(title: str, columns: Sequence[str], rows: Iterable[Sequence[Any]]) -> None:
    """A table for people; on a terminal it fits the screen, piped it never cuts an id or a path."""
    t = Table(title=title, title_justify="left")
    for c in columns:
        t.add_column(c)
    for r in rows:
        t.add_row(*("" if v is None else str(v) for v in r))
    (console if console.is_terminal else piped_console).print(t)
