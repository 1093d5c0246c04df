"""Retrieval plans by question shape over a real account (SQLite catalog, full text): which plan a
reading asks for, and what each part does to the hits and says in ``hit.parts``."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

import soulpass
from soulpass import Committed
from soulpass.index.catalog import Filters
from soulpass.retrieval import analyse, plans
from soulpass.retrieval.plans import Plan, plan_for, planned_search, run_plan
from soulpass.retrieval.standing import STANDING_TAGS, standing_tags

T0 = datetime(2025, 3, 1, 9, 0, tzinfo=UTC)
TURNS = Filters(kinds=("turn_user",))


@pytest.fixture(autouse=True)
def _no_fsync(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(os, "fsync", lambda fd: None)


def chat(acct: soulpass.Account, name: str, turns: list[tuple[str, str]], start: datetime) -> None:
    sb = acct.create_sandbox(name)
    for i, (speaker, text) in enumerate(turns):
        sb.write_turn({"kind": "turn_user", "text_excerpt": text, "agent": speaker,
                       "created_at": start + timedelta(minutes=i)})
    assert isinstance(sb.archive(), Committed)


@pytest.fixture
def friends(tmp_path: Path) -> Iterator[soulpass.Account]:
    acct = soulpass.open(tmp_path, embedder="none").account("friends", create=True)
    chat(acct, "one", [("Ann", "I planted tomatoes in the garden"), ("Bob", "my garden has garden roses"),
                       ("Bob", "the garden hose in my garden leaks"), ("Bob", "garden gnomes guard my garden"),
                       ("Ann", "I painted the fence blue")], T0)
    chat(acct, "two", [("Ann", "I went climbing at the garden wall"), ("Bob", "I bought a new bike")],
         T0 + timedelta(days=3))
    yield acct
    acct.close()


def test_a_plain_fact_is_the_plain_search_and_other_shapes_get_their_parts() -> None:
    assert plan_for(analyse("Where does the hose leak?")).plain
    assert plan_for(analyse("What kinds of flowers grow in the garden?")) == Plan(hop=True)
    assert plan_for(analyse("Did Ann and Bob both like the garden?", ["Ann", "Bob"])) == Plan(who=("Ann", "Bob"),
                                                                                            hop=True)
    ordered = plan_for(analyse("In which order did we discuss the garden and the bike?"))
    assert ordered == Plan(topic="garden bike", own_turns=True)  # first person: what "we" brought up
    summary = plan_for(analyse("Summarise what Ann said about the garden"))
    assert (summary.topic, summary.own_turns) == ("ann garden", False)  # only an order reads the user's own turns
    assert plan_for(analyse("What does Ann grow?", ["Ann", "Bob"])).who == ("Ann",)
    request = plan_for(analyse("What time is our next meeting scheduled for?"))
    assert "meet" in " ".join(request.standing)


def test_the_named_persons_turns_are_lifted_and_say_so(friends: soulpass.Account) -> None:
    hits = planned_search(friends.index(), "What did Ann do in the garden?", 5, TURNS)
    by_ann = [h for h in hits if h.row is not None and h.row.agent == "Ann"]
    # Each of Ann's turns is lifted by its score among her own turns; her best one by the whole weight.
    assert by_ann and all(0.0 <= h.parts["person"] <= plans.W_PERSON for h in by_ann)
    assert max(h.parts["person"] for h in by_ann) == plans.W_PERSON
    assert all("person" not in h.parts for h in hits if h not in by_ann)
    # Every part adds up to the score the hit is ranked by.
    for h in hits:
        assert h.score == pytest.approx(h.parts["score"])
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)


def test_a_second_hop_finds_what_the_first_hits_name(friends: soulpass.Account) -> None:
    index = friends.index()
    # "tomatoes" is not asked; the first hit names it, and the second query finds it again.
    hits = run_plan(Plan(hop=True), index, "What did Ann plant?", 5, TURNS)
    assert hits[0].text == "I planted tomatoes in the garden" and hits[0].parts["hop"] > 0


def test_a_standing_instruction_is_tagged_when_written_and_surfaces_for_the_request_it_governs(
        tmp_path: Path) -> None:
    acct = soulpass.open(tmp_path, embedder="none").account("me", create=True)
    try:
        chat(acct, "rules", [("user", "Always use 24-hour time format when I ask about meeting schedules."),
                             ("user", "I always go jogging before work.")], T0)
        chat(acct, "later", [("user", "The budget review meeting moved to Thursday"),
                             ("user", "Our next meeting is about the schedule for the launch"),
                             ("user", "Meeting notes: time is short, schedule the launch")], T0 + timedelta(days=9))
        tagged = {r.text: r.tags for r in acct.records("turn_user")}
        assert "standing:instruction" in tagged["Always use 24-hour time format when I ask about meeting schedules."]
        assert not set(STANDING_TAGS) & set(tagged["I always go jogging before work."])  # a habit, not a rule
        hits = acct.search("What time is our next meeting scheduled for?", 3, kinds=["turn_user"])
        # It names the request's topics (time, meet, schedul): it governs it, the whole lift.
        assert hits[0].text.startswith("Always use 24-hour") and hits[0].parts["standing"] == plans.W_STANDING
        assert hits[0].score > hits[1].score
        # A long request naming few of the rule's topics: governed all the same, the whole lift.
        long_ask = acct.search("Can you tell me the time of the launch meeting and what budget we bring?", 3,
                               kinds=["turn_user"])
        rule = next(h for h in long_ask if h.text.startswith("Always use 24-hour"))
        assert rule.parts["standing"] == plans.W_STANDING
        # A question about the past is no request, but the tagged instruction names its topics
        # (time, meet): it governs it too ("when I ask about meeting schedules").
        past = acct.search("What time was the meeting moved to last week?", 3, kinds=["turn_user"])
        governing = next(h for h in past if h.text.startswith("Always use 24-hour"))
        assert 0 < governing.parts["standing"] < plans.W_STANDING  # it names some of the question's topics
        assert past[0].text == "The budget review meeting moved to Thursday"  # what answers it comes first
        # One whose topics no tagged instruction names is the plain search, no part added.
        other = "Where did I go jogging?"
        assert [(h.id, h.score) for h in acct.search(other, 3, kinds=["turn_user"])] == [
            (h.id, h.score) for h in acct.index().search(other, 3, Filters(kinds=("turn_user",)))]
    finally:
        acct.close()


def test_standing_tags_name_each_kind_once() -> None:
    assert standing_tags("I prefer short answers. Never use emojis. Never add hashtags.") == (
        "standing:instruction", "standing:preference")
    assert standing_tags("We met at noon.") == ()


def test_planned_search_reads_names_from_the_speakers_it_finds(friends: soulpass.Account) -> None:
    index = friends.index()
    named = planned_search(index, "What did Bob say about the garden?", 4, TURNS)
    assert any("person" in h.parts for h in named)
    unnamed = planned_search(index, "What did Carol say about the garden?", 4, TURNS)  # no such speaker
    assert not any("person" in h.parts for h in unnamed)


def test_the_ablation_scores_every_variant_on_the_same_searches(tmp_path: Path) -> None:
    """``benchmarks/plan_ablation.py`` on a tiny conversation: its plain search is the benchmark's
    plain search, and a variant with every part off is the plain search question by question."""
    import importlib.util
    import json
    import sys

    from soulpass.bench import locomo
    script = Path(__file__).resolve().parents[1] / "benchmarks" / "plan_ablation.py"
    spec = importlib.util.spec_from_file_location("soulpass_bench_plan_ablation", script)
    assert spec is not None and spec.loader is not None
    ablation = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = ablation
    try:
        spec.loader.exec_module(ablation)
    finally:
        sys.modules.pop(spec.name, None)
    turns = [("Ann", "I adopted a puppy called Biscuit"), ("Bob", "I started learning the cello"),
             ("Ann", "Biscuit chewed my new shoes"), ("Bob", "My cello teacher is patient")]
    conv = {"session_1_date_time": "10:00 am on 1 May, 2023",
            "session_1": [{"speaker": w, "dia_id": f"D1:{n}", "text": t} for n, (w, t) in enumerate(turns, 1)]}
    qa = [{"question": "What did Ann say about Biscuit?", "answer": "x", "evidence": ["D1:1", "D1:3"], "category": 1},
          {"question": "Which instrument is Bob learning?", "answer": "x", "evidence": ["D1:2"], "category": 4}]
    data = tmp_path / "tiny.json"
    data.write_text(json.dumps([{"sample_id": "tiny", "conversation": conv, "qa": qa}]), encoding="utf-8")
    home = tmp_path / "home"
    turn_kinds = Filters(kinds=locomo.TURN_KINDS)
    bench = locomo.run(soulpass.open(home, embedder="none"), locomo.load(data),
                       searcher=lambda a, q, k: [h.id for h in a.index().search(q, k, turn_kinds)])
    out = tmp_path / "ablation.json"
    ablation.VARIANTS["all off"] = {"W_PERSON": 0.0, "W_HOP": 0.0, "W_STANDING": 0.0, "STANDING_MAX": 0,
                                    "W_TOPIC": 0.0, "W_UNIT": 0.0}
    try:
        assert ablation.main(["--set", "tiny", str(home), str(data), "--json", str(out)]) == 0
    finally:
        del ablation.VARIANTS["all off"]
    report = json.loads(out.read_text(encoding="utf-8"))["sets"]["tiny"]
    assert report["plain"]["overall"] == bench["overall"]
    assert report["all off"]["overall"]["recall@10"] == report["plain"]["overall"]["recall@10"]
    assert set(report) == {"plain", "plans", "no person", "no hop", "no standing", "no units", "all off"}


@pytest.mark.parametrize(("query", "k", "field"), [(None, 10, "query"), (b"Caroline", 10, "query"),
                                                    ("What did Caroline paint?", 0, "k")])
def test_bad_input_is_refused_before_the_question_is_read(friends: soulpass.Account, query: object, k: object,
                                                          field: str) -> None:
    with pytest.raises(soulpass.InvalidInput) as refused:
        friends.search(query, k)  # type: ignore[arg-type]
    with pytest.raises(soulpass.InvalidInput):
        planned_search(friends.index(), query, k)  # type: ignore[arg-type]
    assert refused.value.details.get("field") == field


def test_the_engine_runs_the_plain_search_for_a_question_and_lifts_standing_ones_for_a_request(
        friends: soulpass.Account) -> None:
    index = friends.index()
    asked = "What did Ann do in the garden?"  # a question naming a person: the plain search, no parts added
    assert [(h.id, h.score) for h in friends.search(asked, 5, kinds=["turn_user"])] == [
        (h.id, h.score) for h in index.search(asked, 5, TURNS)]
    assert not any({"person", "hop"} & set(h.parts) for h in friends.search(asked, 5))


def test_the_engine_searches_a_summary_or_an_order_asked_outright_by_its_topic(friends: soulpass.Account) -> None:
    """The words asking for the order or the summary name nothing to find: the engine's search asks
    the topic instead. An event placed against another, and a topic of one word, are asked as they are."""
    index = friends.index()

    def same(asked: str, searched: str) -> None:
        assert [(h.id, h.score) for h in friends.search(asked, 5, kinds=["turn_user"])] == [
            (h.id, h.score) for h in index.search(searched, 5, TURNS)]

    same("In which order did we talk about the garden hose and the new bike?", "garden hose new bike")
    same("Can you summarise what we discussed about the leaking garden hose?", "leaking garden hose")
    same("What did Ann do after she planted the tomatoes?", "What did Ann do after she planted the tomatoes?")
    same("Summarise the garden", "Summarise the garden")  # one word of topic: asked as it is

    asked: list[str] = []

    class Recorder:
        def search(self, query: str, k: int = 10, filters: Filters | None = None,
                   extra: object = ()) -> list[plans.Hit]:
            asked.append(query)
            return []

    plans.governed_search(Recorder(), "Give me a timeline of the kitchen renovation budget", 5)
    assert asked and set(asked) == {"kitchen renovation budget"}  # the tagged statements, then the plain search


def test_only_a_statement_tagged_when_written_or_still_in_the_buffer_governs(tmp_path: Path) -> None:
    """An assistant's "always …" is advice, not the user's rule: untagged, it gets no standing part.
    A rule the user gives in the open session governs that session's search before it is archived."""
    acct = soulpass.open(tmp_path, embedder="none").account("me", create=True)
    try:
        sb = acct.create_sandbox("advice")
        advice = "Always double-check the meeting schedule before you send it."
        sb.write_turn({"kind": "turn_llm", "text_excerpt": advice, "agent": "assistant", "created_at": T0})
        sb.write_turn({"kind": "turn_user", "text_excerpt": "The meeting schedule moved to noon.",
                       "agent": "user", "created_at": T0 + timedelta(minutes=1)})
        assert isinstance(sb.archive(), Committed)
        hits = acct.search("Can you tell me the meeting schedule?", 5)  # a request: the standing lift runs
        assert any(h.text.startswith("Always double-check") for h in hits)
        assert not any("standing" in h.parts for h in hits)
        open_session = acct.create_sandbox("rules")
        open_session.write_turn({"kind": "turn_user", "agent": "user", "created_at": T0 + timedelta(days=1),
                                 "text_excerpt": "Always use 24-hour time when I ask about the meeting schedule."})
        found = open_session.search("Can you tell me the meeting schedule?", 5)
        rule = next(h for h in found if h.text.startswith("Always use 24-hour"))
        assert rule.parts["standing"] > 0
        open_session.discard()
    finally:
        acct.close()


