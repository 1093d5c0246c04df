"""The CLI end to end through click's runner: real home folders, real files."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

import soulpass
from soulpass.cli.main import cli

DOCS = Path(__file__).resolve().parents[1] / "docs" / "cli.md"


@pytest.fixture
def run(tmp_path: Path) -> Iterator[object]:
    runner = CliRunner()
    home = tmp_path / "home"

    def invoke(*args: str, code: int = 0, input: str | None = None) -> str:
        result = runner.invoke(cli, ["--home", str(home), *args], input=input,
                               env={"SOULPASS_ACCOUNT": "", "SOULPASS_HOME": ""})
        assert result.exit_code == code, f"{args}: exit {result.exit_code}\n{result.output}\n{result.exception!r}"
        return result.output

    yield invoke


def test_full_session_through_the_cli(run, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    run("account", "create", "ann")
    sid = run("sandbox", "create", "chat", "--account", "ann").strip()
    tu = run("write", "turn", sid, "-a", "ann", "--text", "I moved to Paris").strip()
    assert tu.startswith("tu_temp_")
    episode = {"turn_refs": [tu], "summary": {"action_taken": "talked", "key_outcome": "moved",
                                              "future_implication": "update address"}}
    ep_file = tmp_path / "ep.json"
    ep_file.write_text(json.dumps(episode), encoding="utf-8")
    run("write", "episode", sid, "-a", "ann", "--file", str(ep_file))
    run("write", "fact", sid, "-a", "ann", "--subject", "ann", "--predicate", "lives in", "--object", "Paris",
        "--confidence", "0.9")
    run("write", "state", sid, "ire", "-a", "ann", "--data", '{"mood": "calm"}')
    run("write", "core", sid, "-a", "ann", "--section", "identity", "--key", "name", "--value", "EVA",
        "--confidence", "0.95", "--reason", "introduced herself")
    shown = json.loads(run("sandbox", "show", sid, "-a", "ann", "--json"))
    assert shown["metadata"]["turn_count"] == 1 and len(shown["new_episodes"]) == 1

    plan = json.loads(run("archive", sid, "-a", "ann", "--dry-run", "--json"))
    assert plan["status"] == "planned" and plan["version"] == 1
    assert json.loads(run("log", "-a", "ann", "--json")) == []  # dry run wrote nothing

    done = json.loads(run("archive", sid, "-a", "ann", "--json"))
    assert done["status"] == "committed" and done["added"]["episode"]
    ep_id = done["added"]["episode"][0]
    record = json.loads(run("show", ep_id, "-a", "ann", "--json"))
    assert record["turn_refs"] == done["added"]["turn_user"]
    assert json.loads(run("show", "core", "-a", "ann", "--json"))["identity"] == {"name": "EVA"}
    assert json.loads(run("show", "state:ire", "-a", "ann", "--json"))["data"] == {"mood": "calm"}

    sid2 = run("sandbox", "create", "later", "-a", "ann").strip()
    run("write", "fact", sid2, "-a", "ann", "--content", "ann lives in Oslo", "--confidence", "0.9")
    run("archive", sid2, "-a", "ann")
    d = json.loads(run("diff", "1", "2", "-a", "ann", "--json"))
    assert len(d["superseded"]) == 1 and d["added"]["fact"]
    old_fact = d["superseded"][0]["fact"]
    assert json.loads(run("show", old_fact, "-a", "ann", "--at", "1", "--json"))["superseded_by"] is None
    assert json.loads(run("show", old_fact, "-a", "ann", "--json"))["superseded_by"] == d["superseded"][0]["by"]

    assert "version 3" in run("rollback", "1", "-a", "ann")
    assert json.loads(run("show", old_fact, "-a", "ann", "--json"))["superseded_by"] is None
    entries = json.loads(run("log", "-a", "ann", "--json"))
    assert [e["version"] for e in entries] == [1, 2, 3] and entries[2]["kind"] == "rollback"
    assert "rollback" in run("log", "-a", "ann")


def test_discard_and_account_env(run, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    run("account", "create", "bob")
    sid = run("sandbox", "create", "x", "-a", "bob").strip()
    run("write", "turn", sid, "-a", "bob", "--text", "hello")
    run("discard", sid, "-a", "bob")
    assert json.loads(run("sandbox", "list", "-a", "bob", "--json")) == []
    assert json.loads(run("account", "list", "--json")) == [{"account": "bob", "version": 0}]


@pytest.mark.parametrize(("args", "code", "needle"), [
    (("show", "EP_20260101_001", "-a", "nobody"), 3, "does not exist"),
    (("sandbox", "create", "x", "-a", "../etc"), 2, "account name"),
    (("show", "../../passwd", "-a", "ann"), 2, "record id"),
    (("show", "core", "-a", "ann", "--at", "9"), 3, "version 9"),
    (("archive", "sb_nope", "-a", "ann"), 3, "sb_nope"),
    (("diff", "0", "5", "-a", "ann"), 3, "version 5"),
])
def test_errors_are_one_line_with_exit_codes(run, args: tuple[str, ...], code: int, needle: str) -> None:  # type: ignore[no-untyped-def]
    run("account", "create", "ann")
    out = run(*args, code=code)
    assert needle in out and "Traceback" not in out


def test_bad_json_file_is_invalid_input(run, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    run("account", "create", "ann")
    sid = run("sandbox", "create", "x", "-a", "ann").strip()
    bad = tmp_path / "bad.json"
    bad.write_bytes(b'{"summary": "\xff\xfe"}')
    assert "not valid UTF-8" in run("write", "episode", sid, "-a", "ann", "--file", str(bad), code=2)
    bad.write_text("{nope", encoding="utf-8")
    assert "not valid JSON" in run("write", "episode", sid, "-a", "ann", "--file", str(bad), code=2)
    assert json.loads(run("sandbox", "show", sid, "-a", "ann", "--json"))["metadata"]["event_count"] == 0


def test_demo_runs_the_seed_flow(run) -> None:  # type: ignore[no-untyped-def]
    out = run("demo")
    assert "demo ok" in out and "105" in out
    entries = json.loads(run("log", "-a", "User01", "--json"))
    assert [e["counts"]["episode"] for e in entries] == [100, 103, 105]


def test_schema_export(run, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    run("schema", "export", str(tmp_path / "schemas"))
    episode = json.loads((tmp_path / "schemas" / "record.episode.schema.json").read_text(encoding="utf-8"))
    for field in ("episode_id", "turn_refs", "persona_id", "event_id", "situation_context", "summary",
                  "RI_global", "encoding_level"):
        assert field in episode["properties"]
    assert (tmp_path / "schemas" / "view.session_buffer.schema.json").exists()


def _commands(group: click.Group, prefix: str = "") -> Iterator[tuple[str, click.Command]]:
    ctx = click.Context(group)
    for name in sorted(group.list_commands(ctx)):  # the root loads its commands when asked for them
        cmd = group.get_command(ctx, name)
        assert cmd is not None, name
        path = f"{prefix}{name}"
        yield path, cmd
        if isinstance(cmd, click.Group):
            yield from _commands(cmd, path + " ")


@pytest.mark.parametrize(("path", "cmd"), list(_commands(cli)), ids=[p for p, _ in _commands(cli)])
def test_every_command_has_help_and_docs(path: str, cmd: click.Command) -> None:
    assert cmd.help, f"soulpass {path} has no help text"
    assert f"soulpass {path}" in DOCS.read_text(encoding="utf-8"), f"docs/cli.md does not mention soulpass {path}"


def test_os_errors_are_one_line(run, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    run("account", "create", "ann")
    sid = run("sandbox", "create", "x", "-a", "ann").strip()
    out = run("write", "episode", sid, "-a", "ann", "--file", str(tmp_path / "missing.json"), code=1)
    assert "FileNotFoundError" in out and "Traceback" not in out


def test_search_and_index_commands(run, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    pytest.importorskip("onnxruntime", reason="the 'embed' extra is not installed")
    run("account", "create", "ann")
    sid = run("sandbox", "create", "x", "-a", "ann").strip()
    run("write", "turn", sid, "-a", "ann", "--text", "My cat Miso loves tuna")
    run("write", "turn", sid, "-a", "ann", "--speaker", "eva", "--text", "Tuna is a treat for cats")
    run("archive", sid, "-a", "ann")
    hits = json.loads(run("search", "Miso", "-a", "ann", "--json"))
    assert hits[0]["text"] == "My cat Miso loves tuna" and hits[0]["version"] == 1
    only_eva = json.loads(run("search", "tuna", "-a", "ann", "--kind", "turn_llm", "--json"))
    assert [h["kind"] for h in only_eva] == ["turn_llm"]
    status = json.loads(run("index", "status", "-a", "ann", "--json"))
    assert status["catalog_version"] == 1 and status["vectors"] == 2 and status["pending_embeddings"] == 0
    assert status["fulltext"] == "fts5 (default)"
    if importlib.util.find_spec("tantivy") is not None:  # chosen once, recorded for the next command
        assert run("--fulltext", "tantivy", "search", "Miso", "-a", "ann", "--json")
        assert json.loads(run("index", "status", "-a", "ann", "--json"))["fulltext"] == "tantivy"
    assert "rebuilt at version 1" in run("index", "rebuild", "-a", "ann")
    assert json.loads(run("search", "Miso", "-a", "ann", "--json"))[0]["id"] == hits[0]["id"]


def test_index_rebuild_graph_builds_the_vector_graph_again_from_the_stored_vectors(  # type: ignore[no-untyped-def]
        run, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``index rebuild --graph``: a graph saved by an earlier release (no note beside it: built with
    64) is built again from the stored vectors, wide, and searched; with too few vectors for a
    graph there is nothing to rebuild. (A graph from 64 rows here instead of 16,384.)"""
    import functools
    from datetime import UTC, datetime, timedelta

    from soulpass.ids import new_temp_id
    from soulpass.records import TurnUser
    from soulpass.vectors import hnsw

    monkeypatch.setattr("soulpass.vectors.HnswIndex",
                        functools.partial(hnsw.HnswIndex, ann_threshold=64, seal_rows=48))
    run("account", "create", "ann")
    assert json.loads(run("index", "rebuild", "--graph", "-a", "ann", "--json"))["graph_rows"] == 0
    assert "too few vectors for a graph" in run("index", "rebuild", "--graph", "-a", "ann")
    acct = soulpass.open(tmp_path / "home").account("ann")
    start = datetime(2025, 3, 1, tzinfo=UTC)
    acct.bulk_append([TurnUser(id=new_temp_id("turn_user"), created_at=start + timedelta(minutes=i),
                               text_excerpt=f"note {i}: the {('red', 'blue', 'green')[i % 3]} kite flew at {i} metres")
                      for i in range(120)])
    acct.index()
    acct.close()
    (graph,) = (tmp_path / "home").rglob("graph-*.usearch")
    note = graph.with_suffix(".json")
    note.unlink()  # as an earlier release saved it
    before = graph.stat().st_mtime_ns
    out = run("index", "rebuild", "--graph", "-a", "ann")
    assert "rebuilding the vector graph" in out and "120/120" in out  # the progress bar's last state
    assert "vector graph rebuilt from the stored vectors: 120 rows" in out
    assert graph.stat().st_mtime_ns != before
    assert json.loads(note.read_text("utf-8")) == {"expansion_add": hnsw.EXPANSION_ADD}
    hits = json.loads(run("search", "the green kite flew at 41 metres", "-a", "ann", "--json"))
    assert "note 41:" in hits[0]["text"]


