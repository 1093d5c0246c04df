"""Smoke test of ``benchmarks/embed_offload.py``: a few texts through every mode, JSON written."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench_helpers import benchmark_module

pytest.importorskip("onnxruntime", reason="the 'embed' extra is not installed")


@pytest.mark.slow
def test_embed_offload_smoke(redis_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "results" / "embed_offload.json"
    with benchmark_module("embed_offload") as bench:
        with pytest.raises(SystemExit, match="no such file"):  # a --data that is not there is said, not swapped
            bench.main(["--data", str(tmp_path / "missing.json"), "--json", str(out)])
        assert bench.main(["--redis", redis_url, "--n", "64", "--queries", "5", "--repeats", "1",
                           "--json", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "local (" in printed and "2 worker(s)" in printed and "round trip adds" in printed
    result = json.loads(out.read_text(encoding="utf-8"))
    assert result["texts"] == 64 and result["source"] == "generated sentences"
    for mode in ("local", "workers_1", "workers_2"):
        assert result[mode]["texts_per_second"] > 0
    assert result["query_remote"]["p50_ms"] > 0 and "p50_ms" in result["query_added_latency"]