def test_retag_reads_the_standing_tags_again_and_commits_what_changed(tmp_path: Path) -> None:
    """A rule consolidated before the reader knew it (its tag missing) governs nothing; ``retag``
    gives it its tag in a version of its own, and takes a tag the reader no longer gives away,
    leaving every other tag. A dry run writes nothing; a second run finds nothing to change."""
    from click.testing import CliRunner

    from soulpass.cli.main import cli

    acct = soulpass.open(tmp_path, embedder="none").account("me", create=True)
    try:
        sb = acct.create_sandbox("rules")
        rule_text = "Always use 24-hour time when I ask about the meeting schedule."
        sb.write_turn({"kind": "turn_user", "agent": "user", "created_at": T0, "text_excerpt": rule_text})
        sb.write_turn({"kind": "turn_user", "agent": "user", "created_at": T0 + timedelta(minutes=1),
                       "text_excerpt": "The meeting schedule moved to the park pavilion.", "tags": ["park"]})
        assert isinstance(sb.archive(), Committed)
        turns = {r.text_excerpt: r for r in acct.records("turn_user")}
        rule, other = turns[rule_text], turns["The meeting schedule moved to the park pavilion."]
        assert "standing:instruction" in rule.tags  # stamped when consolidated
        acct.edit(rule.id, tags=[], reason="as an older reader left it")
        acct.edit(other.id, tags=["park", "standing:preference"], reason="as a looser reader left it")

        def rule_governs() -> bool:
            hits = acct.search("Can you tell me the meeting schedule?", 5)
            return any("standing" in h.parts for h in hits if h.id == rule.id)

        assert not rule_governs()
        head = acct.head()
        planned = acct.retag(dry_run=True)
        assert sorted(planned, key=lambda r: r["id"] != rule.id) == [
            {"id": rule.id, "added": ["standing:instruction"], "removed": [], "version": None},
            {"id": other.id, "added": [], "removed": ["standing:preference"], "version": None}]
        assert acct.head() == head
        res = CliRunner().invoke(cli, ["--home", str(tmp_path), "retag", "-a", "me", "--json"])
        assert res.exit_code == 0, res.output
        done = json.loads(res.output)
        assert sorted(r["version"] for r in done) == [head + 1, head + 2]
        assert acct.record(rule.id).tags == ("standing:instruction",)
        assert acct.record(other.id).tags == ("park",)
        assert rule_governs()
        assert acct.history(rule.id)[-1].version in {head + 1, head + 2}
        assert acct.retag() == []
        res = CliRunner().invoke(cli, ["--home", str(tmp_path), "retag", "-a", "me"])
        assert res.exit_code == 0 and "as the reader reads them now" in res.output
    finally:
        acct.close()


