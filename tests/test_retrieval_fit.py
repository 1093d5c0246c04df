"""``benchmarks/retrieval_fit.py`` on a tiny generated LoCoMo: its ranking is the search's, its metric the
benchmark's, a fit never loses on what it was fitted on, and leave-one-data-set-out never sees the set
it reports."""

from __future__ import annotations

import importlib.util
import json
import os
import sys
from pathlib import Path
from types import ModuleType

import pytest

import soulpass
import soulpass.index.ranking as ranking
import soulpass.retrieval.plans as plans
from soulpass.bench import locomo
from soulpass.index.catalog import Filters
from soulpass.retrieval import Shape

pytest.importorskip("onnxruntime", reason="the 'embed' extra is not installed")

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "retrieval_fit.py"


@pytest.fixture(autouse=True)
def _no_fsync(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(os, "fsync", lambda fd: None)


def _load_script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("soulpass_bench_retrieval_fit", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while the class is made
    try:
        spec.loader.exec_module(module)
    finally:
        sys.modules.pop(spec.name, None)
    return module


SESSIONS = {
    "Ann": [
        [("Ann", "I adopted a puppy called Biscuit last weekend"), ("Bob", "Lovely! What breed is it?"),
         ("Ann", "A golden retriever, very playful"), ("Bob", "I started learning the cello this spring"),
         ("Ann", "How are the lessons going?"), ("Bob", "Slowly, my teacher is patient though")],
        [("Bob", "We went hiking in the Alps in July"), ("Ann", "My sister is getting married in Lisbon"),
         ("Bob", "Congratulations to her! When is the wedding?"), ("Ann", "In October, by the sea"),
         ("Bob", "I am baking sourdough bread every Sunday now"), ("Ann", "Biscuit chewed my new shoes")],
    ],
    "Cara": [
        [("Cara", "I moved to Oslo for a new job in robotics"), ("Dan", "How is the weather up there?"),
         ("Cara", "Cold and dark, but the office is great"), ("Dan", "I finished my first marathon in Berlin"),
         ("Cara", "What was your time?"), ("Dan", "Four hours and ten minutes")],
        [("Dan", "My daughter started school last week"), ("Cara", "I adopted a grey cat named Pixel"),
         ("Dan", "Does Pixel get along with people?"), ("Cara", "She sleeps on my keyboard all day"),
         ("Dan", "I am painting watercolours of old boats"), ("Cara", "Send me one, I love boats")],
    ],
}
QUESTIONS = {
    "Ann": [("What is the name of Ann's puppy?", ["D1:1"], 4), ("Which instrument is Bob learning?", ["D1:4"], 4),
            ("Where is Ann's sister's wedding?", ["D2:2", "D2:4"], 1), ("What does Bob bake?", ["D2:5"], 4)],
    "Cara": [("Where did Cara move for work?", ["D1:1"], 4), ("Where did Dan run a marathon?", ["D1:4", "D1:6"], 1),
             ("What is the name of Cara's cat?", ["D2:2"], 4)],
}


def _sample(n: int, first: str) -> dict[str, object]:
    conv: dict[str, object] = {}
    for s, turns in enumerate(SESSIONS[first], 1):
        conv[f"session_{s}_date_time"] = f"1{s}:00 am on {s} May, 2023"
        conv[f"session_{s}"] = [{"speaker": who, "dia_id": f"D{s}:{t}", "text": text}
                                for t, (who, text) in enumerate(turns, 1)]
    qa = [{"question": q, "answer": "x", "evidence": ev, "category": c} for q, ev, c in QUESTIONS[first]]
    return {"sample_id": f"tiny-{n}", "conversation": conv, "qa": qa}


def test_fit_ranks_as_search_scores_as_the_benchmark_and_never_loses(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    fit = _load_script()
    data = tmp_path / "tiny.json"
    data.write_text(json.dumps([_sample(0, "Ann"), _sample(1, "Cara")]), encoding="utf-8")
    home = tmp_path / "home"
    conversations = locomo.load(data)
    with pytest.raises(SystemExit, match="not a Soulpass home"):
        fit.open_accounts(tmp_path / "nowhere", conversations)
    with pytest.raises(SystemExit, match="lacks the account"):
        fit.open_accounts(_empty_home(tmp_path), conversations)
    # The fit ranks as the plain search does (the retrieval plans of Account.search re-score on top).
    bench = locomo.run(soulpass.open(home), conversations, searcher=_plain)

    _, accounts = fit.open_accounts(home, conversations)
    try:
        items = fit.prepare(accounts, conversations)
        assert len(items) == 7
        assert fit.self_check(accounts, items, per_conversation=10) == 7  # every question: script == search
        current = fit.evaluate(items)
        assert round(current["recall@10"], 4) == bench["overall"]["recall@10"]
        assert round(current["ndcg@10"], 4) == bench["overall"]["ndcg@10"]

        before = fit.current_weights()
        train = [i for i in items if i.conversation % 2 == 0]
        result = fit.fit([train], rounds=2)
        assert result["objective"] >= result["start_objective"]
        assert fit.evaluate(train, result["weights"])["objective"] == pytest.approx(result["objective"])
        assert fit.current_weights() == before  # the module's constants are restored after every evaluation
        assert before["W_FTS"] == ranking.W_FTS
    finally:
        for account in accounts:
            account.close()

    out = tmp_path / "fit.json"
    # The same conversations as two "data sets": each one's leave-one-out fit sees only the other.
    other = tmp_path / "other.json"
    other.write_text(json.dumps([_sample(0, "Cara")]), encoding="utf-8")
    other_home = tmp_path / "other-home"
    locomo.run(soulpass.open(other_home), locomo.load(other))
    assert fit.main(["--set", "tiny", str(home), str(data), "--set", "other", str(other_home), str(other),
                     "--json", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "cross-validated" in printed and "leave-one-data-set-out" in printed
    report = json.loads(out.read_text(encoding="utf-8"))
    assert report["self_check_questions"] == 6 + 3  # the first 3 of each conversation
    tiny = report["sets"]["tiny"]
    assert tiny["questions"] == 7 and tiny["current"]["recall@10"] == bench["overall"]["recall@10"]
    assert set(tiny["cv"]["folds"]) == {"A->B", "B->A"}
    # Fitted on "other" alone: evaluating those weights on "tiny" gives what the report says.
    again = fit.evaluate(items, tiny["lodo"]["weights"])
    assert round(again["recall@10"], 4) == tiny["lodo"]["test"]["recall@10"]
    assert set(report["fit_all"]["weights"]) == set(fit.WEIGHTS)
    # The headline: two folds by conversation over both sets together. Fold B of "tiny" (its odd
    # conversation) is tested with the weights fitted on fold A of both sets, and the figure says so.
    pooled = report["cv_pooled"]
    assert set(pooled["folds"]) == {"A->B", "B->A"}
    assert set(pooled["folds"]["A->B"]["test"]) == {"tiny"}  # "other" has no odd conversation
    fold_b = [i for i in items if i.conversation % 2 == 1]
    again = fit.evaluate(fold_b, pooled["folds"]["A->B"]["weights"])
    assert round(again["recall@10"], 4) == pooled["folds"]["A->B"]["test"]["tiny"]["recall@10"]
    assert pooled["sets"]["tiny"]["test"]["questions"] == 7 and pooled["sets"]["other"]["test"]["questions"] == 3
    assert sum(c["questions"] for c in pooled["sets"]["tiny"]["per_category"].values()) == 7
    assert "2-fold cv, all sets (headline)" in printed
    by_category = tiny["lodo"]["per_category"]
    assert set(by_category) == {"1 multi-hop", "4 single-hop"}
    assert sum(c["questions"] for c in by_category.values()) == 7


def _plain(account: soulpass.Account, query: str, k: int) -> list[str]:
    return [h.id for h in account.index().search(query, k, Filters(kinds=locomo.TURN_KINDS))]


def _empty_home(tmp_path: Path) -> Path:
    empty = tmp_path / "empty"
    (empty / "accounts").mkdir(parents=True)
    return empty


def test_search_cv_ranks_each_fold_with_the_other_folds_weights(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """``benchmarks/search_cv.py``: the engine's search over each fold's conversations, under the
    weights fitted on the other fold (read from a retrieval_fit JSON); the module's weights restored."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.syspath_prepend(str(SCRIPT.parent))  # its shared module (plan_ablation)
    spec = importlib.util.spec_from_file_location("soulpass_bench_search_cv", SCRIPT.with_name("search_cv.py"))
    assert spec is not None and spec.loader is not None
    cv = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(cv)
    data = tmp_path / "tiny.json"
    data.write_text(json.dumps([_sample(0, "Ann"), _sample(1, "Cara")]), encoding="utf-8")
    home = tmp_path / "home"
    conversations = locomo.load(data)
    locomo.run(soulpass.open(home), conversations)
    # Fold A's weights (fitted on A, tested on B) rank by full text alone, fold B's by meaning alone.
    by_text = {"W_FTS": 1.0, "W_DENSE": 0.0, "W_CONTEXT": 0.0, "W_SESSION": 0.0, "W_REPLY": 0.0}
    by_meaning = {**by_text, "W_FTS": 0.0, "W_DENSE": 1.0}
    fit_json = tmp_path / "fit.json"
    fit_json.write_text(json.dumps({"cv_pooled": {"folds": {"A->B": {"weights": by_text},
                                                            "B->A": {"weights": by_meaning}}}}), encoding="utf-8")
    before = ranking.W_FTS, ranking.W_DENSE
    out = tmp_path / "cv.json"
    assert cv.main(["--fit", str(fit_json), "--set", "tiny", str(home), str(data), "--json", str(out)]) == 0
    assert before == (ranking.W_FTS, ranking.W_DENSE)
    report = json.loads(out.read_text(encoding="utf-8"))
    assert report["fold_weights"] == {"A": by_meaning, "B": by_text}  # what each test fold was ranked by
    # The same searches by hand: conversation 0 (fold A) under fold B's fit, conversation 1 under A's.
    sp = soulpass.open(home)
    rows = []
    for n, weights in ((0, by_meaning), (1, by_text)):
        account = sp.account(locomo.account_name(conversations[n]))
        try:
            with cv.ranking_weights(weights):
                rows += locomo.evaluate(account, conversations[n])[0]
        finally:
            account.close()
    assert report["sets"]["tiny"] == locomo.score(rows)
    assert "2-fold CV" in capsys.readouterr().out
    with pytest.raises(SystemExit, match="no ranking weight"), cv.ranking_weights({"W_NOPE": 1.0}):
        pass
    # Session units' constants per fold (benchmarks/session_units.py's result): set for each fold's
    # searches, restored after, named in the report; shapes by name.
    plans_json = tmp_path / "units.json"
    plans_json.write_text(json.dumps({"folds": {"A->B": {"W_UNIT": 2.0, "OWN_TURNS_SHAPES": ["order"]},
                                                "B->A": {"W_UNIT": 8.0, "OWN_TURNS_SHAPES": []}}}), encoding="utf-8")
    units_before = plans.W_UNIT, plans.OWN_TURNS_SHAPES
    assert cv.main(["--fit", str(fit_json), "--plans-fit", str(plans_json), "--set", "tiny", str(home), str(data),
                    "--json", str(out)]) == 0
    assert units_before == (plans.W_UNIT, plans.OWN_TURNS_SHAPES)
    report = json.loads(out.read_text(encoding="utf-8"))
    assert report["fold_plan_values"] == {"A": {"W_UNIT": 8.0, "OWN_TURNS_SHAPES": []},
                                          "B": {"W_UNIT": 2.0, "OWN_TURNS_SHAPES": ["order"]}}
    with cv.plan_values({"OWN_TURNS_SHAPES": ["summary"]}):
        assert plans.OWN_TURNS_SHAPES == (Shape.SUMMARY,)
    with pytest.raises(SystemExit, match="no plan constant"), cv.plan_values({"W_NOPE": 1.0}):
        pass
