"""The README introduces, and every command it shows exists: it stays short, keeps the two
quick-start commands (what ``../shared/tools/quickstart-check`` runs), its links resolve, each
``soulpass …`` it shows (in shell blocks, and in the MCP client configuration) names real commands
and options of the real CLI, and the Python and command-line tours run as written in a temporary
home."""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import click
import pytest

from soulpass.cli.main import cli

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
TEXT = README.read_text(encoding="utf-8")


def _blocks(text: str) -> list[tuple[str, str, str]]:
    """(the heading above, the fence's language, the body) of every fenced block."""
    out, heading = [], ""
    lines = iter(text.splitlines())
    for line in lines:
        if line.startswith("#"):
            heading = line.lstrip("#").strip()
        elif line.startswith("```"):
            body = []
            for inner in lines:
                if inner.startswith("```"):
                    break
                body.append(inner)
            out.append((heading, line[3:].strip(), "\n".join(body)))
    return out


BLOCKS = _blocks(TEXT)


def _block(heading: str, lang: str) -> str:
    (body,) = [b for h, la, b in BLOCKS if h == heading and la == lang]
    return body


def _soulpass_commands() -> list[list[str]]:
    """Each ``soulpass`` command line of the shell blocks (after ``--`` for a client's launcher,
    inside ``$(…)``, one per ``;``), and each MCP client configuration's arguments."""
    found = []
    for _, lang, body in BLOCKS:
        if lang == "bash":
            for line in body.splitlines():
                lex = shlex.shlex(line, posix=True, punctuation_chars=";&|()<>")
                lex.whitespace_split, lex.commenters = True, "#"
                words: list[str] = []
                for token in [*lex, ";"]:
                    if token and set(token) <= set(";&|()<>"):  # a command ends (or a redirection starts)
                        _add(found, words)
                        words = []
                    else:
                        words.append(token)
        elif lang == "json":
            for server in json.loads(body)["mcpServers"].values():
                if "command" in server:
                    assert Path(server["command"]).name == "soulpass"
                    found.append(list(server["args"]))
    return found


def _add(found: list[list[str]], words: list[str]) -> None:
    """``words`` (one simple command), when it runs ``soulpass``: its arguments."""
    while words and re.fullmatch(r"[A-Za-z_]+=\S*", words[0]):  # VAR=value before a command
        words = words[1:]
    if words and Path(words[0]).name != "soulpass" and "--" in words:  # claude mcp add NAME -- soulpass …
        words = words[words.index("--") + 1:]
    if words and Path(words[0]).name == "soulpass":
        found.append(words[1:])


COMMANDS = _soulpass_commands()


def test_the_readme_introduces_in_at_most_300_lines() -> None:
    assert len(TEXT.splitlines()) <= 300
    assert "DESIGN §" not in TEXT  # the design notes are not in the repository
    assert len(COMMANDS) >= 20  # the extraction found the tour's commands


def test_the_quick_start_is_the_two_make_commands() -> None:
    """What quickstart-check runs: the first fenced block under the 'Quick start' heading."""
    body = _block("Quick start", "bash")
    assert [line for line in body.splitlines() if line.strip() and not line.lstrip().startswith("#")] == [
        "make demo", "make test"]


def test_every_link_resolves() -> None:
    for target in re.findall(r"\]\(([^)#]+)(?:#[^)]*)?\)", TEXT):
        if not target.startswith(("http://", "https://")):
            assert (ROOT / target).exists(), target


def _check(words: list[str]) -> None:
    """Walk ``words`` down the CLI: every subcommand must exist, every option must be one of its command's."""
    command: click.Command = cli
    ctx = click.Context(cli)
    i = 0
    while i < len(words):
        word = words[i]
        if word.startswith("-") and word != "-":
            name = word.split("=", 1)[0]
            param = next((p for p in command.params if isinstance(p, click.Option)
                          and name in (*p.opts, *p.secondary_opts)), None)
            assert param is not None or name in ("-h", "--help"), f"soulpass {' '.join(words)}: no option {name}"
            takes_value = param is not None and not param.is_flag and not param.count and "=" not in word
            i += 2 if takes_value else 1
        elif isinstance(command, click.Group):
            sub = command.get_command(ctx, word)
            assert sub is not None, f"soulpass {' '.join(words)}: no command {word!r} in {command.name}"
            command, i = sub, i + 1
        else:
            i += 1  # an argument
    assert not isinstance(command, click.Group), f"soulpass {' '.join(words)}: names a group, not a command"


@pytest.mark.parametrize("words", COMMANDS, ids=[" ".join(w)[:60] for w in COMMANDS])
def test_every_command_the_readme_shows_exists(words: list[str]) -> None:
    _check(words)


def test_the_check_catches_a_wrong_command() -> None:
    for bad in (["import-form", "chatgpt", "x"], ["search", "q", "--nope"], ["sandbox"]):
        with pytest.raises(AssertionError):
            _check(bad)


def _env(home: Path) -> dict[str, str]:
    """The README's reader: a fresh HOME (``~/.soulpass``), this interpreter's ``soulpass`` first on PATH."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("SOULPASS_")}
    return env | {"HOME": str(home), "PATH": f"{Path(sys.executable).parent}:{env.get('PATH', '')}",
                  "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t",
                  "GIT_COMMITTER_EMAIL": "t@t"}


def test_the_command_line_tour_runs(tmp_path: Path) -> None:
    script = "set -euo pipefail\n" + _block("Command line", "bash")
    done = subprocess.run(["bash", "-c", script], cwd=tmp_path, env=_env(tmp_path), capture_output=True, text=True,
                          timeout=600, check=False)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "Ann lives in Paris" in done.stdout  # the search found the fact the tour wrote


def test_the_python_tour_runs(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, "-c", _block("Python", "python")], cwd=tmp_path, env=_env(tmp_path),
                          capture_output=True, text=True, timeout=600, check=False)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "Paris" in done.stdout.splitlines()[0]  # the session's search found what it wrote, before archive
