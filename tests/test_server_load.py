"""Smoke test of ``benchmarks/server_load.py``: 2 clients for a second against a real server process."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[1] / "benchmarks" / "server_load.py"


def test_server_load_smoke(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    spec = importlib.util.spec_from_file_location("soulpass_bench_server_load", BENCH)
    assert spec is not None and spec.loader is not None
    bench = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = bench
    try:
        spec.loader.exec_module(bench)
        out = tmp_path / "server_load.json"
        rc = bench.main(["--clients", "2", "--seconds", "1", "--workdir", str(tmp_path), "--json", str(out)])
    finally:
        sys.modules.pop(spec.name, None)
    assert rc == 0
    printed = capsys.readouterr().out
    assert "p95 ms" in printed and "nothing lost: True" in printed
    result = json.loads(out.read_text(encoding="utf-8"))
    assert result["nothing_lost"]["ok"] and result["nothing_lost"]["acknowledged"] > 0
    assert result["overall"]["errors"] == 0 and result["by_kind"]["write"]["requests"] > 0
    assert list(tmp_path.iterdir()) == [out]  # the work folder is gone
