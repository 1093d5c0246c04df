"""A new user's first day (issue 40 item 15): a busy port, a mistyped home, a warning said once."""

from __future__ import annotations

import logging
import socket
from pathlib import Path

import pytest
from click.testing import CliRunner

import soulpass
from soulpass.cli.main import cli


def _busy_port() -> tuple[socket.socket, int]:
    holder = socket.socket()
    holder.bind(("127.0.0.1", 0))
    holder.listen()
    return holder, holder.getsockname()[1]


@pytest.mark.parametrize("command", [["serve"], ["mcp", "--transport", "http"]])
def test_a_busy_port_is_one_line_and_exit_1(tmp_path: Path, command: list[str]) -> None:
    pytest.importorskip("uvicorn", reason="the 'server' extra is not installed")
    holder, port = _busy_port()
    with holder:
        result = CliRunner().invoke(cli, ["--home", str(tmp_path), *command, "--port", str(port),
                                          "--embedder", "none"])
    assert result.exit_code == 1, result.output
    assert f"cannot listen on 127.0.0.1:{port}" in result.output and "Traceback" not in result.output


def test_a_mistyped_home_says_no_such_home(tmp_path: Path) -> None:
    soulpass.open(tmp_path / "home", embedder="none").create_account("ann")
    runner = CliRunner()
    for args in (["account", "list"], ["log", "-a", "ann"], ["search", "x", "-a", "ann"]):
        result = runner.invoke(cli, ["--home", str(tmp_path / "hoem"), *args])
        assert result.exit_code == 3 and "no such home" in result.output, (args, result.output)
        assert not (tmp_path / "hoem").exists()
    assert "ann" in runner.invoke(cli, ["--home", str(tmp_path / "home"), "account", "list"]).output
    made = runner.invoke(cli, ["--home", str(tmp_path / "new"), "account", "create", "bob"])
    assert made.exit_code == 0, made.output  # creating still makes the home


def test_the_missing_pgvector_warning_is_said_once_per_database(tmp_path: Path,
                                                               caplog: pytest.LogCaptureFixture) -> None:
    from postgres_helpers import postgres_url
    from soulpass.index.pg import vectors
    from soulpass.store.postgres.connections import database

    caplog.set_level(logging.WARNING)
    for url in postgres_url(tmp_path):
        db = database(url)
        said = []
        for _command in range(3):  # three commands, each a process of its own
            vectors._HAS.pop(db.url, None)
            if vectors.has_pgvector(db) is not None:
                pytest.skip("this PostgreSQL has pgvector: nothing to warn about")
            said.append(sum("pgvector is not available" in r.getMessage() for r in caplog.records))
        assert said == [1, 1, 1]


def test_a_core_only_install_says_its_search_is_full_text_only(tmp_path: Path, monkeypatch: pytest.MonkeyPatch
                                                              ) -> None:
    """Issue 40 item 21: without the 'embed' extra, "pet" found nothing over a puppy, silently."""
    from soulpass.embed import minilm
    from soulpass.embed.base import missing_extra

    def no_model() -> None:
        raise missing_extra("The embedded MiniLM model", ImportError(name="onnxruntime"))

    monkeypatch.setattr(minilm, "MiniLM", no_model)  # what a core-only install meets
    home = tmp_path / "home"
    acct = soulpass.open(home).create_account("ann")  # embedder "auto"
    sb = acct.create_sandbox("s")
    sb.add_turn("user", "I adopted a golden retriever puppy")
    sb.archive()
    found = acct.search("pet")
    assert list(found) == [] and found.incomplete and "soulpass[embed]" in (found.note or "")
    assert "soulpass[embed]" in (acct.search("puppy", min_score=0.1).note or "")
    out = CliRunner().invoke(cli, ["--home", str(home), "search", "pet", "-a", "ann"]).output
    assert out.count("soulpass[embed]") == 1, out
    with_embed = soulpass.open(home, embedder="none").account("ann").search("pet")  # chosen: no note
    assert with_embed.note is None
