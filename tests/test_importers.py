"""Importers from ChatGPT, Claude, Mem0, Basic Memory and a generic JSONL: fixtures in each tool's
documented format, written here; imports keep times and speakers, are idempotent (twice adds
nothing; a session replayed 30 times leaves < 1% duplicates) and report bad items as failures."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, get_args

import anyio
import pytest
from click.testing import CliRunner

import soulpass
from postgres_helpers import postgres_url
from soulpass import Limits
from soulpass.cli.main import cli
from soulpass.engine import Account
from soulpass.errors import InvalidInput
from soulpass.importers import FILE_SOURCES, import_from
from soulpass.records import SemanticFact

T0 = 1_700_000_000.0  # 2023-11-14T22:13:20Z


def _chatgpt_node(nid: str, parent: str | None, children: list[str], role: str | None, text: str,
                  when: float | None) -> dict[str, Any]:
    msg: dict[str, Any] | None = None if role is None else {
        "id": nid, "author": {"role": role, "name": None, "metadata": {}}, "create_time": when,
        "content": {"content_type": "text", "parts": [text]}, "status": "finished_successfully",
        "metadata": {}, "recipient": "all"}
    return {"id": nid, "message": msg, "parent": parent, "children": children}


def chatgpt_export(path: Path) -> Path:
    """Two conversations; the first has a regenerated answer (a second branch) and a system message."""
    mapping = {
        "root": _chatgpt_node("root", None, ["sys"], None, "", None),
        "sys": _chatgpt_node("sys", "root", ["u1"], "system", "You are ChatGPT.", T0),
        "u1": _chatgpt_node("u1", "sys", ["a1", "a1b"], "user", "I moved to Lisbon last week.", T0 + 10),
        "a1": _chatgpt_node("a1", "u1", [], "assistant", "An old answer that was regenerated.", T0 + 20),
        "a1b": _chatgpt_node("a1b", "u1", ["u2"], "assistant", "Welcome to Lisbon! How is it?", T0 + 21),
        "u2": _chatgpt_node("u2", "a1b", ["a2"], "user", "Sunny, and I love the tiles.", T0 + 30),
        "a2": _chatgpt_node("a2", "u2", [], "assistant", "The azulejos are beautiful.", T0 + 40),
    }
    second = {"m1": _chatgpt_node("m1", None, ["m2"], "user", "What is 2+2?", T0 + 100),
              "m2": _chatgpt_node("m2", "m1", [], "assistant", "4.", None)}
    convs = [{"title": "Moving", "create_time": T0, "update_time": T0 + 40, "mapping": mapping,
              "current_node": "a2", "conversation_id": "c-1", "id": "c-1"},
             {"title": "Maths", "create_time": T0 + 100, "mapping": second, "current_node": "m2", "id": "c-2"},
             {"title": "broken", "id": "c-3"}]
    path.write_text(json.dumps(convs), encoding="utf-8")
    return path


def claude_export(path: Path) -> Path:
    convs = [{"uuid": "k-1", "name": "Garden", "created_at": "2024-03-01T09:00:00.000000Z",
              "updated_at": "2024-03-01T09:05:00Z", "account": {"uuid": "acc"},
              "chat_messages": [
                  {"uuid": "k-1-1", "sender": "human", "text": "My tomatoes have blight.",
                   "content": [{"type": "text", "text": "My tomatoes have blight."}],
                   "created_at": "2024-03-01T09:00:00.000000Z", "attachments": [], "files": []},
                  {"uuid": "k-1-2", "sender": "assistant", "text": "",
                   "content": [{"type": "text", "text": "Remove the affected leaves."},
                               {"type": "tool_use", "name": "search", "input": {}}],
                   "created_at": "2024-03-01T09:01:00.000000Z", "attachments": [], "files": []}]},
             {"uuid": "k-2", "name": "no messages"}]
    path.write_text(json.dumps(convs), encoding="utf-8")
    return path


def mem0_export(path: Path) -> Path:
    doc = {"results": [
        {"id": "m-1", "memory": "Is vegetarian", "hash": "h1", "metadata": {"source": "chat"},
         "categories": ["food"], "created_at": "2024-07-20T01:02:03.000000-07:00", "updated_at": None,
         "user_id": "alice"},
        {"id": "m-2", "memory": "Lives in Lisbon", "hash": "h2", "metadata": None,
         "created_at": "2024-07-21T10:00:00Z", "user_id": "alice"},
        {"id": "m-3", "hash": "h3", "created_at": "2024-07-21T10:00:00Z"}],
        "relations": [{"source": "alice", "relationship": "lives_in", "target": "lisbon"}]}
    path.write_text(json.dumps(doc), encoding="utf-8")
    return path


def basic_memory_folder(root: Path) -> Path:
    (root / "coffee").mkdir(parents=True)
    (root / ".basic-memory").mkdir()
    (root / "coffee" / "brewing.md").write_text(
        "---\ntitle: Coffee Brewing Methods\ntype: note\ntags: [coffee, brewing]\npermalink: coffee-brewing\n---\n\n"
        "# Coffee Brewing Methods\n\n## Observations\n- [method] Pour over gives more clarity than a French press\n"
        "- [preference] Ethiopian beans suit lighter roasts #taste (tried in May)\n\n## Relations\n"
        "- relates_to [[Coffee Bean Origins]]\n- requires [[Proper Grinding]] (a burr grinder)\n", encoding="utf-8")
    (root / "origins.md").write_text("Beans from Ethiopia and Colombia, see [[Coffee Brewing Methods]].\n",
                                     encoding="utf-8")
    (root / "bad.md").write_bytes(b"\xff\xfe not utf-8")
    (root / ".basic-memory" / "config.md").write_text("ignored", encoding="utf-8")
    return root


def jsonl_file(path: Path, shift: float = 0.0, convs: int = 1) -> Path:
    lines = []
    for c in range(convs):
        for n in range(10):
            role = "user" if n % 2 == 0 else "assistant"
            lines.append(json.dumps({"conversation_id": f"s-{c}", "role": role, "text": f"message {n} of {c}",
                                     "timestamp": T0 + 60 * n + shift}))
    lines.append('{"role": "user"}')
    lines.append("not json")
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


SAMPLES = {"chatgpt": chatgpt_export, "claude": claude_export, "jsonl": jsonl_file, "mem0": mem0_export,
           "basic-memory": basic_memory_folder}


@pytest.fixture
def acct(tmp_path: Path) -> Account:
    return soulpass.open(tmp_path / "home").create_account("ann")


@pytest.fixture(params=["files", "postgres"])
def any_acct(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Account]:
    """An account on each backend: the importers write through the library only."""
    if request.param == "files":
        yield soulpass.open(tmp_path / "home").create_account("ann")
        return
    for url in postgres_url(tmp_path):
        acct = soulpass.open(url).create_account("ann")
        yield acct
        acct.close()


def _turns(acct: Account) -> list[Any]:
    return sorted([*acct.records("turn_user"), *acct.records("turn_llm")], key=lambda r: r.created_at)


def test_chatgpt_keeps_the_shown_branch_times_and_speakers(acct: Account, tmp_path: Path) -> None:
    summary = import_from(acct, "chatgpt", chatgpt_export(tmp_path / "conversations.json"))
    turns = _turns(acct)
    assert [t.text_excerpt for t in turns] == [
        "I moved to Lisbon last week.", "Welcome to Lisbon! How is it?", "Sunny, and I love the tiles.",
        "The azulejos are beautiful.", "What is 2+2?", "4."]
    assert [t.kind for t in turns[:2]] == ["turn_user", "turn_llm"] and turns[1].agent == "assistant"
    assert turns[0].created_at == datetime.fromtimestamp(T0 + 10, UTC)
    assert turns[-1].created_at == datetime.fromtimestamp(T0 + 100, UTC)  # no time: the conversation's
    assert summary.imported["turn"] == 6 and len(summary.versions) == 2
    assert [f.item for f in summary.failures] == ["c-3"]
    again = import_from(acct, "chatgpt", tmp_path / "conversations.json")
    assert again.imported["turn"] == 0 and again.duplicates["turn"] == 6 and not again.versions
    assert len(_turns(acct)) == 6


def test_claude_export(acct: Account, tmp_path: Path) -> None:
    summary = import_from(acct, "claude", claude_export(tmp_path / "conversations.json"))
    turns = _turns(acct)
    assert [(t.kind, t.text_excerpt) for t in turns] == [
        ("turn_user", "My tomatoes have blight."), ("turn_llm", "Remove the affected leaves.")]
    assert turns[1].created_at == datetime(2024, 3, 1, 9, 1, tzinfo=UTC)
    assert [f.item for f in summary.failures] == ["k-2"]
    assert import_from(acct, "claude", tmp_path / "conversations.json").duplicates["turn"] == 2
    assert len(_turns(acct)) == 2


def test_mem0_memories_become_sensory_records_and_relations_facts(acct: Account, tmp_path: Path) -> None:
    summary = import_from(acct, "mem0", mem0_export(tmp_path / "mem0.json"))
    recs: list[Any] = sorted(acct.records("sensory"), key=lambda r: r.created_at)
    assert [r.content for r in recs] == ["Is vegetarian", "Lives in Lisbon"]
    assert recs[0].created_at == datetime(2024, 7, 20, 8, 2, 3, tzinfo=UTC) and recs[0].source == "mem0:m-1"
    assert {"user:alice", "category:food", "meta:source=chat"} <= set(recs[0].tags)
    facts: list[Any] = list(acct.records("fact"))
    assert [(f.subject, f.predicate, f.object) for f in facts] == [("alice", "lives_in", "lisbon")]
    assert [f.item for f in summary.failures] == ["m-3"]
    again = import_from(acct, "mem0", tmp_path / "mem0.json")
    assert dict(again.imported) == {} and again.duplicates == {"sensory": 2, "fact": 1}
    assert len(list(acct.records("sensory"))) == 2


def test_basic_memory_notes_become_journal_entries_and_relations_facts(acct: Account, tmp_path: Path) -> None:
    summary = import_from(acct, "basic-memory", basic_memory_folder(tmp_path / "bm"))
    entries = {e.title: e for e, _ in acct.journal().entries()}
    assert set(entries) == {"Coffee Brewing Methods", "origins"}
    brewing = entries["Coffee Brewing Methods"]
    assert "- [method] Pour over" in brewing.text and {"coffee", "brewing", "bm-type:note"} <= set(brewing.tags)
    facts = {(f.subject, f.predicate, f.object) for f in acct.records("fact") if isinstance(f, SemanticFact)}
    assert facts == {("Coffee Brewing Methods", "relates_to", "Coffee Bean Origins"),
                     ("Coffee Brewing Methods", "requires", "Proper Grinding")}
    assert [f.item for f in summary.failures] == ["bad.md"]
    assert summary.imported == {"journal": 2, "fact": 2}
    again = import_from(acct, "basic-memory", tmp_path / "bm")
    assert again.imported.total() == 0 and again.duplicates == {"journal": 2, "fact": 2}
    assert len(acct.journal().entries()) == 2


def test_jsonl_failures_name_lines_and_dry_run_writes_nothing(acct: Account, tmp_path: Path) -> None:
    path = jsonl_file(tmp_path / "m.jsonl")
    head = acct.head()
    planned = import_from(acct, "jsonl", path, dry_run=True)
    assert planned.imported["turn"] == 10 and acct.head() == head and not acct.sandboxes()
    summary = import_from(acct, "jsonl", path)
    assert [f.item for f in summary.failures] == ["line 11", "line 12"]
    assert [t.text_excerpt for t in _turns(acct)][:2] == ["message 0 of 0", "message 1 of 0"]


def test_a_session_replayed_30_times_leaves_under_1_percent_duplicates(any_acct: Account, tmp_path: Path) -> None:
    for replay in range(30):  # a replay loop re-stamps the same messages each time
        import_from(any_acct, "jsonl", jsonl_file(tmp_path / "replay.jsonl", shift=3600.0 * replay, convs=3))
    texts = [t.text_excerpt for t in _turns(any_acct)]
    assert len(texts) == 30 and (len(texts) - len(set(texts))) / len(texts) < 0.01


def test_unknown_source_and_unreadable_file(acct: Account, tmp_path: Path) -> None:
    with pytest.raises(InvalidInput, match="unknown import source"):
        import_from(acct, "letta", tmp_path)
    (tmp_path / "x.json").write_text("{}", encoding="utf-8")
    with pytest.raises(InvalidInput, match="list of conversations"):
        import_from(acct, "chatgpt", tmp_path / "x.json")


def test_cli_import(tmp_path: Path) -> None:
    home = tmp_path / "home"
    soulpass.open(home).create_account("ann")
    path = chatgpt_export(tmp_path / "conversations.json")
    runner = CliRunner()
    out = runner.invoke(cli, ["--home", str(home), "import", "chatgpt", str(path), "-a", "ann", "--json"])
    assert out.exit_code == 0, out.output
    doc = json.loads(out.stdout)
    assert doc["imported"] == {"turn": 6} and doc["failures"][0]["item"] == "c-3"
    out = runner.invoke(cli, ["--home", str(home), "import", "chatgpt", str(path), "-a", "ann"])
    assert out.exit_code == 0 and "duplicates" in out.stdout and "c-3" in out.stdout


@pytest.mark.parametrize("source", ["chatgpt", "claude", "jsonl", "mem0", "basic-memory"])
def test_every_source_is_a_subcommand_of_import(tmp_path: Path, source: str) -> None:
    home = tmp_path / "home"
    path = SAMPLES[source](tmp_path / "source")
    out = CliRunner().invoke(cli, ["--home", str(home), "import", source, str(path), "-a", "ann", "--create",
                                   "--json"])
    assert out.exit_code == 0, out.output
    assert sum(json.loads(out.stdout)["imported"].values()) > 0


def test_import_from_still_imports_and_says_the_new_form(tmp_path: Path) -> None:
    home = tmp_path / "home"
    path = chatgpt_export(tmp_path / "conversations.json")
    out = CliRunner().invoke(cli, ["--home", str(home), "import-from", "chatgpt", str(path), "-a", "ann", "--create",
                                   "--json"])
    assert out.exit_code == 0, out.output
    assert json.loads(out.stdout)["imported"] == {"turn": 6}  # stdout stays the JSON alone
    assert "deprecated" in out.stderr and f"soulpass import chatgpt {path} -a ann --create --json" in out.stderr


@pytest.mark.parametrize("verb", [("import", "chatgpt"), ("import-from", "chatgpt")])
def test_a_dry_run_with_create_creates_no_account(tmp_path: Path, verb: tuple[str, str]) -> None:
    home = tmp_path / "home"
    soulpass.open(home).create_account("other")
    before = sorted(p.relative_to(home) for p in home.rglob("*"))
    path = chatgpt_export(tmp_path / "conversations.json")
    out = CliRunner().invoke(cli, ["--home", str(home), *verb, str(path), "-a", "ann", "--create", "--dry-run",
                                   "--json"])
    assert out.exit_code == 0, out.output
    doc = json.loads(out.stdout)
    assert doc["dry_run"] is True and doc["imported"] == {"turn": 6}  # what a new account would take
    assert soulpass.open(home).accounts() == ["other"]
    assert sorted(p.relative_to(home) for p in home.rglob("*")) == before  # nothing written anywhere


def test_a_dry_run_on_a_new_account_without_create_says_to_add_it(tmp_path: Path) -> None:
    path = chatgpt_export(tmp_path / "conversations.json")
    out = CliRunner().invoke(cli, ["--home", str(tmp_path / "home"), "import", "chatgpt", str(path), "-a", "ann",
                                   "--dry-run"])
    assert out.exit_code == 3
    assert "account 'ann' does not exist" in out.stderr and "add --create" in out.stderr


def test_a_message_the_sandbox_refuses_is_a_failure_and_the_rest_is_stored(tmp_path: Path) -> None:
    acct = soulpass.open(tmp_path / "home", limits=Limits(max_body_chars=40)).create_account("ann")
    path = tmp_path / "long.jsonl"
    path.write_text("\n".join(json.dumps({"conversation_id": "s", "role": r, "text": t, "timestamp": T0 + n})
                              for n, (r, t) in enumerate([("user", "short"), ("assistant", "x" * 41),
                                                          ("user", "also short")])), encoding="utf-8")
    summary = import_from(acct, "jsonl", path)
    assert [f.item for f in summary.failures] == ["s/1"] and "41 characters" in summary.failures[0].reason
    assert [t.text_excerpt for t in _turns(acct)] == ["short", "also short"]


def test_mcp_import_memories_takes_the_file_text(tmp_path: Path) -> None:
    Client = pytest.importorskip("mcp", reason="the 'mcp' extra is not installed").Client
    from soulpass.mcp.server import ImportSource, build_server

    engine = soulpass.open(tmp_path / "home", embedder="none")
    engine.create_account("ann")
    text = mem0_export(tmp_path / "mem0.json").read_text(encoding="utf-8")
    assert set(get_args(ImportSource)) == set(FILE_SOURCES)

    async def session() -> list[dict[str, Any]]:
        async with Client(build_server(engine, "ann")) as client:
            out = []
            for _ in range(2):
                result = await client.call_tool("import_memories", {"source": "mem0", "content": text})
                assert not result.is_error, result.content
                out.append(json.loads(result.content[0].text))
            refused = await client.call_tool("import_memories", {"source": "basic-memory", "content": text})
            assert refused.is_error
            return out

    first, second = anyio.run(session)
    assert first["imported"] == {"sensory": 2, "fact": 1} and first["failures"][0]["item"] == "m-3"
    assert second["imported"] == {} and second["duplicates"] == {"sensory": 2, "fact": 1}


def test_rest_import_takes_the_file_text_and_is_idempotent(client: Any, world: Any, tmp_path: Path) -> None:
    text = jsonl_file(tmp_path / "m.jsonl").read_text(encoding="utf-8")
    url = "/v1/accounts/ann/import"
    first = client.post(url, headers=world.ann.auth, json={"source": "jsonl", "content": text})
    assert first.status_code == 200, first.text
    assert first.json()["imported"] == {"turn": 10} and [f["item"] for f in first.json()["failures"]] == [
        "line 11", "line 12"]
    again = client.post(url, headers=world.ann.auth, json={"source": "jsonl", "content": text}).json()
    assert again["imported"] == {} and again["duplicates"] == {"turn": 10} and again["versions"] == []
    assert client.post(url, headers=world.bob.auth, json={"source": "jsonl", "content": text}).status_code == 403
    assert client.post(url, headers=world.ann.auth, json={"source": "basic-memory", "content": ""}).status_code == 422