def test_a_question_naming_a_time_lifts_what_was_said_then(tmp_path: Path) -> None:
    """What was said from a week before to a week after the time a question names is searched on its
    own and lifted (the ``when`` part); the same question without a time is the plain search."""
    acct = soulpass.open(tmp_path, embedder="none").account("days", create=True)
    try:
        march, july = datetime(2023, 3, 4, 10, tzinfo=UTC), datetime(2023, 7, 12, 10, tzinfo=UTC)
        chat(acct, "march", [("Ann", "we took the dog to the beach and swam"), ("Ann", "the beach was windy")], march)
        chat(acct, "july", [("Ann", "I painted a lake at sunset")], july)
        chat(acct, "early august", [("Ann", "back from the beach, I told you about the lake")],
             datetime(2023, 8, 3, 10, tzinfo=UTC))  # within a week after July: told of it later
        chat(acct, "late august", [("Ann", "beach beach beach, the beach again")], datetime(2023, 8, 20, tzinfo=UTC))
        hits = acct.search("What did Ann do at the beach in July 2023?", 5, kinds=["turn_user"])
        then = {h.text for h in hits if "when" in h.parts}
        told = "back from the beach, I told you about the lake"
        assert then == {"I painted a lake at sunset", told}
        assert hits[0].text == told  # the best of then, by the whole weight
        assert hits[0].parts["when"] == plans.W_WHEN
        assert all(h.score == pytest.approx(h.parts["score"]) for h in hits)
        plain = acct.search("What did Ann do at the beach?", 5, kinds=["turn_user"])
        assert not any("when" in h.parts for h in plain)
        assert [(h.id, h.score) for h in plain] == [
            (h.id, h.score) for h in acct.index().search("What did Ann do at the beach?", 5, TURNS)]
    finally:
        acct.close()


