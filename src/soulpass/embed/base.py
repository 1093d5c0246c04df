"""The embedding contract: a model turns texts into unit vectors of one fixed size.

Vectors are only comparable with vectors from the same ``model_id``; an index stores the id
with its vectors and re-embeds everything when the id changes, never mixing two models.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Protocol, runtime_checkable

import numpy as np
import numpy.typing as npt

from soulpass.errors import BackendUnavailable, InvalidInput

__all__ = ["EXTRA_HINT", "Embedder", "PreparedQueries", "QueryEmbedder", "Vectors", "embed_query", "l2_normalise",
           "missing_extra", "prepare_query"]

#: A float32 matrix, one L2-normalised row per text.
Vectors = npt.NDArray[np.float32]

EXTRA_HINT = "pip install 'soulpass[embed]'"


@runtime_checkable
class Embedder(Protocol):
    """Turns texts into vectors. Implementations are safe to call from several threads."""

    @property
    def model_id(self) -> str:
        """Names model *and* variant (weights, quantisation): equal ids promise comparable vectors."""
        ...

    @property
    def dim(self) -> int:
        """Length of every vector."""
        ...

    def embed_batch(self, texts: Sequence[str]) -> Vectors:
        """A ``(len(texts), dim)`` float32 array of unit rows, in the order of ``texts``.

        The vector of a text does not depend on the other texts of the batch.
        """
        ...


@runtime_checkable
class QueryEmbedder(Embedder, Protocol):
    """An embedder with a path of its own for a search's query (e.g. faster arithmetic): the vector
    is only compared with stored ones, never stored, so it may differ from ``embed_batch``'s in the
    last digits, not in what it finds."""

    def embed_query(self, text: str) -> npt.NDArray[np.float32]:
        """The ``(dim,)`` unit vector of the query ``text``."""
        ...


def embed_query(embedder: Embedder, text: str) -> npt.NDArray[np.float32]:
    """The ``(dim,)`` unit vector of a query: the embedder's own query path where it has one."""
    if not isinstance(text, str):
        raise InvalidInput(f"a query must be a string, not {type(text).__name__}")
    if isinstance(embedder, QueryEmbedder):
        return embedder.embed_query(text)
    row: npt.NDArray[np.float32] = embedder.embed_batch([text])[0]
    return row


@runtime_checkable
class PreparedQueries(Protocol):
    """An embedder that can do a query's own part of the work (tokenising it) on the calling thread
    and leave the model's to the function it returns, run on another thread: the model runs
    without the GIL, the tokenizer and numpy need it, which the calling thread holds meanwhile."""

    def prepare_query(self, text: str) -> Callable[[], npt.NDArray[np.float32]]:
        """What ``embed_query(text)`` returns, in two steps: this call, then the function's."""
        ...


def prepare_query(embedder: Embedder, text: str) -> Callable[[], npt.NDArray[np.float32]]:
    """A query's vector in two steps (``PreparedQueries``); where the embedder has no such path,
    all of ``embed_query`` is in the second."""
    if not isinstance(text, str):
        raise InvalidInput(f"a query must be a string, not {type(text).__name__}")
    if isinstance(embedder, PreparedQueries):
        return embedder.prepare_query(text)
    return lambda: embed_query(embedder, text)


def l2_normalise(rows: npt.NDArray[np.float32]) -> Vectors:
    """Rows scaled to unit length; an all-zero row stays zero (as torch's ``F.normalize``)."""
    norms = np.linalg.norm(rows, axis=1, keepdims=True)
    unit: Vectors = (rows / np.maximum(norms, np.float32(1e-12))).astype(np.float32, copy=False)
    return unit


def missing_extra(what: str, error: ImportError) -> BackendUnavailable:
    """The error for an optional package that is not installed, naming the extra that brings it."""
    return BackendUnavailable(
        f"{what} needs the optional package {error.name or 'it depends on'!r}: {EXTRA_HINT}",
        extra="embed",
        missing=error.name,
    )
