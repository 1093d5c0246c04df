"""MiniLM's float32 graph with its attention and GELU fused: the vectors that are stored, ~1.3x faster.

ONNX Runtime fuses the source graph's layer norms with their residual adds and folds the int8
weights back to float32, but not its attention (the export's NaN guard after the softmax stops the
fusion) nor its GELU (written out as ``Erf`` and four arithmetic operators): 279 operators run per
batch. Here each layer's attention, from its input to the heads joined again, becomes ONNX
Runtime's ``Attention`` (the query, key and value products side by side, the scaled scores, the
attention mask, the softmax, times the values) over the *same* float32 weights the session would
fold (``int8 * scale``, one scale per column, rounded as ``Cast`` then ``Mul`` round it), and each
GELU one ``Gelu``; ONNX Runtime then fuses the rest: 51 operators. Every product stays in float32
and every operator has the same float32 kernel on every CPU, so a text's vector is the same on
every machine, as before; it differs from the source graph's in the last bits (the scale is applied
once to the scores instead of to both sides; measured cosines: docs/performance.md).

The rewrite is kept like the query graph's (:func:`soulpass.embed.minilm_int8.kept_graph`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from soulpass.embed import minilm_int8
from soulpass.errors import Corrupted

__all__ = ["LAYERS", "batch_model", "rewrite"]

#: the rewrite's version, in the cached file's name: bump it when ``rewrite`` changes what it writes
REWRITE = 1
PREFIX = "soulpass-fused/"  # the names of the constants the rewrite adds
LAYERS = 6  # all-MiniLM-L6-v2's: one attention and one GELU each


def batch_model(model_path: Path, model_sha256: str) -> bytes:
    """The serialised fused float32 graph of ``model_path`` (whose sha256 the caller checked): from
    the cache where it holds a sound copy, else rewritten and kept there."""
    return minilm_int8.kept_graph(f"minilm-fused-v{REWRITE}", model_sha256, lambda: rewrite(model_path))


def rewrite(model_path: Path) -> bytes:
    """The serialised fused graph of ``model_path`` (see the module's notes); ``Corrupted`` when the
    file does not have the six attentions and GELUs this rewrite expects."""
    parsed = minilm_int8.parse(model_path, "fused graph")
    import onnx  # type: ignore[import-not-found,import-untyped,unused-ignore]
    from onnx import helper  # type: ignore[import-not-found,import-untyped,unused-ignore]

    model, initialisers, producers = parsed.model, parsed.initialisers, parsed.producers
    graph = model.graph
    products = {p.out: p for node in graph.node
                if (p := minilm_int8.weight_product(node, producers, parsed.readers, initialisers)) is not None}
    mask = f"{PREFIX}mask"
    nodes: list[Any] = [helper.make_node("Cast", ["attention_mask"], [mask], to=onnx.TensorProto.INT32)]
    attentions = gelus = 0
    for node in graph.node:
        attention = next((a for out in node.output[:1]
                          if (a := minilm_int8.attention_heads(out, producers, initialisers)) is not None), None)
        gelu = minilm_int8.gelu_input(node, producers, initialisers)
        if attention is not None:  # node makes the heads' joined output: the whole attention instead
            nodes.append(_attention(node.output[0], attention, products, initialisers, mask, graph))
            attentions += 1
        elif gelu is not None:
            nodes.append(helper.make_node("Gelu", [gelu], [node.output[0]], name=f"{node.name}/gelu",
                                          domain="com.microsoft"))
            gelus += 1
        else:
            nodes.append(node)
    if attentions != LAYERS or gelus != LAYERS:
        raise Corrupted(f"model file {model_path} has {attentions} attentions and {gelus} GELUs this rewrite "
                        f"knows, expected {LAYERS} of each", path=str(model_path))
    return minilm_int8.serialised(model, nodes)


def _attention(out: str, found: tuple[str, str, str, int, float], products: dict[str, Any],
               initialisers: dict[str, Any], mask: str, graph: Any) -> Any:
    """One ``Attention`` making ``out`` from the input of the query, key and value products ``found``
    names (``minilm_int8.attention_heads``), over their float32 weights side by side."""
    from onnx import helper, numpy_helper  # type: ignore[import-not-found,import-untyped,unused-ignore]

    q, k, v, size, scale = found
    try:
        sides = [products[q], products[k], products[v]]
    except KeyError as e:
        raise Corrupted(f"the attention making {out} does not read three weight products") from e
    if len({p.x for p in sides}) != 1 or any(p.bias is None for p in sides):
        raise Corrupted(f"the attention making {out} does not read one input through three biased products")

    def array(name: str) -> Any:
        return numpy_helper.to_array(initialisers[name])

    # What the session folds Mul(Cast(W), s) into: each int8 weight as float32, times its column's scale.
    weights = np.concatenate([array(p.ints).astype(np.float32) * array(p.scales) for p in sides], axis=1)
    bias = np.concatenate([array(p.bias) for p in sides]).astype(np.float32)
    names = [f"{PREFIX}{out}/weights", f"{PREFIX}{out}/bias"]
    graph.initializer.extend(numpy_helper.from_array(a, n) for a, n in zip((weights, bias), names, strict=True))
    return helper.make_node("Attention", [sides[0].x, *names, mask], [out], name=f"{PREFIX}{out}",
                            domain="com.microsoft", num_heads=weights.shape[1] // 3 // size, scale=scale)