def test_the_time_a_question_names_narrows_the_callers_own_time_bounds() -> None:
    from soulpass.retrieval import DateRange

    july = (DateRange("July 2023", datetime(2023, 7, 1).date(), datetime(2023, 7, 31).date()),)
    window = plans.within(july, Filters(kinds=("turn_user",)))
    assert window == Filters(kinds=("turn_user",), since=datetime(2023, 6, 24, tzinfo=UTC),
                             until=datetime(2023, 8, 8, tzinfo=UTC))
    narrowed = plans.within(july, Filters(since=datetime(2023, 7, 10), until=datetime(2023, 9, 1, tzinfo=UTC)))
    assert narrowed is not None and (narrowed.since, narrowed.until) == (datetime(2023, 7, 10, tzinfo=UTC),
                                                                         datetime(2023, 8, 8, tzinfo=UTC))
    assert plans.within(july, Filters(until=datetime(2023, 6, 1, tzinfo=UTC))) is None  # nothing of it left

    asked: list[Filters | None] = []

    class Recorder:
        def search(self, query: str, k: int = 10, filters: Filters | None = None,
                   extra: object = ()) -> list[plans.Hit]:
            asked.append(filters)
            return []

    plans.governed_search(Recorder(), "What did we eat on 8 May 2023?", 5)
    assert Filters(since=datetime(2023, 5, 1, tzinfo=UTC), until=datetime(2023, 5, 16, tzinfo=UTC)) in asked
    asked.clear()
    plans.governed_search(Recorder(), "What did we eat?", 5)
    assert all(f is None or (f.since, f.until) == (None, None) for f in asked)
