"""What the CLI prints (issue 40 items 3, 4, 19): piped output is whole and valid, stored text is
never read as markup, and a table on an 80-column terminal never cuts an id."""

from __future__ import annotations

import json
from collections.abc import Iterator
from io import StringIO
from pathlib import Path

import pytest
from click.testing import CliRunner
from rich.console import Console

import soulpass
from soulpass.cli import output
from soulpass.cli.main import cli

MARKUP = "the config key [database] and [bold]very[/bold]"
TAGGED = "- [method] x"
LONG = "ZEBRAQUARTZ " + "a long remark that goes on and on " * 6


@pytest.fixture
def home(tmp_path: Path) -> Path:
    """An account ``ann`` with a turn holding markup-like text, a long one, and an open sandbox."""
    sp = soulpass.open(tmp_path / "home", embedder="none")
    acct = sp.create_account("ann")
    sb = acct.create_sandbox("an imported conversation with a long title")
    sb.add_turn("user", MARKUP)
    sb.add_turn("user", TAGGED)
    sb.add_turn("user", LONG)
    sb.archive()
    acct.journal().add("the [bold]journal[/bold] body", title="Notes", tags=("[method]",))
    acct.create_sandbox("an open sandbox whose name is long enough to fill a narrow screen")
    return tmp_path / "home"


def _run(home: Path, *args: str) -> str:
    result = CliRunner().invoke(cli, ["--home", str(home), *args], env={"SOULPASS_ACCOUNT": "", "SOULPASS_HOME": ""})
    assert result.exit_code == 0, f"{args}: {result.output}{result.exception!r}"
    return result.output


@pytest.fixture
def terminal(monkeypatch: pytest.MonkeyPatch) -> Iterator[StringIO]:
    """The CLI's tables drawn as on an 80-column terminal."""
    buf = StringIO()
    monkeypatch.setattr(output, "console", Console(file=buf, force_terminal=True, width=80, highlight=False,
                                                    color_system=None, soft_wrap=True))
    yield buf


def test_show_piped_is_valid_json(home: Path) -> None:
    rid = next(h.id for h in soulpass.open(home, embedder="none").account("ann").search("ZEBRAQUARTZ"))
    out = _run(home, "show", rid, "-a", "ann")  # no --json: stdout is not a terminal
    assert json.loads(out)["text_excerpt"] == LONG


def test_stored_text_is_never_markup(home: Path) -> None:
    out = _run(home, "search", "config key database", "-a", "ann")
    assert MARKUP in out
    assert TAGGED in _run(home, "search", "method", "-a", "ann")
    journal = _run(home, "journal", "list", "-a", "ann")
    assert "[method]" in journal


def _ids_whole(text: str, ids: list[str]) -> None:
    for i in ids:
        assert i in text, f"{i} cut in\n{text}"


def test_tables_never_cut_ids_on_a_terminal(home: Path, terminal: StringIO) -> None:
    acct = soulpass.open(home, embedder="none").account("ann")
    hits = [h.id for h in acct.search("ZEBRAQUARTZ config method")]
    _run(home, "search", "ZEBRAQUARTZ config method", "-a", "ann")
    _run(home, "sandbox", "list", "-a", "ann")
    _run(home, "journal", "list", "-a", "ann")
    _run(home, "log", "-a", "ann")
    text = terminal.getvalue()
    assert all(len(line) <= 80 for line in text.splitlines()), text
    _ids_whole(text, hits + [s.sandbox_id for s in acct.sandboxes()] + [e.id for e in acct.journal().find()])
    _ids_whole(text, [str(e.source_sandbox) for e in acct.log() if e.source_sandbox])


def test_log_and_search_name_the_conversation(home: Path) -> None:
    """Issue 40 item 15: ``log`` showed sandbox ids only, and hits did not say where they came from."""
    name = "an imported conversation with a long title"
    assert name in _run(home, "log", "-a", "ann")
    assert name in _run(home, "search", "ZEBRAQUARTZ", "-a", "ann")
    hit = json.loads(_run(home, "search", "ZEBRAQUARTZ", "-a", "ann", "--json"))[0]
    assert hit["session_name"] == name and hit["session_id"].startswith("sb_")


def test_write_turn_reads_a_long_turn_from_a_file_or_stdin(tmp_path: Path) -> None:
    """Issue 40 item 12: a 360 KB turn could only be an argument ("Argument list too long")."""
    home = tmp_path / "home"
    acct = soulpass.open(home, embedder="none").create_account("ann")
    sid = acct.create_sandbox("long").id
    long = "é" + "a long pasted document line\n" * 13_000  # about 360 KB
    (tmp_path / "turn.txt").write_text(long, encoding="utf-8")
    runner = CliRunner()
    base = ["--home", str(home), "write", "turn", sid, "-a", "ann"]
    from_file = runner.invoke(cli, [*base, "--file", str(tmp_path / "turn.txt")])
    from_stdin = runner.invoke(cli, [*base, "--file", "-", "--speaker", "helper"], input=long)
    assert from_file.exit_code == 0 and from_stdin.exit_code == 0, from_file.output + from_stdin.output
    turns = list(acct.sandbox(sid).buffer().new_turns)
    assert [t["text_excerpt"] for t in turns] == [long, long] and turns[1]["agent"] == "helper"
    neither = runner.invoke(cli, base)
    both = runner.invoke(cli, [*base, "--text", "x", "--file", "-"], input="y")
    assert neither.exit_code == both.exit_code == 2 and "--file PATH" in neither.output
    assert "What was said" in runner.invoke(cli, [*base, "--help"]).output


def test_plain_tables_for_scripts(home: Path, terminal: StringIO) -> None:
    """Issue 40 item 19: between the boxed tables and --json, tab-separated lines a script can cut."""
    out = _run(home, "--plain", "sandbox", "list", "-a", "ann")
    lines = out.splitlines()
    assert lines[0].split("\t") == ["sandbox_id", "name", "parent version", "created"]
    sid = soulpass.open(home, embedder="none").account("ann").sandboxes()[0].sandbox_id
    assert lines[1].split("\t")[:2] == [sid, "an open sandbox whose name is long enough to fill a narrow screen"]
    hits = _run(home, "--plain", "search", "config", "-a", "ann").splitlines()
    assert hits[0].startswith("#\tid\t") and MARKUP in hits[1].split("\t") and len(hits) > 2
    assert terminal.getvalue() == ""  # nothing boxed, even on a terminal
