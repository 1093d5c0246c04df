"""Smoke test of ``benchmarks/server_load.py``: 2 clients for a second against a real server process."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench_helpers import benchmark_module


def test_server_load_smoke(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "server_load.json"
    with benchmark_module("server_load") as bench:
        rc = bench.main(["--clients", "2", "--seconds", "1", "--workdir", str(tmp_path), "--json", str(out)])
    assert rc == 0
    printed = capsys.readouterr().out
    assert "p95 ms" in printed and "nothing lost: True" in printed
    result = json.loads(out.read_text(encoding="utf-8"))
    assert result["nothing_lost"]["ok"] and result["nothing_lost"]["acknowledged"] > 0
    assert result["overall"]["errors"] == 0 and result["by_kind"]["write"]["requests"] > 0
    assert list(tmp_path.iterdir()) == [out]  # the work folder is gone


def test_server_load_over_postgres_with_two_processes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    psycopg = pytest.importorskip("psycopg")
    from postgres_helpers import SERVER

    try:
        psycopg.connect(SERVER, connect_timeout=3).close()
    except psycopg.OperationalError as exc:
        pytest.skip(f"no PostgreSQL answers at {SERVER}: {exc}")
    out = tmp_path / "server_load.json"
    with benchmark_module("server_load") as bench:
        rc = bench.main(["--clients", "4", "--seconds", "1", "--postgres-processes", "1,2", "--postgres", SERVER,
                         "--workdir", str(tmp_path), "--json", str(out)])
    assert rc == 0
    printed = capsys.readouterr().out
    assert "PostgreSQL, 2 serve process(es)" in printed and "requests/s, PostgreSQL, by processes" in printed
    result = json.loads(out.read_text(encoding="utf-8"))
    for run in result["postgres"].values():
        assert run["nothing_lost"]["ok"] and run["nothing_lost"]["acknowledged"] > 0 and run["overall"]["errors"] == 0
    assert set(result["postgres_throughput_ratio"]) == {"1", "2"}
