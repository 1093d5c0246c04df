"""Session units (``soulpass.retrieval.units``): the topic of an order or summary question, the
sessions a search's hits fall in, and the plan that lifts the best turn of each of the best sessions."""

from __future__ import annotations

import os
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

import soulpass
from soulpass import Committed
from soulpass.index.catalog import CatalogRow, Filters
from soulpass.index.search import Hit
from soulpass.retrieval import plans
from soulpass.retrieval.plans import Plan, planned_search, run_plan
from soulpass.retrieval.units import SessionUnit, session_units, topic_query

T0 = datetime(2025, 3, 1, 9, 0, tzinfo=UTC)
TURNS = Filters(kinds=("turn_user",))


@pytest.fixture(autouse=True)
def _no_fsync(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(os, "fsync", lambda fd: None)


def test_the_topic_query_keeps_what_was_talked_of_and_drops_how_the_answer_is_asked_for() -> None:
    assert topic_query("Can you walk me through the order in which I brought up different aspects of "
                       "optimizing my chat app throughout our conversations (mention 9 items in order)?") == (
        "optimizing chat app")
    assert topic_query("Give me a detailed summary of what we discussed about the garden fence") == "garden fence"
    assert topic_query("Summarise our conversations") == ""  # nothing but the asking


def hit(rid: str, score: float, session: str | None) -> Hit:
    row = CatalogRow(id=rid, kind="turn_user", version=1, valid_to=None, replaced_at=None, event_time=None,
                     agent="user", session_id=session, persona_id=None, event_id=None, tags=(), superseded_by=None,
                     path=f"{rid}.json", text=rid, semantic_hash="", content_hash="")
    return Hit(id=rid, kind="turn_user", version=1, path=row.path, text=rid, score=score, row=row)


def test_a_session_scores_the_sum_of_its_best_hits_and_points_to_its_turns_best_first() -> None:
    hits = [hit("a1", 10.0, "A"), hit("b1", 9.0, "B"), hit("b2", 8.0, "B"), hit("b3", 7.0, "B"), hit("b4", 6.5, "B"),
            hit("c1", 1.0, "C"), hit("x", 0.0, None)]
    units = session_units(hits, 5)
    # Scaled over the hits: a1 1.0; B's best three 0.9 + 0.8 + 0.7 = 2.4 (its fourth does not count).
    assert [u.session_id for u in units] == ["B", "A", "C"]
    assert units[0] == SessionUnit("B", 1.0, tuple(hits[1:5]))
    assert units[1].score == pytest.approx(1.0 / 2.4) and units[2].score == pytest.approx(0.1 / 2.4)
    assert [u.session_id for u in session_units(hits, 1)] == ["B"]
    assert session_units([], 3) == [] and session_units(hits, 0) == []
    # Equal sums: the smaller session id first, so that results are reproducible.
    assert [u.session_id for u in session_units([hit("q", 1.0, "Q"), hit("p", 1.0, "P")], 2)] == ["P", "Q"]


def chat(acct: soulpass.Account, name: str, turns: list[str], start: datetime) -> None:
    sb = acct.create_sandbox(name)
    for i, text in enumerate(turns):
        sb.write_turn({"kind": "turn_user", "text_excerpt": text, "agent": "user",
                       "created_at": start + timedelta(minutes=i)})
    assert isinstance(sb.archive(), Committed)


@pytest.fixture
def project(tmp_path: Path) -> Iterator[soulpass.Account]:
    """One session says "garden" in every turn; two others each mention it twice, among other things."""
    acct = soulpass.open(tmp_path, embedder="none").account("me", create=True)
    chat(acct, "spring", ["the garden beds need compost", "garden compost from the garden shop",
                          "garden shop garden gloves", "garden gloves for the garden roses"], T0)
    chat(acct, "summer", ["my bike chain broke", "the garden hose is leaking", "bike lights are cheap",
                          "a garden party on friday"], T0 + timedelta(days=30))
    chat(acct, "autumn", ["I bought a new kettle", "leaves cover the garden path", "the kettle whistles",
                          "garden bulbs for next spring"], T0 + timedelta(days=60))
    yield acct
    acct.close()


def _session(h: Hit) -> str | None:
    return h.row.session_id if h.row is not None else None


def test_an_order_question_lifts_the_best_turn_of_every_session_of_the_topic(project: soulpass.Account) -> None:
    index = project.index()
    asked = "In which order did I bring up the garden?"
    assert len({_session(h) for h in index.search(asked, 3, TURNS)}) == 1  # one session fills the plain top
    plain = [h.id for h in index.search(asked, 20, TURNS)]
    every = planned_search(index, asked, 20, TURNS)
    lifted = [h for h in every if "unit" in h.parts]
    # The best turn of each session that names the topic, each by its session's score (the best: W_UNIT).
    assert len(lifted) == 3 and len({_session(h) for h in lifted}) == 3
    assert max(h.parts["unit"] for h in lifted) == plans.W_UNIT
    assert all(0.0 < h.parts["unit"] <= plans.W_UNIT for h in lifted)
    ranks = [h.id for h in every]
    assert all(ranks.index(h.id) <= plain.index(h.id) for h in lifted)  # each moves up (or stays first)
    assert sum(ranks.index(h.id) < plain.index(h.id) for h in lifted) >= 1
    for h in every:
        assert h.score == pytest.approx(h.parts["score"])


def test_without_units_a_topic_plan_is_the_topic_lift_alone(project: soulpass.Account,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(plans, "W_UNIT", 0.0)
    hits = run_plan(Plan(topic="garden"), project.index(), "Summarise the garden", 3, TURNS)
    assert all(h.parts.get("unit", 0.0) == 0.0 for h in hits) and any(h.parts.get("topic", 0.0) > 0 for h in hits)


def test_the_units_benchmark_cross_validates_on_the_same_searches(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """``benchmarks/session_units.py`` on two tiny conversations (one per fold): every question is
    scored, and a grid of one point with the units off is, question by question, the plans without them."""
    import importlib.util
    import json
    import sys

    from soulpass.bench import locomo
    script = Path(__file__).resolve().parents[1] / "benchmarks" / "session_units.py"
    spec = importlib.util.spec_from_file_location("soulpass_bench_session_units", script)
    assert spec is not None and spec.loader is not None
    bench = importlib.util.module_from_spec(spec)
    monkeypatch.setattr(sys, "path", list(sys.path))  # the script puts benchmarks/ on the path
    spec.loader.exec_module(bench)
    texts = ["I planted roses in the garden", "my bike chain broke", "the garden hose leaks", "bike lights"]
    samples = []
    for n in range(2):
        sessions = {}
        for s in range(2):
            sessions[f"session_{s + 1}_date_time"] = f"10:00 am on {s + 1} May, 2023"
            sessions[f"session_{s + 1}"] = [{"speaker": "Ann", "dia_id": f"D{s + 1}:{t + 1}", "text": text}
                                            for t, text in enumerate(texts[2 * s:2 * s + 2])]
        qa = [{"question": "In which order did Ann bring up the garden?", "answer": "x",
               "evidence": ["D1:1", "D2:1"], "category": 1},
              {"question": "What broke on the bike?", "answer": "x", "evidence": ["D1:2"], "category": 4}]
        samples.append({"sample_id": f"tiny{n}", "conversation": sessions, "qa": qa})
    data = tmp_path / "tiny.json"
    data.write_text(json.dumps(samples), encoding="utf-8")
    home = tmp_path / "home"
    locomo.run(soulpass.open(home, embedder="none"), locomo.load(data))
    monkeypatch.setattr(bench, "GRID", {"W_TOPIC": (0.0,), "W_UNIT": (0.0,)})
    out = tmp_path / "units.json"
    assert bench.main(["--set", "tiny", str(home), str(data), "--json", str(out)]) == 0
    report = json.loads(out.read_text(encoding="utf-8"))
    assert report["in_sample"] == {"W_TOPIC": 0.0, "W_UNIT": 0.0} == report["folds"]["A->B"]
    tiny = report["sets"]["tiny"]
    assert tiny["plain"]["overall"]["questions"] == tiny["cv"]["overall"]["questions"] == 4
    assert tiny["cv"]["overall"] == tiny["plans_without_units"]["overall"]
    assert tiny["cv_vs_plans_without_units"] == {"better": 0, "worse": 0}
