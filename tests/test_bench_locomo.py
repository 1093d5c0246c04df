"""``soulpass bench locomo``: parsing, metrics, and a small end-to-end run through the CLI."""

from __future__ import annotations

import json
import math
import os
from pathlib import Path

import pytest
from click.testing import CliRunner

from soulpass.bench import locomo
from soulpass.cli.main import cli
from soulpass.errors import InvalidInput

pytest.importorskip("onnxruntime", reason="the 'embed' extra is not installed")


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
