"""The stored vectors' float32 graph, source against fused (``soulpass.embed.minilm_fused``).

In one process: ``MiniLM(fused=False)`` (the source graph, as ONNX Runtime optimises it) against
``MiniLM()`` (attention and GELU fused) on the turns of ``--conversations`` conversations of each
``--data`` file; the cosine of each text's two vectors; ``embed_batch`` in texts/s, the two
alternating, ``--rounds`` rounds, each file's turns as one batch; with ``--chunks``, the fused graph
again with other chunk sizes (``minilm.CHUNK``). With ``--index-data``, indexing as the CLI does it
(``soulpass bench locomo --limit N``, the ``indexing N s`` it reports) in fresh processes, the source
tree ``--old-src`` (say ``git archive <base> src``) and this one alternating. The load average is
recorded before and after each part. Prints the figures and writes JSON.

    python benchmarks/embed_fused.py --data ../shared/bench/locomo10.json ../shared/bench/beam500k.json \\
        --index-data ../shared/bench/beam500k.json --old-src /tmp/old/src
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))
DEFAULT_JSON = REPO / "benchmarks" / "results" / "embed_fused.json"


def turns_of(data: Path, conversations: int, limit: int) -> list[str]:
    """Up to ``limit`` turns (``speaker: text``) of the first ``conversations`` of ``data``."""
    from soulpass.importers.locomo import load

    return [f"{t.speaker}: {t.text}" for conv in load(data)[:conversations]
            for s in conv.sessions for t in s.turns][:limit]


def load_average() -> float:
    return os.getloadavg()[0]


def embed_rates(models: dict[str, Any], texts: list[str], rounds: int) -> dict[str, list[float]]:
    """Texts/s of each model's ``embed_batch(texts)``, the order swapped every round."""
    rates: dict[str, list[float]] = {name: [] for name in models}
    for r in range(rounds):
        for name in (list(models) if r % 2 == 0 else list(reversed(models))):
            t0 = time.perf_counter()
            models[name].embed_batch(texts)
            rates[name].append(round(len(texts) / (time.perf_counter() - t0), 1))
    return rates


def indexing(src: Path, data: Path, limit: int) -> dict[str, float]:
    """Indexing seconds and turns/s ``soulpass bench locomo`` reports, run from the source tree ``src``."""
    with tempfile.TemporaryDirectory() as home:
        env = {**os.environ, "PYTHONPATH": str(src)}
        out = Path(home) / "out.json"
        subprocess.run([sys.executable, "-c", "import sys; from soulpass.cli.main import main; sys.exit(main())",
                        "--home", home, "bench", "locomo", "--data", str(data), "--limit", str(limit),
                        "--out", str(out)], env=env, capture_output=True, text=True, check=True)
        ingest = json.loads(out.read_text())["ingest"]
    seconds = float(ingest["index_seconds"])
    return {"seconds": seconds, "turns_per_s": round(ingest["turns"] / seconds, 1), "load": round(load_average(), 2)}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0] if __doc__ else None)
    p.add_argument("--data", type=Path, nargs="+", required=True, help="LoCoMo-format JSON files")
    p.add_argument("--conversations", type=int, default=3)
    p.add_argument("--limit", type=int, default=1000, help="turns of each file")
    p.add_argument("--rounds", type=int, default=4)
    p.add_argument("--chunks", type=int, nargs="*", default=[], help="other chunk sizes to time")
    p.add_argument("--index-data", type=Path, help="a file to index with `soulpass bench locomo`")
    p.add_argument("--index-limit", type=int, default=2, help="its conversations")
    p.add_argument("--index-rounds", type=int, default=2)
    p.add_argument("--old-src", type=Path, help="the source tree indexing is compared with")
    p.add_argument("--json", type=Path, default=DEFAULT_JSON)
    args = p.parse_args(argv)
    for path in [*args.data, *([args.index_data] if args.index_data else [])]:
        if not path.exists():
            print(f"{path} does not exist", file=sys.stderr)
            return 2
    if args.index_data and not args.old_src:
        print("--index-data needs --old-src", file=sys.stderr)
        return 2
    from soulpass.embed import minilm
    from soulpass.embed.minilm import MiniLM

    models = {"source": MiniLM(fused=False), "fused": MiniLM()}
    result: dict[str, Any] = {"cpus": os.cpu_count(), "files": {}, "load_before": load_average()}
    for data in args.data:
        texts = turns_of(data, args.conversations, args.limit)
        vectors = {name: m.embed_batch(texts) for name, m in models.items()}  # also warms both
        cosines = np.sum(vectors["source"] * vectors["fused"], axis=1)
        rates = embed_rates(models, texts, args.rounds)
        entry: dict[str, Any] = {
            "texts": len(texts), "load": load_average(), "texts_per_s": rates,
            "speedup_median": round(float(np.median(rates["fused"]) / np.median(rates["source"])), 3),
            "cosine": {"min": float(cosines.min()), "p01": float(np.percentile(cosines, 1)),
                       "mean": float(cosines.mean()), "identical": int(np.sum(cosines >= 1.0))},
        }
        if args.chunks:
            chunked: dict[str, list[float]] = {}
            default = minilm.CHUNK
            for r in range(args.rounds):
                for size in ([default, *args.chunks] if r % 2 == 0 else [*reversed(args.chunks), default]):
                    minilm.CHUNK = size
                    t0 = time.perf_counter()
                    models["fused"].embed_batch(texts)
                    chunked.setdefault(str(size), []).append(round(len(texts) / (time.perf_counter() - t0), 1))
            minilm.CHUNK = default
            entry["fused_texts_per_s_by_chunk"] = chunked
        result["files"][data.name] = entry
        print(f"{data.name}: {len(texts)} turns; texts/s source {rates['source']} fused {rates['fused']} "
              f"(x{entry['speedup_median']}); cosine min {entry['cosine']['min']:.7f}", flush=True)
        if args.chunks:
            print(f"  fused texts/s by chunk: {entry['fused_texts_per_s_by_chunk']}", flush=True)
    if args.index_data:
        runs: dict[str, list[dict[str, float]]] = {"source": [], "fused": []}
        trees = {"source": args.old_src.resolve(), "fused": REPO / "src"}
        for r in range(args.index_rounds):
            for name in (["source", "fused"] if r % 2 == 0 else ["fused", "source"]):
                runs[name].append(indexing(trees[name], args.index_data, args.index_limit))
                print(f"  indexing {name}: {runs[name][-1]}", flush=True)
        result["indexing"] = {"data": args.index_data.name, "conversations": args.index_limit, "runs": runs}
    result["load_after"] = load_average()
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(result, indent=1) + "\n")
    print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
