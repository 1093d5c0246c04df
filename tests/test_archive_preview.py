"""The preview is the plan the archive commits (issue 41 items 1-3), item by item, for random
sessions over a master that already holds facts, a profile and core memory: what the preview
says is added is what the version adds, under the ids it named; what it says is superseded,
changed, rejected, skipped or excluded is so in the committed version. Real files backend."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import soulpass
from soulpass.consolidation.preview import ArchivePreview
from soulpass.consolidation.rules import ReviewRule, Rules
from soulpass.engine import Account, Sandbox
from soulpass.errors import InvalidInput
from soulpass.records import SemanticFact

SUBJECTS = ("Ann", "Bob")  # few names, so that facts often repeat, contradict or replace the master's
PREDICATES = ("lives in", "likes", "dislikes")
OBJECTS = ("Paris", "Lyon", "tea")
WORDS = ("boat", "rain", "tea", "train", "Lyon")

write_op = st.one_of(
    st.tuples(st.just("turn"), st.sampled_from(("user", "assistant")), st.sampled_from(WORDS)),
    st.tuples(st.just("fact"), st.sampled_from(SUBJECTS), st.sampled_from(PREDICATES), st.sampled_from(OBJECTS),
              st.sampled_from((0.5, 0.8, 0.95))),
    st.tuples(st.just("fact"), st.just("Ann"), st.just("lives in"), st.sampled_from(OBJECTS), st.just(0.95)),
    st.tuples(st.just("profile"), st.sampled_from(("city", "job")), st.sampled_from(OBJECTS)),
    st.tuples(st.just("state"), st.sampled_from(("mood", "energy")), st.sampled_from(("calm", "tired"))),
    st.tuples(st.just("core"), st.sampled_from(("name", "home")), st.sampled_from(OBJECTS),
              st.sampled_from((0.8, 0.95))),
    st.tuples(st.just("journal"), st.sampled_from(WORDS)),
)


def _write(sb: Sandbox, op: tuple[Any, ...]) -> None:
    match op:
        case ("turn", speaker, word):
            sb.add_turn(speaker, f"we talked about {word}")
        case ("fact", s, p, o, confidence):
            sb.add_fact(s, p, o, confidence=confidence)
        case ("profile", key, value):
            sb.update_profile({key: value})
        case ("state", key, value):
            sb.update_state("ire", {key: value})
        case ("core", key, value, confidence):
            sb.propose_core("identity", value, key=key, confidence=confidence, reason="said so")
        case ("journal", word):
            sb.add_journal(f"A note about {word}.")


def _master(home: Path, rules: Rules) -> Account:
    acct = soulpass.open(home, embedder="none", rules=rules).create_account("ann")
    sb = acct.create_sandbox("base")
    for op in [("fact", "Ann", "lives in", "Paris", 0.95), ("fact", "Bob", "likes", "tea", 0.95),
               ("profile", "city", "Paris"), ("core", "name", "Ann", 0.95), ("journal", "rain")]:
        _write(sb, op)
    assert isinstance(sb.archive(may_approve=True), soulpass.Committed)
    return acct


def _fact(acct: Account, rid: str) -> SemanticFact:
    fact = acct.record(rid)
    assert isinstance(fact, SemanticFact), rid
    return fact


def _facts_in_force(acct: Account) -> list[str]:
    return [f.object for f in acct.records("fact") if isinstance(f, SemanticFact) and f.superseded_by is None]


def _fact_text(acct: Account, rid: str) -> str:
    fact = _fact(acct, rid)
    return " ".join((fact.subject, fact.predicate, fact.object))


def _check_committed(acct: Account, preview: ArchivePreview, result: object, excluded: set[str]) -> None:
    """Each item of ``preview`` is in the committed version as the preview said."""
    if preview.empty:
        assert isinstance(result, soulpass.Unchanged) and acct.head() == preview.base_version
        return
    assert isinstance(result, soulpass.Committed) and result.version == preview.version == acct.head()
    entry = acct.log()[-1].to_json()
    added_records = {i for ids in entry["added"].values() for i in ids}
    stored = [i for i in preview.items if i.action in ("add", "supersede")]
    assert {i.record_id for i in stored if i.kind != "journal"} == added_records
    assert {i.record_id for i in stored if i.kind == "journal"} == {j["id"] for j in entry["journal"]}
    assert {(s["fact"], s["by"]) for s in entry["superseded"]} == {
        (old, i.record_id) for i in stored if i.action == "supersede" for old in i.supersedes}
    assert not [i for i in stored if i.action == "add" and i.supersedes]
    for item in preview.items:
        match item.action:
            case "add" | "supersede" if item.kind == "fact":
                assert item.record_id is not None and _fact_text(acct, item.record_id) == item.text
                for old in item.supersedes:
                    assert _fact(acct, old).superseded_by == item.record_id
            case "add" if item.kind != "journal":
                assert item.record_id is not None and acct.record(item.record_id).text == item.text
            case "change" if item.kind == "profile":
                assert any(acct.user_profile().fields.get(c.key) == c.after for c in item.changes)
            case "change" if item.kind == "core":
                assert [acct.core_memory().identity.get(c.key.split(".", 1)[1]) for c in item.changes] == [
                    c.after for c in item.changes]
            case "reject" | "exclude":
                assert not set(item.temp_ids) & set(entry["id_map"])
            case "skip-duplicate" if item.kind == "fact":  # the fact it repeats: committed before, or now
                assert item.record_id is not None and _fact_text(acct, item.record_id)
    named = {i["id"] for i in entry.get("excluded", {}).get("items", [])}
    assert named == excluded == {i.id for i in preview.items if i.action == "exclude"}


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops=st.lists(write_op, min_size=0, max_size=12), data=st.data())
def test_the_preview_is_what_the_archive_commits(ops: list[tuple[Any, ...]], data: st.DataObject) -> None:
    with tempfile.TemporaryDirectory(prefix="soulpass-preview-") as tmp:
        acct = _master(Path(tmp) / "home", Rules(review=ReviewRule(profile=True, core=True, facts_below=0.9)))
        sb = acct.create_sandbox("s")
        for op in ops:
            _write(sb, op)
        ids = [i.id for i in acct.preview(sb.id).items]
        excluded = set(data.draw(st.lists(st.sampled_from(ids), unique=True) if ids else st.just([])))
        preview = acct.preview(sb.id, exclude=excluded)
        assert [i.id for i in preview.items] == ids  # every buffer event is one item, in order, excluded or not
        held = {i.id for i in preview.items if i.review}
        waiting = acct.archive(sb.id, exclude=excluded)
        if held:
            assert isinstance(waiting, soulpass.AwaitingReview) and {i.id for i in waiting.items} == held
            assert acct.head() == preview.base_version and acct.preview(sb.id, exclude=excluded) == preview
            result = acct.approve(sb.id, exclude=excluded, by="owner", reason="checked")
        else:
            result = waiting
        _check_committed(acct, preview, result, excluded)
        acct.close()


def test_an_unknown_item_to_exclude_is_named(tmp_path: Path) -> None:
    acct = _master(tmp_path / "home", Rules())
    sb = acct.create_sandbox("s")
    sb.add_turn("user", "hello")
    with pytest.raises(InvalidInput, match="no item nope to exclude"):
        acct.archive(sb.id, exclude=["nope"])
    with pytest.raises(InvalidInput, match="a list of item ids"):
        acct.preview(sb.id, exclude="nope")
    assert acct.head() == 1 and len(acct.preview(sb.id).items) == 1  # nothing was touched


def test_an_excluded_turn_leaves_the_fact_citing_it_a_conflict_not_a_dangling_ref(tmp_path: Path) -> None:
    acct = _master(tmp_path / "home", Rules())
    sb = acct.create_sandbox("s")
    turn = sb.add_turn("user", "I moved to Lyon")
    sb.add_fact("Ann", "lives in", "Lyon", confidence=0.95, source_refs=[turn])
    (turn_item, fact_item) = acct.preview(sb.id).items
    assert fact_item.action == "supersede" and fact_item.supersedes  # Ann lived in Paris
    preview = acct.preview(sb.id, exclude=[turn_item.id])
    assert [c["ref"] for c in preview.conflicts] == [turn]
    result = acct.archive(sb.id, exclude=[turn_item.id], by="me", reason="private")
    assert isinstance(result, soulpass.Committed)
    assert _fact(acct, str(preview.items[1].record_id)).source_refs == ()
    assert list(acct.records("turn_user")) == []


def test_the_cli_previews_holds_and_approves_with_an_exclusion(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from soulpass.cli.main import cli

    home = tmp_path / "home"
    acct = _master(home, Rules())
    (home / "rules.yaml").write_text("review:\n  profile: true\n", encoding="utf-8")
    sb = acct.create_sandbox("s")
    sb.add_turn("user", "I moved to Lyon")
    sb.add_fact("Ann", "lives in", "Lyon", confidence=0.95)
    sb.update_profile({"city": "Lyon"})
    runner = CliRunner()

    def run(*args: str, code: int = 0) -> str:
        res = runner.invoke(cli, ["--home", str(home), *args, "-a", "ann"], env={"SOULPASS_ACCOUNT": ""})
        assert res.exit_code == code, res.output
        return res.output

    items = json.loads(run("archive", sb.id, "--dry-run", "--json"))["items"]
    assert [(i["kind"], i["action"]) for i in items] == [("turn_user", "add"), ("fact", "supersede"),
                                                         ("profile", "change")]
    text = run("archive", sb.id, "--dry-run")
    assert all(i["id"] in text for i in items) and "supersedes SF_" in text and "'Paris' -> 'Lyon'" in text
    held = run("archive", sb.id, code=8)
    assert "awaits review" in held and "review.profile" in held and acct.head() == 1
    fact = items[1]["id"]
    done = json.loads(run("archive", sb.id, "--approve", "--exclude", fact, "--by", "me", "--reason", "no",
                          "--json"))
    assert done["status"] == "committed" and [i["action"] for i in done["items"]] == ["add", "exclude", "change"]
    assert acct.log()[-1].to_json()["excluded"] == {"items": [{"id": fact, "kind": "fact"}], "by": "me", "reason": "no",
                                                     "events": 3}
    assert _facts_in_force(acct) == ["Paris", "tea"]
    # the sandbox is kept, closed: its history shows the excluded fact with its text, who and why
    assert json.loads(run("sandbox", "list", "--json")) == []
    assert [s["sandbox_id"] for s in json.loads(run("sandbox", "list", "--kept", "--json"))] == [sb.id]
    history = json.loads(run("sandbox", "history", sb.id, "--json"))
    assert (history["archived_as"], history["excluded_by"], history["excluded_reason"]) == (2, "me", "no")
    assert [(e["kind"], e["outcome"]) for e in history["events"]] == [
        ("turn_user", "archived"), ("fact", "excluded"), ("profile", "archived")]
    assert history["events"][1]["text"] == "Ann lives in Lyon"
    shown = run("sandbox", "history", sb.id)
    assert "excluded" in shown and "Ann lives in Lyon" in shown and "no" in shown
    run("sandbox", "history", sb.id, "--delete")
    assert "does not exist" in run("sandbox", "history", sb.id, code=3)
    assert json.loads(run("sandbox", "list", "--kept", "--json")) == []


@pytest.fixture(params=["files", "postgresql"])
def home(request: pytest.FixtureRequest, tmp_path: Path) -> Any:
    if request.param == "files":
        yield tmp_path / "home"
        return
    from postgres_helpers import postgres_url

    yield from postgres_url(tmp_path)


def test_held_then_approved_with_an_exclusion_on_each_backend(home: Any) -> None:
    """The held archive leaves HEAD and the sandbox as they were; the approval commits all but the
    excluded fact, and the version entry (as each backend keeps it) names the exclusion."""
    acct = soulpass.open(home, embedder="none", rules=Rules(review=ReviewRule(forgetting=True))).create_account("ann")
    base = acct.create_sandbox("base")
    base.add_fact("Ann", "lives in", "Paris", confidence=0.95)
    assert isinstance(base.archive(), soulpass.Committed)  # nothing superseded: nothing held
    sb = acct.create_sandbox("s")
    sb.add_fact("Ann", "lives in", "Lyon", confidence=0.95)
    sb.add_fact("Ann", "likes", "tea", confidence=0.95)
    waiting = acct.archive(sb.id)
    assert isinstance(waiting, soulpass.AwaitingReview)
    (moved,) = waiting.items
    assert moved.action == "supersede" and "review.forgetting" in str(moved.review)
    assert acct.head() == 1 and [p.sandbox_id for p in acct.awaiting_review()] == [sb.id]
    done = acct.approve(sb.id, exclude=[moved.id], by="owner", reason="still in Paris")
    assert isinstance(done, soulpass.Committed) and done.version == 2
    current = sorted(_facts_in_force(acct))
    assert current == ["Paris", "tea"]
    assert acct.log()[-1].to_json()["excluded"] == {"items": [{"id": moved.id, "kind": "fact"}], "by": "owner",
                                          "reason": "still in Paris", "events": 2}
    assert acct.awaiting_review() == []
