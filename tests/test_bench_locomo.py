"""``soulpass bench locomo``: parsing, metrics, the LoCoMo-layout importer (BEAM speakers, long messages,
items it cannot take) and small end-to-end runs through the CLI."""

from __future__ import annotations

import json
import math
import os
from pathlib import Path

import pytest
from click.testing import CliRunner

import soulpass
from soulpass import Limits
from soulpass.agent.context import count_tokens
from soulpass.bench import locomo
from soulpass.bench.context import ContextMeter, token_counter
from soulpass.cli.main import cli
from soulpass.errors import InvalidInput
from soulpass.importers.locomo import Ingested, ingest
from soulpass.records import TurnLLM


@pytest.fixture(autouse=True)
def _no_fsync(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(os, "fsync", lambda fd: None)


def sample(sample_id: str) -> dict[str, object]:
    return {
        "sample_id": sample_id,
        "conversation": {
            "speaker_a": "Ann", "speaker_b": "Bob",
            "session_1_date_time": "1:56 pm on 8 May, 2023",
            "session_1": [
                {"speaker": "Ann", "dia_id": "D1:1", "text": "I adopted a puppy called Biscuit"},
                {"speaker": "Bob", "dia_id": "D1:2", "text": "Lovely! What breed?"},
                {"speaker": "Ann", "dia_id": "D1:3", "text": "A golden retriever", "blip_caption": "a photo of a dog"},
            ],
            "session_2_date_time": "10:00 am on 2 June, 2023",
            "session_2": [
                {"speaker": "Bob", "dia_id": "D2:1", "text": "I started learning the cello"},
                {"speaker": "Ann", "dia_id": "D2:2", "text": "My sister is getting married in Lisbon"},
            ],
        },
        "qa": [
            {"question": "What is the name of Ann's puppy?", "answer": "Biscuit", "evidence": ["D1:1"], "category": 4},
            {"question": "Which instrument is Bob learning?", "answer": "cello", "evidence": ["D2:1"], "category": 4},
            {"question": "Where is the wedding?", "answer": "Lisbon", "evidence": ["D2:2; D9:9"], "category": 1},
            {"question": "No evidence here", "answer": "x", "evidence": [], "category": 2},
        ],
    }


def test_load_parses_dates_captions_and_drops_dangling_evidence(tmp_path: Path) -> None:
    path = tmp_path / "mini.json"
    path.write_text(json.dumps([sample("s1")]), encoding="utf-8")
    [conv] = locomo.load(path)
    assert [s.when.isoformat() for s in conv.sessions] == ["2023-05-08T13:56:00+00:00", "2023-06-02T10:00:00+00:00"]
    assert conv.sessions[0].turns[2].text == "A golden retriever [shares a photo: a photo of a dog]"
    assert [q.evidence for q in conv.questions] == [("D1:1",), ("D2:1",), ("D2:2",)]  # D9:9 dangles; no-evidence out
    assert conv.dropped_evidence == 1
    with pytest.raises(InvalidInput, match="session date"):
        locomo.parse_when("sometime in spring")


def test_scores_are_fractional_recall_and_binary_ndcg() -> None:
    rows = [{"ranked": ["a", "x", "b"], "evidence": ["a", "b"], "category": 1},
            {"ranked": ["y", "c"], "evidence": ["c"], "category": 4}]
    result = locomo.score(rows)
    overall = result["overall"]
    assert overall["recall@1"] == pytest.approx((0.5 + 0.0) / 2)
    assert overall["recall@5"] == pytest.approx(1.0)
    ndcg_1 = (1 + 1 / math.log2(4)) / (1 + 1 / math.log2(3))
    ndcg_2 = (1 / math.log2(3)) / 1
    assert overall["ndcg@10"] == pytest.approx(round((ndcg_1 + ndcg_2) / 2, 4))
    assert result["per_category"]["1 multi-hop"]["questions"] == 1


def test_bench_locomo_end_to_end(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("onnxruntime", reason="the 'embed' extra is not installed")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    data = tmp_path / "mini.json"
    data.write_text(json.dumps([sample("s1"), sample("s2")]), encoding="utf-8")
    out, rows = tmp_path / "result.json", tmp_path / "rows.jsonl"
    args = ["--home", str(tmp_path / "home"), "bench", "locomo", "--data", str(data), "--out", str(out),
            "--rows", str(rows), "--check-rebuild"]
    res = CliRunner().invoke(cli, args)
    assert res.exit_code == 0, res.output
    result = json.loads(out.read_text(encoding="utf-8"))
    assert result["conversations"] == 2 and result["turns"] == 10
    assert result["overall"]["questions"] == 6
    assert result["overall"]["recall@5"] == 1.0  # five turns per conversation: everything is in the top 5
    assert result["overall"]["recall@1"] >= 0.5
    assert result["rebuild"] == {"queries_with_other_top10": 0}
    assert result["ingest"]["turns"] == 10
    lines = [json.loads(line) for line in rows.read_text(encoding="utf-8").splitlines()]
    first = next(r for r in lines if r["question"] == "What is the name of Ann's puppy?")
    assert first["ranked"][0] == "D1:1"  # dialog ids come back from the records' tags
    # The accounts are there: a second run fails unless told to reuse them.
    again = CliRunner().invoke(cli, args)
    assert again.exit_code == 2 and "already exists" in again.output
    reused = CliRunner().invoke(cli, [*args, "--reuse"])
    assert reused.exit_code == 0, reused.output
    assert json.loads(out.read_text(encoding="utf-8"))["overall"] == result["overall"]


# --- BEAM-layout chats, long messages and items that cannot be taken ---------------------------

NEEDLE = "the quarterly zebrafinch ledger"


def pasted(n: int) -> str:
    """A pasted document of ``n`` characters with NEEDLE in its middle."""
    filler = "lorem ipsum dolor sit amet consectetur adipiscing elit " * (n // 50 + 1)
    return (filler[: n // 2] + f" {NEEDLE} " + filler)[: n - 1] + "."


def beam_sample(sample_id: str, long_reply: str) -> dict[str, object]:
    """A user-assistant chat in the LoCoMo layout (as BEAM is converted), one reply ``long_reply``."""
    said = {1: ["I want to deploy my project by March 1", "A plan for the deployment: containers first",
                "Here is the spec I pasted, keep it", long_reply],
            2: ["My cat is called Pixel", "Pixel is a lovely name for a cat"]}
    conversation: dict[str, object] = {"speaker_a": "user", "speaker_b": "assistant",
                                       "session_1_date_time": "10:00 am on 5 January, 2024",
                                       "session_2_date_time": "9:00 am on 9 January, 2024"}
    for n, texts in said.items():
        conversation[f"session_{n}"] = [{"speaker": ("user", "assistant")[i % 2], "dia_id": f"D{n}:{i + 1}", "text": t}
                                        for i, t in enumerate(texts)]
    qa = [("What deadline did I set for the deployment?", ["D1:1"], 11),
          ("Where is the zebrafinch ledger?", ["D1:4"], 11), ("What is my cat called?", ["D2:1", "D2:2"], 12)]
    return {"sample_id": sample_id, "conversation": conversation,
            "qa": [{"question": q, "evidence": ev, "category": c} for q, ev, c in qa]}


def broken_sample() -> dict[str, object]:
    """A conversation with a turn that cannot be stored (not UTF-8) and a session with no date."""
    s = sample("s-broken")
    conv = s["conversation"]
    assert isinstance(conv, dict)
    conv["session_1"][1] = {"speaker": "Bob", "dia_id": "D1:2", "text": "bad \udcff text"}
    conv["session_2_date_time"] = "sometime in spring"
    return s


def write_data(path: Path, samples: list[object]) -> Path:
    path.write_text(json.dumps(samples), encoding="utf-8")  # ensure_ascii: the lone surrogate travels as \udcff
    return path


def test_beam_speakers_become_user_and_assistant_turns(tmp_path: Path) -> None:
    data = write_data(tmp_path / "beam.json", [beam_sample("b1", "A short reply")])
    [conv] = locomo.load(data)
    acct = soulpass.open(tmp_path / "home", embedder="none").account("b1", create=True)
    ingested = ingest(acct, conv)
    assert ingested == Ingested(turns=6, failures=())
    users = {r.tags[0]: r for r in acct.records("turn_user")}
    replies = {r.tags[0]: r for r in acct.records("turn_llm")}
    assert sorted(users) == ["dia:D1:1", "dia:D1:3", "dia:D2:1"] and all(r.agent is None for r in users.values())
    assert sorted(replies) == ["dia:D1:2", "dia:D1:4", "dia:D2:2"]
    assert all(r.agent == "assistant" for r in replies.values())
    assert sorted(locomo.dia_of(acct).values()) == ["D1:1", "D1:2", "D1:3", "D1:4", "D2:1", "D2:2"]
    rows, _ = locomo.evaluate(acct, conv)
    cat = next(r for r in rows if r["question"] == "What is my cat called?")
    assert set(cat["ranked"][:2]) == {"D2:1", "D2:2"}  # both turn kinds are searched


def test_locomo_speakers_stay_people(tmp_path: Path) -> None:
    [conv] = locomo.load(write_data(tmp_path / "l.json", [sample("s1")]))
    acct = soulpass.open(tmp_path / "home", embedder="none").account("s1", create=True)
    ingest(acct, conv)
    assert list(acct.records("turn_llm")) == []
    assert sorted({r.agent or "" for r in acct.records("turn_user")}) == ["Ann", "Bob"]


def test_read_reports_what_is_not_a_conversation(tmp_path: Path) -> None:
    data = write_data(tmp_path / "mixed.json", [sample("s1"), {"sample_id": "x"}, 7, broken_sample()])
    conversations, failures = locomo.read(data)
    assert [c.sample_id for c in conversations] == ["s1", "s-broken"]
    assert [f.item for f in failures] == ["x", "conv-2"]
    broken = conversations[1]
    assert [f.item for f in broken.failures] == ["s-broken/session_2"]
    assert "session date" in broken.failures[0].reason
    assert [s.number for s in broken.sessions] == [1]
    assert [q.evidence for q in broken.questions] == [("D1:1",)]  # the others pointed into session 2
    with pytest.raises(InvalidInput, match="expected a list"):
        locomo.read(write_data(tmp_path / "dict.json", {"not": "a list"}))  # type: ignore[arg-type]


def test_a_body_over_the_limit_is_reported_and_the_rest_stored(tmp_path: Path) -> None:
    [conv] = locomo.load(write_data(tmp_path / "b.json", [beam_sample("b1", pasted(5000))]))
    sp = soulpass.open(tmp_path / "home", embedder="none", limits=Limits(max_body_chars=4000))
    acct = sp.account("b1", create=True)
    ingested = ingest(acct, conv)
    assert ingested.turns == 5
    [refused] = ingested.failures
    assert refused.item == "b1/D1:4"
    assert "text_excerpt is 5000 characters long (limit 4000)" in refused.reason
    assert sorted(locomo.dia_of(acct).values()) == ["D1:1", "D1:2", "D1:3", "D2:1", "D2:2"]


def test_bench_on_long_messages_and_bad_items_end_to_end(tmp_path: Path) -> None:
    long_reply = pasted(350_000)
    data = write_data(tmp_path / "chats.json", [sample("s1"), beam_sample("b1", long_reply), broken_sample()])
    out, rows_out = tmp_path / "result.json", tmp_path / "rows.jsonl"
    res = CliRunner().invoke(cli, ["--home", str(tmp_path / "home"), "bench", "locomo", "--data", str(data),
                                   "--out", str(out), "--rows", str(rows_out), "--no-embed", "--k-context", "3"])
    assert res.exit_code == 0, res.output
    result = json.loads(out.read_text(encoding="utf-8"))
    assert result["embedder"] is None and result["conversations"] == 3
    # s-broken: session 2 unreadable (2 turns), one turn of session 1 refused.
    assert result["ingest"]["turns"] == 5 + 6 + 2
    items = {f["item"]: f["reason"] for f in result["failures"]["items"]}
    assert result["failures"]["count"] == 2 and set(items) == {"s-broken/session_2", "s-broken/D1:2"}
    assert "utf-8" in items["s-broken/D1:2"].lower()
    assert "items not ingested: 2" in res.output and "s-broken/D1:2" in res.output
    rows = [json.loads(line) for line in rows_out.read_text(encoding="utf-8").splitlines()]
    ledger = next(r for r in rows if r["question"] == "Where is the zebrafinch ledger?")
    # The 350k reply is found. The user's turn it answers comes first: a reply ranks W_REPLY below a
    # person's turn, and that turn's context is its best neighbour, the reply.
    assert ledger["ranked"][:2] == ["D1:3", "D1:4"]
    ctx = result["context_tokens"]
    assert ctx["k"] == 3 and ctx["p50"] <= ctx["p95"] and ctx["mean"] > 0
    # Each hit's text is cut to 700 characters in the block: the 350k reply costs ~200 tokens, not 90k.
    assert 0 < ledger["context_tokens"] < 3 * 300
    assert all((r["context_tokens"] > 0) == bool(r["ranked"]) for r in rows)  # no hit, no block
    assert "context block of the top 3 hits" in res.output
    acct = soulpass.open(tmp_path / "home", embedder="none").account("locomo-b1")
    [reply] = [r for r in acct.records("turn_llm") if "dia:D1:4" in r.tags]
    assert isinstance(reply, TurnLLM) and reply.text_excerpt == long_reply
    acct.close()


def test_context_meter_counts_the_project_block() -> None:
    chars = ContextMeter(k=2, counter=("chars/4", count_tokens))
    assert chars.tokenizer == "chars/4"
    name, count = token_counter()
    assert name in ("all-MiniLM-L6-v2 WordPiece", "chars/4")
    assert count("") == 0 and count("the cat sat on the mat") >= 6


def test_bench_reports_the_score_parts_and_runs_the_plans(tmp_path: Path) -> None:
    """The result names the score parts beyond the hybrid ones that reach a top 10, per question in
    the rows and counted over questions; --plans searches with every retrieval plan instead."""
    data = write_data(tmp_path / "chats.json", [beam_sample("b1", "A short reply about the zebrafinch ledger")])
    home, out, rows_out = tmp_path / "home", tmp_path / "r.json", tmp_path / "rows.jsonl"
    args = ["--home", str(home), "bench", "locomo", "--data", str(data), "--no-embed", "--rows", str(rows_out)]
    res = CliRunner().invoke(cli, [*args, "--out", str(out)])
    assert res.exit_code == 0, res.output
    result = json.loads(out.read_text(encoding="utf-8"))
    rows = [json.loads(line) for line in rows_out.read_text(encoding="utf-8").splitlines()]
    assert result["search"] == "engine" and all("reply" in r["parts"] for r in rows)  # replies in every top 10
    assert result["parts"]["reply"] == len(rows) == 3 and not set(result["parts"]) & locomo.BASE_PARTS
    assert "score parts beyond the hybrid ones" in res.output and "reply 3" in res.output
    res = CliRunner().invoke(cli, [*args, "--out", str(out), "--reuse", "--plans"])
    assert res.exit_code == 0, res.output
    planned = json.loads(out.read_text(encoding="utf-8"))
    assert planned["search"] == "plans" and planned["parts"]["reply"] == 3
    # "What is my cat called?" asks for one fact naming nobody: the plans leave it the plain search.
    assert planned["per_category"] and planned["overall"]["questions"] == 3