def test_a_command_loaded_beside_another_keeps_every_subcommand() -> None:
    """Loading ``search`` also registers ``index`` (one module defines both): ``index``'s
    subcommands from its other modules (``drain``) must be there too, in a fresh process where
    nothing else imported them first."""
    code = ("from click.testing import CliRunner\n"
            "from soulpass.cli.main import cli\n"
            "r = CliRunner()\n"
            "r.invoke(cli, ['search', '--help'])\n"
            "out = r.invoke(cli, ['index', 'drain', '--help'])\n"
            "print(out.exit_code, 'No such command' in out.output)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.stdout.split() == ["0", "False"], done.stdout + done.stderr


def test_the_command_table_matches_the_commands() -> None:
    """``soulpass.cli.commands.COMMANDS`` (what `--help` lists without importing anything) names every
    command, the module defining it, those adding its subcommands, and its help, exactly."""
    import importlib
    import pkgutil

    import click

    import soulpass.cli as cli_pkg
    from soulpass.cli.commands import COMMANDS

    found: dict[str, tuple[tuple[str, ...], str]] = {}
    for info in pkgutil.iter_modules(cli_pkg.__path__):
        module = importlib.import_module(f"soulpass.cli.{info.name}")
        for command in getattr(module, "COMMANDS", []):
            if not isinstance(command, click.Command):
                continue  # the table itself
            modules = [info.name]
            if isinstance(command, click.Group):
                for sub in command.commands.values():
                    owner = sub.callback.__module__.rsplit(".", 1)[1] if sub.callback else info.name
                    if owner not in modules:
                        modules.append(owner)
            found[str(command.name)] = (modules[0], *sorted(modules[1:])), command.get_short_help_str(10_000)
    table = {name: ((mods[0], *sorted(mods[1:])), text) for name, (mods, text) in COMMANDS.items()}
    assert table == found


def test_help_imports_no_engine() -> None:
    """`soulpass --help` lists every command from the table: the engine, pydantic and numpy are not imported."""
    code = ("import sys\nfrom soulpass.cli.main import cli\n"
            "try:\n    cli(['--help'])\nexcept SystemExit:\n    pass\n"
            "print(sorted(m for m in ('soulpass.engine', 'numpy', 'pydantic', 'soulpass.index.search')"
            " if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True).stdout
    assert "migrate" in out and "serve" in out  # every command listed
    assert out.strip().splitlines()[-1] == "[]"


def test_startup_benchmark_smoke(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``benchmarks/startup.py`` (three repeats, no earlier commit): medians written, the target judged.
    Three, so one start slowed by the machine's load does not decide which is faster."""
    from bench_helpers import benchmark_module

    out = tmp_path / "startup.json"
    with benchmark_module("startup") as bench:
        assert bench.main(["--repeats", "3", "--out", str(out)]) == 0
    result = json.loads(out.read_text("utf-8"))
    now = result["median_s"]["now"]
    assert 0 < now["python (nothing)"] <= now["import soulpass"] and now["soulpass --help"] > 0
    assert result["pass"] == (now["soulpass --help"] <= result["target_help_s"])
    assert "soulpass --help" in capsys.readouterr().out


# Modules a search never needs (each costs a cold start milliseconds): YAML and the prose models
# (Markdown copies), the archive planner and graph, editing and forgetting, the journal, the models
# and backends not in use.
WRITE_ONLY_MODULES = ("yaml", "soulpass.prose", "soulpass.consolidation.plan", "soulpass.consolidation.gks",
                      "soulpass.consolidation.rules", "soulpass.engine.editing", "soulpass.engine.forget",
                      "soulpass.engine.journal",
                      "soulpass.embed.minilm", "soulpass.embed.remote", "soulpass.vectors.chroma")


def test_a_search_in_a_fresh_process_builds_no_validator(tmp_path: Path) -> None:
    """Opening an account and searching builds only the pydantic validators of what it reads (the
    hit's record model; the others are built when first used: ~0.07 s of a cold start) and not the
    consolidation rules; nor does it import what only writes, edits, Markdown or other backends need."""
    acct = soulpass.open(tmp_path, embedder="none").account("a", create=True)
    sandbox = acct.create_sandbox("s")
    sandbox.add_turn("user", "the violin lesson moved to Tuesday")
    sandbox.archive()
    code = ("import sys, soulpass\nfrom pydantic import BaseModel\n"
            f"sp = soulpass.open({str(tmp_path)!r}, embedder='none')\n"
            "hits = sp.account('a').search('violin', 3)\n"
            "def subs(c):\n    for s in c.__subclasses__():\n        yield s\n        yield from subs(s)\n"
            "print(len(hits), sorted(c.__name__ for c in subs(BaseModel) if c.__dict__.get('__pydantic_complete__')),"
            " sp._rules)\n"
            f"print(sorted(m for m in {WRITE_ONLY_MODULES!r} if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True).stdout
    assert out.strip().splitlines() == ["1 ['TurnUser'] None", "[]"]


def test_a_search_of_a_current_index_loads_no_pydantic(tmp_path: Path) -> None:
    """Where the index is current (the cold open of a large account), opening it and searching
    reads catalog rows, never a record: neither pydantic nor the record models load (~0.05 s of a
    cold start), nor what sandboxes validate and archive with; a write afterwards loads them and works."""
    acct = soulpass.open(tmp_path, embedder="none").account("a", create=True)
    sandbox = acct.create_sandbox("s")
    sandbox.add_turn("user", "the violin lesson moved to Tuesday")
    sandbox.archive()
    assert [h.id for h in acct.search("violin", 3)]  # the catalog catches up here, not in the child
    heavy = ("pydantic", "soulpass.records", "soulpass.index.catalog.make_rows", "soulpass.sessions.inputs",
             "soulpass.consolidation.archive")
    code = ("import sys, soulpass\n"
            f"acct = soulpass.open({str(tmp_path)!r}, embedder='none').account('a')\n"
            "hits = acct.search('violin', 3)\n"
            f"print(len(hits), hits[0].text, sorted(m for m in {heavy!r} if m in sys.modules))\n"
            "s = acct.create_sandbox('t'); s.add_turn('user', 'the cello lesson too'); s.archive()\n"
            f"print(len(acct.search('lesson', 3)), sorted(m for m in {heavy!r} if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True).stdout
    assert out.strip().splitlines() == ["1 the violin lesson moved to Tuesday []", f"2 {sorted(heavy)}"]
