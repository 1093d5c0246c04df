"""Embedding offload over the Redis queue: throughput local vs 1 and 2 workers, and query latency.

    python benchmarks/embed_offload.py [--redis redis://127.0.0.1:6379/0] [--n 2000] [--queries 200]
        [--data ../shared/bench/locomo10.json] [--json benchmarks/results/embed_offload.json]

* ``local``: the embedded MiniLM in this process (``threads`` = the machine's cores, at most 2 here),
  ``embed_batch`` over all texts;
* ``1 worker`` / ``2 workers``: real ``soulpass worker`` processes (MiniLM, ``--threads`` split so
  that all workers together use the same cores as the local run), fed through
  ``RemoteEmbedder.embed_for_index`` (batch tasks of 32 texts) end to end: push, embed, reply,
  decode, in order;
* ``query``: single texts (the seed's one-text form) one at a time against one idle worker vs the
  local model: p50/p95 of each, and the added latency of the round trip (remote minus local).

Texts are LoCoMo turns when ``--data`` names the LoCoMo file, else generated sentences (said on
the first line and in the JSON's ``source``); a ``--data`` that does not exist is an error. The queue is a private
one (``queue:gpu_heavy:bench-<random>``) on the given Redis; its keys are deleted afterwards.
On a machine whose cores are shared with other processes the figures move with their load: the
JSON records the load average before and after.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import numpy as np

from soulpass.embed.minilm import MiniLM
from soulpass.embed.redis_queue import connect, live_workers
from soulpass.embed.remote import RemoteEmbedder
from soulpass.embed.wire import QueueNames

__all__ = ["main"]

ROOT = Path(__file__).resolve().parents[1]


def load_texts(data: Path | None, n: int) -> tuple[list[str], str]:
    if data is not None:
        if not data.is_file():
            raise SystemExit(f"--data {data}: no such file (the LoCoMo JSON, e.g. ../shared/bench/locomo10.json)")
        turns: list[str] = []
        for sample in json.loads(data.read_text(encoding="utf-8")):
            conversation: dict[str, Any] = sample["conversation"]
            session = 1
            while f"session_{session}" in conversation:
                turns += [f"{t['speaker']}: {t['text']}" for t in conversation[f"session_{session}"]]
                session += 1
        step = len(turns) / n
        return [turns[int(k * step)] for k in range(min(n, len(turns)))], f"LoCoMo turns ({data.name})"
    rng = random.Random(7)
    sentence = ("the heron waited by the cold river while a storm rolled over the hills and somebody "
                "remembered an old promise about the lighthouse keeper and his dog")
    words = sentence.split(" ")
    return [" ".join(rng.choices(words, k=rng.randint(8, 30))) for _ in range(n)], "generated sentences"


def start_workers(url: str, names: QueueNames, count: int, threads: int,
                  log_dir: Path) -> list[subprocess.Popen[bytes]]:
    procs = []
    for i in range(count):
        with (log_dir / f"worker-{count}-{i}.log").open("ab") as log:
            procs.append(subprocess.Popen(
                [sys.executable, "-m", "soulpass.worker", "--redis", url, "--queue", names.queue,
                 "--threads", str(threads), "--batch", "128", "--id", f"bench-{count}-{i}"],
                stdout=log, stderr=subprocess.STDOUT))
    client = connect(url)
    deadline = time.monotonic() + 120
    while len(live_workers(client, names)) < count:
        if time.monotonic() > deadline:
            raise RuntimeError("workers did not start")
        time.sleep(0.1)
    return procs


def stop_workers(procs: list[subprocess.Popen[bytes]]) -> None:
    for p in procs:
        p.terminate()
    for p in procs:
        p.wait(60)


def throughput(fn: Any, texts: list[str], repeats: int) -> dict[str, float]:
    fn(texts[:64])  # warm up
    runs = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn(texts)
        runs.append(time.perf_counter() - start)
    best = min(runs)
    return {"seconds_best": round(best, 3), "seconds_median": round(statistics.median(runs), 3),
            "texts_per_second": round(len(texts) / best, 1),
            "texts_per_second_median": round(len(texts) / statistics.median(runs), 1)}


def latencies(fn: Any, queries: list[str]) -> dict[str, float]:
    for q in queries[:10]:
        fn([q])
    times = []
    for q in queries:
        start = time.perf_counter()
        fn([q])
        times.append((time.perf_counter() - start) * 1000)
    times.sort()
    return {"p50_ms": round(statistics.median(times), 3), "p95_ms": round(times[int(0.95 * (len(times) - 1))], 3),
            "mean_ms": round(statistics.fmean(times), 3)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--redis", default="redis://127.0.0.1:6379/0")
    ap.add_argument("--n", type=int, default=2000, help="texts per throughput run")
    ap.add_argument("--queries", type=int, default=200, help="single queries for the latency run")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--cores", type=int, default=min(2, os.cpu_count() or 1), help="threads in all, every mode")
    ap.add_argument("--data", type=Path, default=None,
                    help="LoCoMo JSON whose turns are embedded (default: generated sentences)")
    ap.add_argument("--json", type=Path, default=ROOT / "benchmarks" / "results" / "embed_offload.json")
    args = ap.parse_args(argv)

    texts, source = load_texts(args.data, args.n)
    print(f"texts: {len(texts)} {source}", flush=True)
    queries = [t[:80] for t in texts[:: max(1, len(texts) // args.queries)]][: args.queries]
    names = QueueNames(f"queue:gpu_heavy:bench-{uuid.uuid4().hex[:8]}")
    args.json.parent.mkdir(parents=True, exist_ok=True)
    log_dir = Path(tempfile.mkdtemp(prefix="embed_offload-"))  # the workers' logs
    load_before = os.getloadavg()
    local = MiniLM(threads=args.cores)
    results: dict[str, Any] = {"texts": len(texts), "source": source, "cores": args.cores,
                               "cpu_count": os.cpu_count(), "loadavg_before": [round(x, 2) for x in load_before]}
    results["local"] = throughput(local.embed_batch, texts, args.repeats)
    print(f"local ({args.cores} threads):  {results['local']['texts_per_second']:8.1f} texts/s")

    remote = RemoteEmbedder(args.redis, names=names, task_size=32, index_timeout=120)
    reference = local.embed_batch(texts[:200])
    try:
        for count in (1, 2):
            threads = max(1, args.cores // count)
            procs = start_workers(args.redis, names, count, threads, log_dir)
            try:
                key = f"workers_{count}"
                got = remote.embed_for_index(texts[:200])
                assert np.allclose(got, reference, atol=1e-5), "workers' vectors differ from the local model's"
                results[key] = {**throughput(remote.embed_for_index, texts, args.repeats), "threads_each": threads}
                print(f"{count} worker(s) ({threads} thread(s) each): {results[key]['texts_per_second']:8.1f} texts/s")
                if count == 1:
                    one = MiniLM(threads=1)  # a query runs on one thread locally and in the worker
                    results["query_local"] = latencies(one.embed_batch, queries)
                    results["query_remote"] = latencies(
                        lambda q: remote.embed_remote(q, timeout=10, single=True), queries)
                    added = {k: round(results["query_remote"][k] - results["query_local"][k], 3)
                             for k in ("p50_ms", "p95_ms", "mean_ms")}
                    results["query_added_latency"] = added
                    print(f"query local p50 {results['query_local']['p50_ms']:.2f} ms, remote p50 "
                          f"{results['query_remote']['p50_ms']:.2f} ms: round trip adds {added['p50_ms']:.2f} ms "
                          f"(p95 {added['p95_ms']:.2f} ms)")
            finally:
                stop_workers(procs)
    finally:
        client = connect(args.redis)
        keys = list(client.scan_iter(match=f"{names.queue}*", count=1000))
        if keys:
            client.delete(*keys)
    results["loadavg_after"] = [round(x, 2) for x in os.getloadavg()]
    results["machine_note"] = (f"{os.cpu_count()} cores shared with other processes (load average before "
                               f"{load_before[0]:.1f}); workers run on the same machine as the client")
    args.json.write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")
    print(f"wrote {args.json} (worker logs in {log_dir})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
