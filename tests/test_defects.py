"""Issue 16, part 3: the defects a newcomer hit, each pinned by a test that failed before its fix.

Tracebacks become ``InvalidInput`` naming the field; an archive of nothing commits nothing; diff
shows what a version creates and what changed inside a document; the log says what a version
added; the CLI keeps stdout for data."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from fastapi.testclient import TestClient

import soulpass
from server_world import World
from soulpass import ConfigError, InvalidInput
from soulpass.cli.main import cli
from soulpass.consolidation.rules import Rules
from soulpass.engine.views import Diff


def nested(depth: int) -> dict[str, Any]:
    """``{"a": [{"a": [...]}]}``, ``depth`` objects deep."""
    root: dict[str, Any] = {}
    cur = root
    for _ in range(depth):
        cur["a"] = [{}]
        cur = cur["a"][0]
    return root


@pytest.fixture
def sp(tmp_path: Path) -> Iterator[soulpass.Soulpass]:
    yield soulpass.open(tmp_path / "home", embedder="none")


@pytest.fixture
def acct(sp: soulpass.Soulpass) -> soulpass.Account:
    return sp.create_account("ann")


@pytest.fixture
def run(tmp_path: Path) -> Iterator[Any]:
    runner = CliRunner()
    home = tmp_path / "cli-home"

    def invoke(*args: str, code: int = 0, input: str | bytes | None = None) -> Any:
        result = runner.invoke(cli, ["--home", str(home), *args], input=input,
                               env={"SOULPASS_ACCOUNT": "", "SOULPASS_HOME": ""})
        assert result.exit_code == code, f"{args}: exit {result.exit_code}\n{result.output}\n{result.exception!r}"
        return result

    yield invoke


# --- (a) tracebacks instead of errors, loose coercion ---------------------------------------


def test_diff_with_a_missing_version_is_invalid_input(acct: soulpass.Account) -> None:
    with pytest.raises(InvalidInput) as err:
        acct.diff(0, None)  # type: ignore[arg-type]
    assert err.value.details["field"] == "b"


@pytest.mark.parametrize("write", ["state", "profile", "core", "many"])
def test_deeply_nested_input_is_refused_naming_the_field(acct: soulpass.Account, write: str) -> None:
    sb = acct.create_sandbox("s")
    deep = nested(5000)
    calls = {"state": lambda: sb.update_state("mood", deep), "profile": lambda: sb.update_profile(deep),
             "core": lambda: sb.propose_core("identity", deep, key="k", confidence=0.95, reason="r"),
             "many": lambda: sb.write_many(states={"mood": deep})}
    with pytest.raises(InvalidInput, match="nested more than") as err:
        calls[write]()
    assert err.value.details["field"] == {"core": "value", "many": "states"}.get(write, "data")  # the argument given
    assert not sb.buffer().state_deltas and not sb.buffer().profile_updates


def test_reasonably_nested_input_is_kept(acct: soulpass.Account) -> None:
    sb = acct.create_sandbox("s")
    sb.update_state("mood", nested(30))
    assert sb.buffer().state_deltas


def test_deeply_nested_rules_yaml_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="nested too deeply"):
        Rules.from_yaml("episodes: " + "[" * 5000 + "]" * 5000)
    with pytest.raises(ConfigError, match="nested too deeply"):
        Rules.from_yaml("episodes:\n  x: " + "{a: " * 3000 + "}" * 3000)


def test_cli_write_state_with_deeply_nested_json_is_an_error(run: Any) -> None:
    run("account", "create", "ann")
    sid = run("sandbox", "create", "chat", "-a", "ann").output.strip()
    out = run("write", "state", sid, "mood", "-a", "ann", "--data", "[" * 5000 + "]" * 5000, code=2)
    assert "--data" in out.output and "nested" in out.output and "Traceback" not in out.output


def test_cli_journal_add_file_with_invalid_utf8_is_an_error(run: Any, tmp_path: Path) -> None:
    bad = tmp_path / "entry.md"
    bad.write_bytes(b"# Notes\n\nbad \xff\xfe byte\n")
    run("account", "create", "ann")
    out = run("journal", "add", "-a", "ann", "--file", str(bad), code=2)
    assert "not valid UTF-8" in out.output and "entry.md" in out.output
    out = run("journal", "add", "-a", "ann", input=b"bad \xff byte", code=2)
    assert "standard input" in out.output


@pytest.mark.parametrize("tags", ["notalist", b"bytes", 5])
def test_journal_tags_must_be_a_list(acct: soulpass.Account, tags: Any) -> None:
    sb = acct.create_sandbox("s")
    with pytest.raises(InvalidInput) as err:
        sb.add_journal("A long enough entry about the garden.", tags=tags)
    assert err.value.details["field"] == "tags"
    with pytest.raises(InvalidInput):
        acct.journal().add("A long enough entry about the garden.", tags=tags)
    with pytest.raises(InvalidInput) as err:
        sb.add_fact("Ann", "likes", "tea", confidence=0.9, source_refs=tags)
    assert err.value.details["field"] == "source_refs"


def test_library_archive_dry_run_must_be_a_bool(acct: soulpass.Account) -> None:
    sb = acct.create_sandbox("s")
    with pytest.raises(InvalidInput) as err:
        sb.archive(dry_run="yes")  # type: ignore[arg-type]
    assert err.value.details["field"] == "dry_run"


@pytest.mark.parametrize("body", [{"version": True}, {"version": "1"}, {"version": 1.0}])
def test_rest_rollback_refuses_what_is_not_an_integer(client: TestClient, world: World, body: Any) -> None:
    head = client.get("/v1/accounts/ann", headers=world.ann.auth).json()["version"]
    r = client.post("/v1/accounts/ann/rollback", headers=world.ann.auth, json=body)
    assert r.status_code == 422, r.text
    assert client.get("/v1/accounts/ann", headers=world.ann.auth).json()["version"] == head


@pytest.mark.parametrize("value", ["yes", 1, "true"])
def test_rest_archive_refuses_a_dry_run_that_is_not_a_bool(client: TestClient, world: World, value: Any) -> None:
    base = "/v1/accounts/ann/sandboxes"
    client.post(base, headers=world.ann.auth, json={"name": "chat", "sandbox_id": "chat-9"})
    r = client.post(f"{base}/chat-9/archive", headers=world.ann.auth, json={"dry_run": value})
    assert r.status_code == 422, r.text
    assert client.get(f"{base}/chat-9/buffer", headers=world.ann.auth).status_code == 200  # not archived


# --- (b) an archive of nothing commits nothing ----------------------------------------------


def test_archiving_an_empty_sandbox_commits_no_version(acct: soulpass.Account) -> None:
    head, log = acct.head(), acct.log()
    sb = acct.create_sandbox("idle")
    assert sb.archive(dry_run=True).plan.empty
    result = sb.archive()
    assert isinstance(result, soulpass.Unchanged)
    assert result.version == head and result.plan.summary()["version"] == head
    assert acct.head() == head and acct.log() == log
    assert sb.archived and sb.id not in [s.sandbox_id for s in acct.sandboxes()]


def test_an_exact_repeat_journal_entry_commits_no_version(acct: soulpass.Account) -> None:
    text = "We planted the tomatoes along the south wall today."
    first = acct.journal().add(text, title="Tomatoes")
    head = acct.head()
    again = acct.journal().add(text, title="Tomatoes")
    assert not again["stored"] and again["duplicate_of"] == first["id"] and again["version"] == head
    assert acct.head() == head
    sb = acct.create_sandbox("repeat")
    sb.add_journal(text, title="Tomatoes")
    result = sb.archive()
    assert isinstance(result, soulpass.Unchanged) and result.plan.duplicates
    assert acct.head() == head


def test_a_sandbox_with_something_new_still_commits(acct: soulpass.Account) -> None:
    sb = acct.create_sandbox("chat")
    sb.add_turn("user", "I moved to Lyon")
    result = sb.archive()
    assert isinstance(result, soulpass.Committed) and acct.head() == result.version == 1


def test_rest_and_cli_say_unchanged(client: TestClient, world: World, run: Any) -> None:
    base = "/v1/accounts/ann/sandboxes"
    head = client.get("/v1/accounts/ann", headers=world.ann.auth).json()["version"]
    client.post(base, headers=world.ann.auth, json={"name": "idle", "sandbox_id": "idle-1"})
    out = client.post(f"{base}/idle-1/archive", headers=world.ann.auth, json={}).json()
    assert out["status"] == "unchanged" and out["version"] == head and out["summary"]["empty"]
    assert client.get("/v1/accounts/ann", headers=world.ann.auth).json()["version"] == head
    run("account", "create", "ann")
    sid = run("sandbox", "create", "idle", "-a", "ann").output.strip()
    assert "committed nothing" in run("archive", sid, "-a", "ann").output
    assert run("log", "-a", "ann", "--json").output.strip() in ("[]", "")


# --- (c) diff shows the documents a version creates, and the keys inside -------------------


def _docs(diff: Diff) -> dict[str, tuple[str, dict[str, list[str]]]]:
    return {d.path.rsplit("/", 1)[-1]: (d.change, d.keys.model_dump()) for d in diff.documents}


def test_diff_shows_documents_a_version_creates_and_their_keys(acct: soulpass.Account) -> None:
    sb = acct.create_sandbox("s1")
    sb.update_state("mood", {"calm": 0.5})
    sb.update_profile({"name": "Ann"})
    sb.propose_core("identity", "EVA", key="name", confidence=0.95, reason="said so")
    sb.archive()
    docs = _docs(acct.diff(0, 1))
    assert docs["mood_state.json"] == ("created", {"added": ["data.calm", "name"], "changed": [], "removed": []})
    assert docs["User_profile.json"][0] == "created" and "fields.name" in docs["User_profile.json"][1]["added"]
    assert docs["Core_memory.json"][0] == "created" and "identity.name" in docs["Core_memory.json"][1]["added"]


def test_diff_shows_keys_changed_and_removed(acct: soulpass.Account) -> None:
    sb = acct.create_sandbox("s1")
    sb.update_state("mood", {"calm": 0.5, "tired": True})
    sb.archive()
    sb = acct.create_sandbox("s2")
    sb.update_state("mood", {"calm": 0.7, "joy": 1})
    sb.archive()
    assert _docs(acct.diff(1, 2))["mood_state.json"] == (
        "changed", {"added": ["data.joy"], "changed": ["data.calm"], "removed": []})
    acct.rollback(1)
    assert _docs(acct.diff(2, 3))["mood_state.json"] == (
        "changed", {"added": [], "changed": ["data.calm"], "removed": ["data.joy"]})
    assert acct.diff(1, 3).documents == []  # back where it was
    acct.rollback(0)
    assert _docs(acct.diff(3, 4))["mood_state.json"][0] == "removed"


def test_cli_diff_lists_created_documents(run: Any) -> None:
    run("account", "create", "ann")
    sid = run("sandbox", "create", "chat", "-a", "ann").output.strip()
    run("write", "state", sid, "mood", "-a", "ann", "--data", '{"calm": 0.5}')
    run("archive", sid, "-a", "ann")
    out = run("diff", "0", "1", "-a", "ann").output
    assert "created" in out and "mood_state.json" in out and "+data.calm" in out


# --- (d) the log says what each version added and refused -----------------------------------


def _journal_clipboard_and_rejected_fact(acct: soulpass.Account) -> None:
    from soulpass.agent import AgentMemory

    acct.journal().add("We planted the tomatoes along the south wall today.", title="Tomatoes")
    mem = AgentMemory(acct.create_sandbox("chat"))
    mem.clipboard_add("eva", "bring the blue umbrella")
    mem.sandbox.add_fact(content="Ann maybe likes tea", confidence=0.1)
    mem.sandbox.add_turn("user", "hello")
    assert isinstance(mem.sandbox.archive(), soulpass.Committed)


def test_cli_log_counts_journal_and_clipboard_and_says_what_was_rejected(acct: soulpass.Account,
                                                                         run: Any) -> None:
    from soulpass.consolidation.log_summary import added_counts, refused_counts

    _journal_clipboard_and_rejected_fact(acct)
    first, second = (e.to_json() for e in acct.log())
    assert added_counts(first) == {"journal": 1}
    assert added_counts(second) == {"clipboard": 1, "turn_user": 1}
    assert refused_counts(second) == {"rejected": 1}
    run("account", "create", "bob")
    run("journal", "add", "-a", "bob", "We planted the tomatoes along the south wall today.")
    out = run("log", "-a", "bob").output
    assert "1 journal" in out and "│ -" not in out


def test_mcp_memory_log_separates_what_a_version_added_from_totals(acct: soulpass.Account,
                                                                   sp: soulpass.Soulpass) -> None:
    from soulpass.mcp.tools import MemoryTools
    from soulpass.pool import AccountPool

    _journal_clipboard_and_rejected_fact(acct)
    newest, oldest = MemoryTools(AccountPool(sp)).memory_log("ann")
    assert oldest["added"] == {"journal": 1} and newest["added"] == {"clipboard": 1, "turn_user": 1}
    assert newest["refused"] == {"rejected": 1} and oldest["refused"] == {}
    assert newest["counts"]["journal"] == 1  # the running total, still there under its own name


# --- (e) stdout is for data: context, piped tables, ingest ids, exports, warnings -----------


def test_context_prints_its_token_count_on_stderr(run: Any) -> None:
    run("account", "create", "ann")
    out = run("context", "what do you know?", "-a", "ann", "--agent", "eva", "--budget", "300")
    assert "of 300 tokens" in out.stderr and "tokens" not in out.stdout


def test_piped_tables_never_cut_ids_or_paths(acct: soulpass.Account, run: Any) -> None:
    run("account", "create", "ann")
    run("journal", "add", "-a", "ann", "--title", "A rather long title for an entry about the garden",
        "We planted the tomatoes along the south wall today.")
    out = run("journal", "list", "-a", "ann").stdout
    assert "…" not in out and "A_rather_long_title_for_an_entry_about_the_garden" in out.replace("-", "_")
    log = run("log", "-a", "ann").stdout
    sandbox = json_of(run("log", "-a", "ann", "--json").stdout)[0]["source_sandbox"]
    assert sandbox in log and "…" not in log


def json_of(text: str) -> Any:
    import json

    return json.loads(text)


@pytest.mark.parametrize("command", [("account", "create", "bob"), ("rollback", "0", "-a", "ann"),
                                     ("index", "rebuild", "-a", "ann")])
def test_json_where_it_was_missing(run: Any, command: tuple[str, ...]) -> None:
    run("account", "create", "ann")
    assert isinstance(json_of(run(*command, "--json").stdout), dict)


def test_discard_has_json(run: Any) -> None:
    run("account", "create", "ann")
    sid = run("sandbox", "create", "chat", "-a", "ann").stdout.strip()
    assert json_of(run("discard", sid, "-a", "ann", "--json").stdout) == {"sandbox_id": sid, "status": "discarded"}


def test_index_export_with_files_into_a_missing_folder(run: Any, tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    run("account", "create", "ann")
    run("journal", "add", "-a", "ann", "--title", "Tomatoes", "We planted the tomatoes along the south wall today.")
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    monkeypatch.chdir(cwd)
    run("index", "export", "-a", "ann", "out", "--with-files")
    assert (cwd / "out").is_dir() and (cwd / "out" / "memory_index.json").is_file()
    assert [p.name for p in cwd.iterdir()] == ["out"]  # nothing beside it
    assert list((cwd / "out").rglob("*Tomatoes*.md"))


def test_ingest_prints_permanent_ids_and_keeps_no_temporary_id(run: Any, tmp_path: Path) -> None:
    run("account", "create", "ann")
    out = run("ingest", "-a", "ann", "--agent", "eva", "Tidal locking keeps one face of the Moon toward Earth.")
    assert "_temp_" not in out.stdout and "SR_" in out.stdout and "EP_" in out.stdout
    shown = json_of(run("ingest", "-a", "ann", "--agent", "eva", "Mars has two moons.", "--json").stdout)
    assert shown["raw_id"].startswith("SR_") and shown["episode_id"].startswith("EP_")
    acct = soulpass.open(tmp_path / "cli-home", embedder="none").account("ann")
    turns = [t.text for kind in ("turn_user", "turn_llm") for t in acct.records(kind)]
    assert turns and not any("_temp_" in t for t in turns)


def test_a_low_confidence_fact_is_warned_about_when_written(acct: soulpass.Account, run: Any,
                                                            client: TestClient, world: World) -> None:
    sb = acct.create_sandbox("s")
    assert sb.fact_warning(0.9) is None
    assert "rejected at archive" in (sb.fact_warning(0.3) or "") and "0.7" in (sb.fact_warning(0.3) or "")
    run("account", "create", "ann")
    sid = run("sandbox", "create", "chat", "-a", "ann").stdout.strip()
    out = run("write", "fact", sid, "-a", "ann", "--content", "Ann maybe likes tea", "--confidence", "0.2")
    assert out.stdout.strip().startswith("sf_temp_") and "rejected at archive" in out.stderr
    base = "/v1/accounts/ann/sandboxes"
    client.post(base, headers=world.ann.auth, json={"name": "chat", "sandbox_id": "chat-5"})
    low = client.post(f"{base}/chat-5/facts", headers=world.ann.auth, json={"content": "Ann may like tea",
                                                                             "confidence": 0.2}).json()
    assert "rejected at archive" in low["warning"]
    high = client.post(f"{base}/chat-5/facts", headers=world.ann.auth, json={"content": "Ann likes tea",
                                                                              "confidence": 0.9}).json()
    assert high["warning"] is None


def test_mcp_remember_warns_about_a_low_confidence_fact(acct: soulpass.Account, sp: soulpass.Soulpass) -> None:
    from soulpass.mcp.tools import MemoryTools
    from soulpass.pool import AccountPool

    tools = MemoryTools(AccountPool(sp))
    sid = tools.create_sandbox("ann")["sandbox_id"]
    out = tools.remember("ann", "fact", "Ann may like tea", confidence=0.3, sandbox_id=sid)
    assert "rejected at archive" in out["warning"]
    assert "warning" not in tools.remember("ann", "fact", "Ann likes tea", confidence=0.9, sandbox_id=sid)


# --- (f) readable scores, and in-session ranking of superseded facts ------------------------


def test_in_session_search_ranks_the_new_fact_above_the_one_it_supersedes(acct: soulpass.Account) -> None:
    sb = acct.create_sandbox("s1")
    sb.add_fact("Ann", "lives in", "Paris", confidence=0.9)
    sb.add_turn("user", "I love the weather today")
    sb.archive()
    committed = acct.search("where does Ann live", k=5)
    sb = acct.create_sandbox("s2")
    lyon = sb.add_fact("Ann", "lives in", "Lyon", confidence=0.9)
    hits = sb.search("where does Ann live", k=5)
    ids = [h.id for h in hits]
    paris = next(h.id for h in hits if "Paris" in h.text)
    assert ids.index(lyon) < ids.index(paris)
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)
    assert next(h for h in hits if h.id == paris).parts["superseded"] == 1.0
    assert acct.search("where does Ann live", k=5) == committed  # committed search as it was
    plan = sb.archive().plan  # and the archive agrees: Lyon supersedes Paris
    assert plan.superseded == [{"fact": paris, "by": plan.id_map[lyon]}]


def test_a_fact_the_session_does_not_supersede_keeps_its_place(acct: soulpass.Account) -> None:
    sb = acct.create_sandbox("s1")
    sb.add_fact("Ann", "likes", "tea", confidence=0.9)
    sb.archive()
    sb = acct.create_sandbox("s2")
    sb.add_fact("Ann", "likes", "coffee", confidence=0.9)  # "likes" is not functional: both stand
    hits = sb.search("Ann likes tea", k=5)
    assert "tea" in hits[0].text and "superseded" not in hits[0].parts


def test_relevance_is_bounded_and_readable_where_scores_are_not(acct: soulpass.Account) -> None:
    from soulpass.index.relevance import relevance

    for text in ("We planted tomatoes along the south wall", "The rain kept us inside all afternoon"):
        sb = acct.create_sandbox("s")  # sessions of their own: a turn's neighbours join its hits
        sb.add_turn("user", text)
        sb.archive()
    (lone,) = acct.search("tomatoes", k=5)
    assert lone.score == 0.0 and relevance("tomatoes", lone) == 1.0  # a lone hit's score says nothing
    for q in ("tomatoes rain", "planting tomato", "south wall snow sleet"):
        assert all(0.0 <= relevance(q, h) <= 1.0 for h in acct.search(q, k=5))
    assert relevance("planting tomato", acct.search("planting tomato", k=1)[0]) == 1.0
    many = acct.search("tomatoes wall rain snow", k=5)
    assert len(many) == 2 and [relevance("tomatoes wall rain snow", h) for h in many] == [0.5, 0.25]
    assert [h.id for h in acct.search("tomatoes wall rain snow", k=5, min_score=0.5)] == [many[0].id]
    assert acct.search("tomatoes wall rain snow", k=5, min_score=0.9) == []
    with pytest.raises(InvalidInput) as err:
        acct.search("tomatoes", min_score=2.0)
    assert err.value.details["field"] == "min_score"


def test_min_score_and_relevance_in_the_cli_and_rest(run: Any, client: TestClient, world: World) -> None:
    run("account", "create", "ann")
    run("journal", "add", "-a", "ann", "We planted the tomatoes along the south wall today.")
    out = json_of(run("search", "tomatoes snow", "-a", "ann", "--json").stdout)
    assert out and out[0]["relevance"] == 0.5
    assert json_of(run("search", "tomatoes snow", "-a", "ann", "--json", "--min-score", "0.6").stdout) == []
    assert "relevance" in run("search", "tomatoes", "-a", "ann").stdout
    run("search", "tomatoes", "-a", "ann", "--min-score", "1.5", code=2)
    r = client.post("/v1/accounts/ann/search", headers=world.ann.auth, json={"query": "the", "k": 5})
    assert r.status_code == 200 and all(0 <= h["relevance"] <= 1 for h in r.json()["hits"])
    r = client.post("/v1/accounts/ann/search", headers=world.ann.auth, json={"query": "the", "min_score": 1.0})
    assert r.status_code == 200 and all(h["relevance"] == 1.0 for h in r.json()["hits"])
