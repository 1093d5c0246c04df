"""Output for people (rich tables) and machines (``--json``), and error-to-exit-code mapping."""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from typing import Any

import click
from rich.console import Console
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from soulpass.errors import SoulpassError

__all__ = ["PLAIN", "ErrorHandlingGroup", "console", "emit_json", "screen", "table"]

# soft_wrap: a line is never broken by us (a terminal wraps it; a pipe gets it whole)
console = Console(highlight=False, soft_wrap=True)
err_console = Console(stderr=True, highlight=False, soft_wrap=True)


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

# Columns holding what a person copies into the next command: never cut, never folded.
WHOLE_COLUMNS = frozenset({"#", "id", "sandbox_id", "sandbox", "key_id", "version", "account", "worker"})
_SHORT = 20  # a column no value of which is longer stays on one line while the table fits
_NARROWEST = 8  # the least a folded column keeps before it is left out instead


def screen() -> Console:
    """The console a table or a document goes to: the terminal's, else one that never wraps."""
    return console if console.is_terminal else piped_console


PLAIN = "soulpass.plain"  # in the click context's meta: ``soulpass --plain`` was given


def _plain(columns: Sequence[str], cells: list[list[str]]) -> None:
    """``soulpass --plain``: for scripts, a header line and one line per row, tab-separated, nothing
    cut; a tab or a newline inside a value becomes a space."""

    def line(values: Iterable[str]) -> str:
        return "\t".join(" ".join(v.split("\t")).replace("\n", " ") for v in values)

    click.echo(line(columns))
    for r in cells:
        click.echo(line(r))


def table(title: str, columns: Sequence[str], rows: Iterable[Sequence[Any]]) -> None:
    """A table for people. Every value is shown as text, never read as markup. On a terminal the ids
    (``WHOLE_COLUMNS``) are never cut: the other columns fold, and the rightmost ones that still
    cannot fit are left out (named under the table; ``--json`` has everything). Piped, it is as wide
    as its rows need."""
    cells = [["" if v is None else str(v) for v in r] for r in rows]
    ctx = click.get_current_context(silent=True)
    if ctx is not None and ctx.meta.get(PLAIN):
        _plain(columns, cells)
        return
    out = screen()
    widths = [max([len(c), *(len(r[i]) for r in cells)]) for i, c in enumerate(columns)]
    whole = {i for i, c in enumerate(columns) if c in WHOLE_COLUMNS}
    keep = list(range(len(columns)))

    def need(short: int) -> int:  # borders and padding: 3 a column, and 1
        return 1 + sum(3 + (widths[i] if i in whole or widths[i] <= short else min(widths[i], _NARROWEST))
                       for i in keep)

    one_line = _SHORT if need(_SHORT) <= out.width else 0  # short columns on one line, if that fits
    dropped = []
    while need(one_line) > out.width and any(i not in whole for i in keep):
        gone = max(i for i in keep if i not in whole)
        keep.remove(gone)
        dropped.append(columns[gone])
    t = Table(title=Text(title), title_justify="left")
    for i in keep:
        if i in whole or widths[i] <= one_line:
            t.add_column(Text(columns[i]), no_wrap=True, min_width=widths[i])
        else:
            t.add_column(Text(columns[i]), overflow="fold", ratio=widths[i])
    for r in cells:
        t.add_row(*(Text(r[i]) for i in keep))
    out.print(t)
    if dropped:
        out.print(Text(f"(left out at this width: {', '.join(reversed(dropped))}; see --json)"))
