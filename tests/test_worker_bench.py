"""Smoke test of ``benchmarks/embed_offload.py``: a few texts through every mode, JSON written."""

from __future__ import annotations

import importlib.util
import json
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from queue_helpers import shared_or_own_redis

BENCH = Path(__file__).resolve().parents[1] / "benchmarks" / "embed_offload.py"

pytest.importorskip("onnxruntime", reason="the 'embed' extra is not installed")


@pytest.fixture
def redis_url(tmp_path: Path) -> Iterator[str]:
    yield from shared_or_own_redis(tmp_path)


@pytest.mark.slow
def test_embed_offload_smoke(redis_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    spec = importlib.util.spec_from_file_location("soulpass_bench_embed_offload", BENCH)
    assert spec is not None and spec.loader is not None
    bench = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = bench
    try:
        spec.loader.exec_module(bench)
        out = tmp_path / "results" / "embed_offload.json"
        assert bench.main(["--redis", redis_url, "--n", "64", "--queries", "5", "--repeats", "1",
                           "--data", str(tmp_path / "missing.json"), "--json", str(out)]) == 0
    finally:
        sys.modules.pop(spec.name, None)
    printed = capsys.readouterr().out
    assert "local (" in printed and "2 worker(s)" in printed and "round trip adds" in printed
    result = json.loads(out.read_text(encoding="utf-8"))
    assert result["texts"] == 64 and result["source"] == "generated sentences"
    for mode in ("local", "workers_1", "workers_2"):
        assert result[mode]["texts_per_second"] > 0
    assert result["query_remote"]["p50_ms"] > 0 and "p50_ms" in result["query_added_latency"]
