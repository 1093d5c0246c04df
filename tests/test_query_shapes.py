"""``benchmarks/query_shapes.py`` on a two-session conversation in the LoCoMo layout: every question
read with the speakers as participants and the latest session as the reference date."""

from __future__ import annotations

import json
from pathlib import Path

from bench_helpers import benchmark_module


def test_shapes_per_category(tmp_path: Path) -> None:
    sample = {
        "sample_id": "s1",
        "conversation": {
            "speaker_a": "Ada", "speaker_b": "Ben",
            "session_1_date_time": "1:56 pm on 8 May, 2023",
            "session_1": [{"speaker": "Ada", "dia_id": "D1:1", "text": "I went to Rome and Oslo."},
                          {"speaker": "Ben", "dia_id": "D1:2", "text": "I painted a lake."}],
            "session_2_date_time": "10:00 am on 20 May, 2023",
            "session_2": [{"speaker": "Ada", "dia_id": "D2:1", "text": "Then I went to Lima."},
                          {"speaker": "Ada", "dia_id": "D2:2", "text": "From now on, call me Ad. I prefer tea."}],
        },
        "qa": [
            {"question": "Which cities did Ada visit?", "answer": "x", "evidence": ["D1:1", "D2:1"], "category": 1},
            {"question": "What did Ben paint last week?", "answer": "x", "evidence": ["D1:2"], "category": 2},
            {"question": "Where did Ada go after Oslo?", "answer": "x", "evidence": ["D2:1"], "category": 2},
            {"question": "No evidence here?", "answer": "x", "evidence": [], "category": 4},
            {"question": "Whose name should I call Ada by?", "answer": "x", "evidence": ["D2:2"], "category": 3},
        ],
    }
    data = tmp_path / "tiny.json"
    data.write_text(json.dumps([sample]), encoding="utf-8")
    out = tmp_path / "shapes.json"
    with benchmark_module("query_shapes") as bench:
        assert bench.main([str(data), "--json", str(out), "--examples", "1", "--instructions"]) == 0
    table = json.loads(out.read_text(encoding="utf-8"))["tiny.json"]
    assert table["all"]["questions"] == 4  # the question without evidence is not scored, nor read
    assert table["1 multi-hop"]["shapes"]["list"] == 1
    assert table["2 temporal"]["shapes"] == {"fact": 1, "list": 0, "comparison": 0, "order": 1, "summary": 0}
    assert table["all"]["names_someone"] == 1.0
    # "From now on, call me Ad." stands in D2:2 and shares "call" with the question that asks by it
    assert table["governing"]["3 open-domain"] == {"questions": 1, "evidence_has_statement": 1,
                                                   "evidence_statement_shares_topic": 1,
                                                   "best_sharing_statement_is_evidence": 1}
    # "last week" resolved against 20 May 2023, the latest session
    assert table["2 temporal"]["has_time"] == 0.5
    assert table["1 multi-hop"]["examples"]["list"] == ["Which cities did Ada visit?"]
    assert table["instructions_by_speaker"] == {"Ada": {"turns": 3, "instruction": 1, "preference": 1},
                                                "Ben": {"turns": 1, "instruction": 0, "preference": 0}}
