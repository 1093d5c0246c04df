"""Smoke test of ``benchmarks/mem0_compare.py``: our side end to end on a tiny LoCoMo file, the
arguments it refuses, and Mem0's side where ``mem0ai`` is importable (it normally runs from its
own virtual environment, given by ``--mem0-python``)."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest

from bench_helpers import benchmark_module
from test_bench_locomo import sample

pytest.importorskip("onnxruntime", reason="the 'embed' extra is not installed")


def test_our_side_searches_every_question_and_scores_recall(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    data = tmp_path / "locomo.json"
    data.write_text(json.dumps([sample("conv-a"), sample("conv-b")]), encoding="utf-8")
    with benchmark_module("mem0_compare") as bench:
        plain = bench.plain_data(data, 1)
        assert [c["id"] for c in plain["conversations"]] == ["conv-a"]
        conv = plain["conversations"][0]
        assert conv["turns"][0] == {"dia": "D1:1", "speaker": "Ann", "text": "I adopted a puppy called Biscuit"}
        plain["source"] = str(data)
        data_file = tmp_path / "plain.json"
        data_file.write_text(json.dumps(plain), encoding="utf-8")
        got = bench.worker_ours(tmp_path, data_file, build=True)
        assert got["queries"] == len(conv["questions"]) == 3
        assert got["recall_at_10"] > 0.5  # a five-turn conversation: the evidence is in every top 10
        assert got["p50_ms"] > 0 and got["repeat_p50_ms"] > 0 and got["build_s"] > 0
        again = bench.worker_ours(tmp_path, data_file, build=False)  # the kept accounts are searched again
        assert again["recall_at_10"] == got["recall_at_10"] and "build_s" not in again
        assert again["rankings_sha256"] == got["rankings_sha256"]  # the same top 10s: the same digest
        assert len(got["rankings_sha256"]) == 64
        assert bench.recall_at(["D1:1", "D2:2"], ["D2:2", "D9:9"]) == 0.5


def test_it_needs_mem0s_python_and_the_data(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with benchmark_module("mem0_compare") as bench:
        assert bench.main(["--json", str(tmp_path / "r.json")]) == 2
        assert "--mem0-python is required" in capsys.readouterr().err
        assert bench.main(["--mem0-python", sys.executable, "--data", str(tmp_path / "nope.json")]) == 2
        assert "does not exist" in capsys.readouterr().err
        with pytest.raises(SystemExit):  # an unknown Mem0 setup is refused, naming the known ones
            bench.main(["--mem0-python", sys.executable, "--mem0-setups", "hybrid,chroma"])
        assert "Mem0 setups are hybrid, hybrid-int8, faiss, qdrant, not 'hybrid,chroma'" in capsys.readouterr().err
        assert bench.setups_arg(" faiss,hybrid,faiss ") == ["faiss", "hybrid"]


@pytest.mark.skipif(importlib.util.find_spec("mem0") is None,
                    reason="mem0ai is not installed here: the benchmark runs it from its own environment")
def test_mem0_side(tmp_path: Path) -> None:
    data = tmp_path / "locomo.json"
    data.write_text(json.dumps([sample("conv-a")]), encoding="utf-8")
    with benchmark_module("mem0_compare") as bench:
        plain = bench.plain_data(data, 1)
        data_file = tmp_path / "plain.json"
        data_file.write_text(json.dumps(plain), encoding="utf-8")
        got = bench.worker_mem0(tmp_path, data_file, "faiss", build=True)
        assert got["queries"] == 3 and 0 <= got["recall_at_10"] <= 1
