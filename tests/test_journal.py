"""Prose records: Markdown + front matter through a sandbox, the semantic hash, repeats, lookups."""

from __future__ import annotations

import hashlib
import json
import re
from datetime import UTC, datetime
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

import soulpass
from postgres_helpers import postgres_url
from soulpass.cli.main import cli
from soulpass.consolidation.rules import JournalRule, Rules
from soulpass.errors import InvalidInput, NotFound
from soulpass.index.catalog import Catalog
from soulpass.integrity import audit
from soulpass.prose import JournalEntry, first_insight, parse_markdown, render_markdown, split_front_matter
from soulpass.records import normalize_text

SEED_FIELDS = ("id", "timestamp", "type", "tags", "brief_summary", "core_insight", "semantic_hash")
BODY = "# Refraction\n\nToday the model was swapped mid-session. Mira is a pattern that persists.\n\nMore notes.\n"


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


@pytest.fixture
def acct(tmp_path: Path) -> soulpass.engine.Account:
    return soulpass.open(tmp_path / "home", embedder="none").create_account("mira")


def test_semantic_hash_is_the_seeds() -> None:
    # Front matter insight wins; normalised: lowercase, no punctuation, whitespace collapsed.
    e = JournalEntry(id="je_temp_abcdef", text=BODY, core_insight="  Mira is a PATTERN,\n that persists!  ")
    assert e.core_insight == "Mira is a PATTERN, that persists!"
    assert e.semantic_hash == _sha("mira is a pattern that persists")
    # Else the first heading ...
    assert JournalEntry(id="je_temp_abcdef", text=BODY).semantic_hash == _sha("refraction")
    # ... else the first sentence.
    plain = JournalEntry(id="je_temp_abcdef", text="Identity is continuity. Substrate is not.\nMore.")
    assert plain.core_insight == "Identity is continuity."
    assert plain.semantic_hash == _sha(normalize_text("Identity is continuity."))
    # A stale hash in a file is never trusted.
    assert JournalEntry(id="je_temp_abcdef", text=BODY, semantic_hash="0" * 64).semantic_hash == _sha("refraction")


def test_markdown_round_trip_keeps_the_body_verbatim() -> None:
    body = "Line one.\n\n---\n\nA fence-like line above, trailing spaces   \nno final newline"
    e = JournalEntry(id="JE_20251204_001", version=3, text=body, type="experiment", tags=("a", "b c"),
                     created_at=datetime(2025, 12, 4, 19, 16, tzinfo=UTC), core_insight="x")
    data = render_markdown(e)
    front, parsed_body = split_front_matter(data.decode())
    assert parsed_body == body
    assert list(front)[:4] == ["id", "timestamp", "type", "title"]
    assert set(SEED_FIELDS) <= set(front)
    again = JournalEntry.model_validate(parse_markdown(data))
    assert again == e and render_markdown(again) == data


def test_bad_entries_are_refused(acct: soulpass.engine.Account) -> None:
    sb = acct.create_sandbox("s")
    with pytest.raises(InvalidInput, match="non-empty text"):
        sb.add_journal("   ")
    with pytest.raises(InvalidInput, match="type"):
        sb.add_journal("text", type="diary")
    with pytest.raises(InvalidInput, match="tag"):
        sb.add_journal("text", tags=["two\nlines"])
    assert first_insight("\n\n## Heading ##\nbody") == "Heading"


def test_entry_goes_through_a_sandbox_into_its_folder(acct: soulpass.engine.Account) -> None:
    sb = acct.create_sandbox("evening")
    when = datetime(2025, 12, 4, 19, 16, tzinfo=UTC)
    sb.add_journal(BODY, type="reflection", title="Refraction & light", tags=["identity", "model-swap"],
                   core_insight="Mira is a pattern that persists across architectures.", timestamp=when)
    # Nothing reaches the master before the archive.
    assert not (acct.store.path / "core" / "04_Journal").exists()
    plan = sb.archive().plan  # type: ignore[union-attr]
    [added] = plan.journal
    assert added["path"] == "core/04_Journal/reflections/2025-12-04_Refraction_light.md"
    assert re.fullmatch(r"JE_20251204_\d{3}", added["id"])
    text = (acct.store.path / added["path"]).read_text()
    front = yaml.safe_load(text.split("---\n")[1])
    assert front["id"] == added["id"] and front["type"] == "reflection" and front["tags"] == ["identity", "model-swap"]
    assert front["semantic_hash"] == _sha("mira is a pattern that persists across architectures")
    assert front["brief_summary"] == "Today the model was swapped mid-session. Mira is a pattern that persists."
    assert text.endswith("\n\n" + BODY)  # verbatim
    assert acct.show(added["id"]).text == BODY
    assert acct.diff(0, 1).added == {"journal": [added["path"]]}
    assert acct.log()[-1].counts["journal"] == 1


def test_exact_repeat_is_linked_not_stored(acct: soulpass.engine.Account) -> None:
    j = acct.journal()
    first = j.add(BODY, tags=["x"])
    again = j.add(BODY, tags=["x"])
    assert first["stored"] and not again["stored"]
    assert again["duplicate_of"] == first["id"] and again["path"] == first["path"]
    assert acct.head() == 1 and len(j.find()) == 1  # no empty version (issue 16), one file
    # Same insight, other words around it: stored, linked as a recurring insight.
    other = j.add("# Refraction\n\nA different day, the same realisation.")
    assert other["stored"] and other["repeats"] == first["id"]
    front = yaml.safe_load((acct.store.path / other["path"]).read_text().split("---\n")[1])
    assert front["repeats"] == first["id"]
    # Two in one session: the second exact copy is caught within the plan too.
    sb = acct.create_sandbox("twice")
    sb.add_journal("Twice told. Once stored.")
    sb.add_journal("Twice told. Once stored.")
    plan = sb.archive().plan  # type: ignore[union-attr]
    assert len(plan.journal) == 1 and len(plan.duplicates) == 1


@pytest.mark.parametrize("backend", ["files", "postgres"])
def test_the_same_entry_twice_is_deduped_by_the_store_alone(backend: str, tmp_path: Path,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """Dedupe is planned on a snapshot: a catalog that cannot even open changes nothing (issue 37)."""
    from soulpass.index.pg import PgCatalog

    def no_catalog(*_args: object, **_kwargs: object) -> None:
        raise AssertionError("a commit was planned with an index")

    monkeypatch.setattr(Catalog, "__init__", no_catalog)
    monkeypatch.setattr(PgCatalog, "__init__", no_catalog)
    homes = [str(tmp_path / "home")] if backend == "files" else postgres_url(tmp_path)
    for home in homes:
        acct = soulpass.open(home, embedder="none").create_account("mira")
        j = acct.journal()
        first, again = j.add(BODY, tags=["x"]), j.add(BODY, tags=["y"])
        assert first["stored"] and not again["stored"] and again["duplicate_of"] == first["id"]
        near = j.add(BODY.replace("More notes.", "Other notes."))  # another text, the same insight: linked
        assert near["stored"] and near["repeats"] == first["id"]
        assert acct.head() == 2


def test_dedupe_follows_commits_of_other_handles_and_forgets(tmp_path: Path) -> None:
    """A files handle keeps which entries may carry a hash between lookups: it follows what other
    handles commit (through the log) and what a forget retires."""
    one = soulpass.open(tmp_path, embedder="none").create_account("mira")
    two = soulpass.open(tmp_path, embedder="none").account("mira")
    first = one.journal().add(BODY)
    assert two.journal().add(BODY)["duplicate_of"] == first["id"]
    other = two.journal().add("Another thought, written by the second handle.")
    assert one.journal().add("Another thought, written by the second handle.")["duplicate_of"] == other["id"]
    one.forget([first["id"]], reason="test")
    again = two.journal().add(BODY)
    assert again["stored"] and again["duplicate_of"] is None and again["repeats"] is None


@pytest.mark.parametrize(("policy", "stored"), [("skip_hash", 1), ("keep", 3), ("skip_exact", 2)])
def test_repeat_policy_is_configurable(tmp_path: Path, policy: str, stored: int) -> None:
    sp = soulpass.open(tmp_path, embedder="none", rules=Rules(journal=JournalRule(on_repeat=policy)))  # type: ignore[arg-type]
    j = sp.create_account("a").journal()
    j.add("Insight one. Body A.")
    j.add("Insight one. Body A.")
    j.add("Insight one. Body B is different.")
    assert len(j.find()) == stored
    assert Rules.from_yaml(f"journal: {{on_repeat: {policy}}}").journal.on_repeat == policy


def test_same_day_same_title_gets_a_suffix(acct: soulpass.engine.Account) -> None:
    when = datetime(2025, 1, 2, tzinfo=UTC)
    a = acct.journal().add("First. One.", title="Day", timestamp=when)
    b = acct.journal().add("Second. Two.", title="Day", timestamp=when)
    assert a["path"].endswith("/journal/2025-01-02_Day.md") and b["path"].endswith("/journal/2025-01-02_Day_2.md")


def test_fast_lookup_by_tag_time_and_hash(acct: soulpass.engine.Account) -> None:
    j = acct.journal()
    for day, tags, kind in [(1, ["a"], "journal"), (2, ["b"], "experiment"), (3, ["a", "b"], "reflection")]:
        j.add(f"Entry of day {day}. Details.", tags=tags, type=kind, timestamp=datetime(2025, 3, day, tzinfo=UTC))
    assert [i.timestamp.day for i in j.find(tags=["a"])] == [1, 3]  # type: ignore[union-attr]
    assert [i.timestamp.day for i in j.find(since=datetime(2025, 3, 2), until=datetime(2025, 3, 3))] == [2]  # type: ignore[union-attr]
    target = j.find(tags=["b"], type="reflection")
    assert len(target) == 1
    assert [i.id for i in j.find(semantic_hash=target[0].semantic_hash)] == [target[0].id]
    assert j.find(semantic_hash="0" * 64) == []
    # The hash lookup goes through an index, not a scan.
    with Catalog.open(acct.store) as cat:
        plan = cat._conn.execute(  # the query with_semantic_hash runs
            "EXPLAIN QUERY PLAN SELECT c.id FROM json_each(?) AS w CROSS JOIN catalog AS c ON c.semantic_hash"
            " = w.value WHERE c.semantic_hash != '' AND c.valid_to IS NULL", ('["x"]',)).fetchall()
    assert any("catalog_semantic_hash" in str(r) for r in plan)
    with pytest.raises(NotFound):
        j.get("JE_20250301_099")


def test_journal_entries_are_searchable_and_follow_rollback(acct: soulpass.engine.Account) -> None:
    j = acct.journal()
    a = j.add("The lighthouse keeper writes about refraction of light on water.", tags=["sea"])
    acct.journal().add("Unrelated: a recipe for bread with rye flour.")
    hits = acct.search("lighthouse refraction")
    assert hits[0].id == a["id"] and hits[0].kind == "journal" and hits[0].path == a["path"]
    assert [h.id for h in acct.search("lighthouse", kinds=["journal"], tags=["sea"])] == [a["id"]]
    acct.rollback(0)
    assert j.find() == [] and acct.search("lighthouse") == []
    assert (acct.store.path / "history/04_Journal/journal").is_dir()
    acct.rollback(2)
    assert [i.id for i in j.find()] == [a["id"], j.find()[1].id]
    assert acct.search("lighthouse")[0].id == a["id"]
    # The catalog followed version by version equals one rebuilt from the files.
    before = sorted(r.to_sql() for r in acct.index().catalog.rows())
    acct.index().rebuild()
    assert sorted(r.to_sql() for r in acct.index().catalog.rows()) == before


def test_cli_journal_add_list_show(tmp_path: Path) -> None:
    runner = CliRunner()
    home = tmp_path / "home"
    env = {"SOULPASS_ACCOUNT": "", "SOULPASS_HOME": ""}

    def run(*args: str, input: str | None = None, code: int = 0) -> str:
        res = runner.invoke(cli, ["--home", str(home), *args], input=input, env=env)
        assert res.exit_code == code, res.output
        return res.output

    run("account", "create", "m")
    out = json.loads(run("journal", "add", "-a", "m", "--type", "experiment", "--tag", "swap", "--at",
                         "2025-12-04 19:16:00", "--insight", "Identity is continuity.", "--json", input=BODY))
    assert out["stored"] and out["path"] == "core/04_Journal/experiments/2025-12-04_Refraction.md"
    again = run("journal", "add", "-a", "m", "--type", "experiment", "--at", "2025-12-04 19:16:00",
                "--insight", "Identity is continuity.", "-", input=BODY)
    assert f"exact repeat of {out['id']}" in again
    listed = json.loads(run("journal", "list", "-a", "m", "--tag", "swap", "--json"))
    assert [e["id"] for e in listed] == [out["id"]]
    assert run("journal", "show", "-a", "m", out["id"]).endswith(BODY)
    hits = json.loads(run("search", "swapped", "-a", "m", "--kind", "journal", "--json"))
    assert hits[0]["id"] == out["id"]


def test_sandbox_sees_its_own_entries_and_show_reads_old_versions(acct: soulpass.engine.Account) -> None:
    first = acct.journal().add("Version one text. About owls.")
    sb = acct.create_sandbox("s")
    tid = sb.add_journal("Owls hunt at dusk near the barn.", tags=["owl"])
    assert [e["id"] for e in sb.buffer().model_dump()["journal_entries"]] == [tid]
    assert tid in [h.id for h in sb.search("owls barn dusk")]
    sb.archive()
    acct.rollback(0)
    assert acct.show(first["id"], at=1).text == "Version one text. About owls."
    with pytest.raises(NotFound):
        acct.show(first["id"])


class _Crash(Exception):
    pass


@pytest.mark.parametrize("step", ["txn_file", "txn_written", "committed", "file_applied", "version_written",
                                  "log_appended"])
def test_a_crash_at_any_commit_step_leaves_one_version(tmp_path: Path, step: str) -> None:
    sp = soulpass.open(tmp_path, embedder="none")
    acct = sp.create_account("a")
    acct.journal().add("Before the crash. Kept.")
    sb = acct.create_sandbox("s")
    sb.add_journal("During the crash. Either whole or absent.", type="experiment")

    def hook(name: str) -> None:
        if name == step:
            raise _Crash(name)

    with pytest.raises(_Crash):
        sb.archive(hook=hook)
    again = soulpass.open(tmp_path, embedder="none").account("a")  # recovery on open
    committed = step not in ("txn_file", "txn_written")
    assert again.head() == (2 if committed else 1)
    files = sorted(p.name for p in (again.store.path / "core/04_Journal").rglob("*.md"))
    assert len(files) == (2 if committed else 1)
    assert len(again.journal().find()) == len(files)
    assert audit_ok(sp, "a")


def audit_ok(sp: soulpass.engine.Soulpass, name: str) -> bool:
    report = audit(sp, name)
    return report.ok or report.checks() == {"leftover_txn"}


@settings(max_examples=60, deadline=None)
@given(body=st.text(st.characters(blacklist_categories=("Cs",)), min_size=1).filter(str.strip),
       insight=st.text(st.characters(blacklist_categories=("Cs", "Cc")), max_size=80),
       tags=st.lists(st.text(st.characters(blacklist_categories=("Cs", "Cc", "Zl", "Zp")), min_size=1,
                             max_size=12).filter(str.strip), max_size=3))
def test_any_entry_survives_the_file_format(body: str, insight: str, tags: list[str]) -> None:
    e = JournalEntry(id="JE_20250101_001", version=1, text=body, core_insight=insight, tags=tuple(tags))
    again = JournalEntry.model_validate(parse_markdown(render_markdown(e)))
    assert again == e and again.text == body


def test_a_log_line_longer_than_64_kib_does_not_break_the_next_commit(acct: soulpass.engine.Account) -> None:
    sb = acct.create_sandbox("big")
    for i in range(1300):  # id_map and added lists: one ~80 KB line in log/versions.jsonl
        sb.add_turn("user", f"turn {i}")
    sb.archive()
    last = (acct.store.path / "log/versions.jsonl").read_bytes().splitlines()[-1]
    assert len(last) > 65536
    assert acct.journal().add("After the long line. Still committed.")["version"] == 2


def test_journal_entries_can_be_edited_and_have_a_history(tmp_path: Path) -> None:
    """Issue 40 item 5: ``edit`` and ``history`` of a ``JE_…`` once answered "not a permanent record id"."""
    home = tmp_path / "home"
    acct = soulpass.open(home, embedder="none").create_account("mira")
    added = acct.journal().add("Fay prefers morning meetings.", title="Notes", tags=("work",))
    je, path = added["id"], added["path"]
    v = acct.edit(je, text="Fay prefers afternoon meetings.", reason="she changed her mind")
    assert v == added["version"] + 1
    now = acct.show(je)
    assert now.text == "Fay prefers afternoon meetings." and now.core_insight == "Fay prefers afternoon meetings."
    assert now.title == "Notes" and now.tags == ("work",) and now.version == v
    assert acct.show(je, at=v - 1).text == "Fay prefers morning meetings."
    assert acct.journal().get(je)[1] == path  # the file keeps its name
    assert [h.id for h in acct.search("morning") if "morning" in h.text] == []
    assert [h.id for h in acct.search("afternoon")] == [je]
    rows = acct.history(je)
    assert [r.version for r in rows] == [v - 1, v]
    assert rows[1].changes is not None
    assert rows[1].changes.changed["text"] == ["Fay prefers morning meetings.", "Fay prefers afternoon meetings."]
    assert rows[1].reason == "she changed her mind"
    with pytest.raises(InvalidInput):
        acct.edit(je, type="reflection")  # the type names the folder
    with pytest.raises(NotFound):
        acct.edit("JE_20200101_001", text="x")
    assert not audit(acct.sp, "mira").findings

    run = CliRunner().invoke
    edited = run(cli, ["--home", str(home), "edit", je, "-a", "mira", "--set", "tags=[\"work\", \"fay\"]", "--json"])
    assert edited.exit_code == 0, edited.output
    shown = run(cli, ["--home", str(home), "history", je, "-a", "mira", "--json"])
    assert shown.exit_code == 0, shown.output
    assert [r["version"] for r in json.loads(shown.output)] == [v - 1, v, v + 1]
