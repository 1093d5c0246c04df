"""MiniLM's query graph: its 36 weight products in int8 arithmetic, a query's vector in about half the time.

The model stores each weight matrix as int8 with one scale per output column (``Cast`` then ``Mul``
before the ``MatMul``); ONNX Runtime turns them back into float32 and multiplies in float32, which
is what indexing uses (``MiniLM.embed_batch``). For a query, each of those products becomes ONNX
Runtime's ``DynamicQuantizeMatMul`` over the *same* int8 weights and scales (the bias added by the
product): the activations are quantised to uint8 on the fly and multiplied in integers. One scale per
product would be set by the [CLS] row, whose values span 3-6x the other tokens' (20-40 against 4-10
after a layer norm), so where a product reads a layer norm's or GELU's output, the [CLS] row and the
other rows are quantised and multiplied apart and joined again (``Split``, two products, ``Concat``);
the attention's output, whose [CLS] row is like the others, is multiplied whole (the vectors' cosine
to float32 moved by 0.00002). Query, key and value read one input: one product over their weights
side by side, its columns split after. The attention itself is one ``MultiHeadAttention`` (the
source's ~20 operators a layer: heads split, scaled scores, mask, softmax, heads joined; the
attention mask kept) and GELU one ``Gelu``: 136 operators where the source has 385.

Why: the query's vector in about half the time of float32, as close to it as recall can tell (the
measurements: docs/performance.md). The indexed vectors are never made here: a query is compared
with the float32 vectors of the texts, so nothing stored depends on this graph.

The rewrite (~0.17 s: importing onnx, parsing and writing 23 MB) is done once per machine: its result
is kept in ``~/.cache/soulpass/models``, named by the model's sha256
and its own, and read back only when its bytes still have that sha256; a cache that cannot be
written (read-only home, full disk) costs the rewrite in each process, nothing else. Writing one
removes the files of earlier rewrites and models (23 MB each).

Integers multiplied exactly on every CPU: x86 CPUs before VNNI multiply uint8 by int8 pairwise into
int16 (``vpmaddubsw``), which saturates for weights using all 8 bits (ONNX Runtime's and OpenVINO's
quantisation notes). Where :func:`exact_int8_products` finds no AVX512-VNNI, the graph is written
with the same weights as uint8 (each plus 128, a zero point of 128 per column: ``unsigned``), which
ONNX Runtime multiplies by widening both to int16 (``vpmaddwd``), exactly: the same integers as
VNNI's, in ~60% of float32's time on one thread of an AVX2 CPU (docs/performance.md).
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib
import logging
import os
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from soulpass.embed.base import missing_extra
from soulpass.errors import Corrupted

__all__ = [
    "UNFUSED", "WEIGHT_PRODUCTS", "attention_heads", "cache_dir", "exact_int8_products", "gelu_input", "kept_graph",
    "query_model", "rewrite", "weight_product",
]

log = logging.getLogger(__name__)

#: the rewrite's version, in the cached file's name: bump it when ``rewrite`` changes what it writes
REWRITE = 3
PREFIX = "soulpass-int8-query/"  # the names of the constants the rewrite adds

#: ONNX Runtime's graph fusions the query session goes without: its fused residual add and layer
#: norm (``SkipLayerNormalization``) is slower on one query than the two apart
UNFUSED = ("SkipLayerNormFusion",)

#: all-MiniLM-L6-v2's weight products: 6 layers x (query, key, value, output, two feed-forward)
WEIGHT_PRODUCTS = 36


def exact_int8_products() -> bool:
    """Whether this CPU multiplies uint8 by int8 without saturating (AVX512-VNNI: ``vpdpbusd``),
    as numpy's own CPU dispatch detected it; where not, the query graph's weights are uint8
    (:func:`query_model`'s ``unsigned``)."""
    try:  # what numpy.show_runtime() reads
        features = importlib.import_module("numpy._core._multiarray_umath").__cpu_features__
    except (ImportError, AttributeError):  # another numpy layout: say no (uint8 weights, exact anywhere)
        return False
    return bool(features.get("AVX512VNNI"))


def query_model(model_path: Path, model_sha256: str, *, unsigned: bool = False) -> bytes:
    """The serialised query graph of ``model_path`` (whose sha256 the caller checked): from the
    cache where it holds a sound copy, else rewritten and kept there. ``unsigned``: its weights as
    uint8 (see the module's notes), a graph of its own in the cache."""
    kind = f"minilm-int8-query{'-unsigned' if unsigned else ''}-v{REWRITE}"
    return kept_graph(kind, model_sha256, lambda: rewrite(model_path, unsigned=unsigned))


def kept_graph(kind: str, model_sha256: str, make: Callable[[], bytes]) -> bytes:
    """The graph ``make()`` gives for the model of ``model_sha256``, kept in :func:`cache_dir` as
    ``{kind}-{model's sha256}-{its own}.onnx`` and read back only when its bytes still have that
    sha256. ``kind`` ends with the rewrite's version (``-v3``): writing a file removes the others of
    the same kind before it (earlier rewrites', earlier models')."""
    folder = cache_dir()
    prefix = f"{kind}-{model_sha256[:16]}-"
    for kept in sorted(folder.glob(f"{prefix}*.onnx")) if folder.is_dir() else []:
        try:
            data = kept.read_bytes()
        except OSError:
            continue
        if hashlib.sha256(data).hexdigest()[:16] == kept.name[len(prefix):-len(".onnx")]:
            return data
        log.warning("ignoring %s: its bytes do not have the sha256 its name says", kept)
    data = make()
    path = folder / f"{prefix}{hashlib.sha256(data).hexdigest()[:16]}.onnx"
    try:
        folder.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=folder, prefix=f".{path.name}.", delete=False) as tmp:
            try:
                tmp.write(data)
                tmp.close()
                os.replace(tmp.name, path)
            except BaseException:
                os.unlink(tmp.name)
                raise
    except OSError as e:
        log.info("%s graph not cached (%s): rewritten again in the next process", kind, e)
        return data
    for stale in folder.glob(f"{kind.rsplit('-v', 1)[0]}-v*.onnx"):  # an earlier rewrite's, or model's
        if not stale.name.startswith(prefix):
            with contextlib.suppress(OSError):
                stale.unlink()
    return data


def cache_dir() -> Path:
    """Where the query graph is kept: ``~/.cache/soulpass/models`` (beside ``postgres``, the local
    folders of PostgreSQL accounts)."""
    return Path("~/.cache/soulpass/models").expanduser()


@dataclass(frozen=True)
class _Product:
    """One weight product of the source graph: ``out = x @ (ints * scales) [+ bias]``."""

    node: Any  # the MatMul
    x: str
    ints: str  # the int8 weights (rows: inputs, columns: outputs)
    scales: str  # one per column, shape (1, columns)
    out: str  # the bias Add's output when there is one, else the MatMul's
    bias: str | None
    added: Any  # the bias Add, or None


@dataclass(frozen=True)
class Parsed:
    """A model file loaded for a rewrite: the model, and the lookups its patterns are matched with."""

    model: Any
    initialisers: dict[str, Any]  # name -> TensorProto
    producers: dict[str, Any]  # value name -> the node making it
    readers: dict[str, list[Any]]  # value name -> the nodes reading it


def parse(model_path: Path, what: str) -> Parsed:
    """``model_path`` loaded (``what`` names the graph in the error when onnx is missing);
    ``Corrupted`` when it does not take ``input_ids`` and ``attention_mask``."""
    try:
        import onnx  # type: ignore[import-not-found,import-untyped,unused-ignore]
    except ImportError as e:
        raise missing_extra(f"The embedded MiniLM model's {what}", e) from e
    model = onnx.load(str(model_path))
    graph = model.graph
    readers: dict[str, list[Any]] = {}
    for node in graph.node:
        for name in node.input:
            readers.setdefault(name, []).append(node)
    inputs = {i.name for i in graph.input}
    if not {"input_ids", "attention_mask"} <= inputs:
        raise Corrupted(f"model file {model_path} has inputs {sorted(inputs)}, not input_ids and attention_mask",
                        path=str(model_path))
    return Parsed(model, {i.name: i for i in graph.initializer},
                  {out: node for node in graph.node for out in node.output}, readers)


def serialised(model: Any, nodes: list[Any]) -> bytes:
    """``model`` with ``nodes`` (less those nothing reads) as its graph, the initialisers they read
    and Microsoft's operators, serialised."""
    from onnx import helper  # type: ignore[import-not-found,import-untyped,unused-ignore]

    graph = model.graph
    del graph.node[:]
    graph.node.extend(_used(nodes, {o.name for o in graph.output}))
    read = {name for node in graph.node for name in node.input}
    kept = [i for i in graph.initializer if i.name in read]  # not the weights now side by side elsewhere
    del graph.initializer[:]
    graph.initializer.extend(kept)
    model.opset_import.append(helper.make_opsetid("com.microsoft", 1))
    data: bytes = model.SerializeToString()
    return data


def rewrite(model_path: Path, *, unsigned: bool = False) -> bytes:
    """The serialised query graph of ``model_path`` (see the module's notes); ``Corrupted`` when the
    file does not have the 36 int8 weight products this rewrite expects. ``unsigned``: each product's
    weights as uint8, each plus 128, with a zero point of 128 (the same products, exact without VNNI)."""
    parsed = parse(model_path, "query graph")
    import onnx  # type: ignore[import-not-found,import-untyped,unused-ignore]
    from onnx import helper, numpy_helper  # type: ignore[import-not-found,import-untyped,unused-ignore]

    model, initialisers, producers, readers = parsed.model, parsed.initialisers, parsed.producers, parsed.readers
    graph = model.graph
    products = [p for node in graph.node if (p := weight_product(node, producers, readers, initialisers)) is not None]
    if len(products) != WEIGHT_PRODUCTS:
        raise Corrupted(f"model file {model_path} has {len(products)} int8 weight products, expected "
                        f"{WEIGHT_PRODUCTS}", path=str(model_path))
    groups: dict[str, list[_Product]] = {}  # products of one input (query, key and value) become one
    for p in products:
        groups.setdefault(p.x, []).append(p)
    first_of = {group[0].node.name: group for group in groups.values()}
    dropped = {n.name for p in products for n in (p.node, p.added) if n is not None}

    def constant(name: str, value: Any) -> str:
        graph.initializer.append(numpy_helper.from_array(np.asarray(value), f"{PREFIX}{name}"))
        return f"{PREFIX}{name}"

    one, mask = constant("one", np.array([1], dtype=np.int64)), f"{PREFIX}mask"
    # (batch, tokens, features) cut into the [CLS] row and the rest: Split's sizes [1, tokens - 1], once.
    sizes = f"{PREFIX}sizes"
    nodes: list[Any] = [helper.make_node("Shape", ["input_ids"], [f"{sizes}/tokens"], start=1, end=2),
                        helper.make_node("Sub", [f"{sizes}/tokens", one], [f"{sizes}/rest"]),
                        helper.make_node("Concat", [one, f"{sizes}/rest"], [sizes], axis=0),
                        helper.make_node("Cast", ["attention_mask"], [mask], to=onnx.TensorProto.INT32)]
    for node in graph.node:
        if (gelu := gelu_input(node, producers, initialisers)) is not None:
            nodes.append(helper.make_node("Gelu", [gelu], [node.output[0]], name=f"{node.name}/gelu",
                                          domain="com.microsoft"))
        elif node.name in first_of:
            nodes += _int8_products(first_of[node.name], initialisers, producers, constant, sizes, mask,
                                    unsigned=unsigned)
        elif node.name not in dropped:
            nodes.append(node)
    return serialised(model, nodes)


def _int8_products(group: list[_Product], initialisers: dict[str, Any], producers: dict[str, Any],
                   constant: Any, sizes: str, mask: str, *, unsigned: bool = False) -> list[Any]:
    """The nodes computing the products of ``group`` (one input, one or several weights: query, key
    and value) in int8 arithmetic; ``constant(name, array)`` adds an initialiser and gives its name.
    ``unsigned``: the weights as uint8 (``w + 128``) with a zero point of 128 per column."""
    from onnx import helper, numpy_helper  # type: ignore[import-not-found,import-untyped,unused-ignore]

    def joined(names: list[str], axis: int = 0) -> Any:  # side by side (axis 1), or one after another
        arrays = [numpy_helper.to_array(initialisers[n]) for n in names]
        return np.concatenate(arrays if axis else [a.reshape(-1) for a in arrays], axis=axis)

    x, name = group[0].x, group[0].node.name
    columns = [initialisers[p.ints].dims[1] for p in group]
    # One product over the weights side by side (the model's own int8 weights), its columns split after.
    zero = ""  # no zero point: int8 weights are symmetric
    if unsigned:  # (w + 128) - 128 = w: the same products, as uint8 by uint8
        weights = joined([p.ints for p in group], axis=1).astype(np.int16)
        ints = constant(f"{name}/weights/uint8", (weights + 128).astype(np.uint8))
        zero = constant(f"{name}/zero", np.full(weights.shape[1], 128, dtype=np.uint8))
    elif len(group) == 1:
        ints = group[0].ints
    else:
        ints = constant(f"{name}/weights", joined([p.ints for p in group], axis=1))
    scales = constant(f"{name}/scales", joined([p.scales for p in group]))  # one per column
    biases = [p.bias for p in group if p.bias is not None]
    if biases and len(biases) != len(group):
        raise Corrupted(f"the products of {x} do not all add a bias")
    bias = [biases[0] if len(group) == 1 else constant(f"{name}/bias", joined(biases))] if biases else []
    quantised = [ints, scales, *([zero, *bias] if zero or bias else [])]  # b_zero_point comes before the bias
    out = group[0].out if len(group) == 1 else f"{PREFIX}{name}/joint"
    nodes: list[Any] = []
    attention = attention_heads(x, producers, initialisers)
    if attention is not None:  # its [CLS] row spans what the others do: multiplied with them
        q, k, v, size, scale = attention
        nodes += [helper.make_node("MultiHeadAttention", [q, k, v, "", mask], [f"{x}/attention"],
                                   name=f"{name}/attention", domain="com.microsoft", num_heads=columns[0] // size,
                                   scale=scale),
                  helper.make_node("DynamicQuantizeMatMul", [f"{x}/attention", *quantised], [out],
                                   name=f"{name}/int8", domain="com.microsoft")]
    else:  # after a layer norm or GELU: the [CLS] row (3-6x the others) quantised on its own
        nodes.append(helper.make_node("Split", [x, sizes], [f"{x}/cls", f"{x}/rest"], axis=1))
        nodes += [helper.make_node("DynamicQuantizeMatMul", [f"{x}/{rows}", *quantised], [f"{out}/{rows}"],
                                   name=f"{name}/int8/{rows}", domain="com.microsoft") for rows in ("cls", "rest")]
        nodes.append(helper.make_node("Concat", [f"{out}/cls", f"{out}/rest"], [out], name=f"{name}/rows", axis=1))
    if len(group) > 1:
        widths = constant(f"{name}/columns", np.array(columns, dtype=np.int64))
        nodes.append(helper.make_node("Split", [out, widths], [p.out for p in group], name=f"{name}/columns", axis=2))
    return nodes


def weight_product(node: Any, producers: dict[str, Any], readers: dict[str, list[Any]],
                   initialisers: dict[str, Any]) -> _Product | None:
    """``node`` as a weight product (its bias folded in when its only reader is ``Add(out, b)``, ``b``
    a 1-D initialiser), or None when it is not one."""
    weight = _int8_weight(node, producers, initialisers)
    if weight is None:
        return None
    found = readers.get(node.output[0], [])
    added = found[0] if len(found) == 1 and found[0].op_type == "Add" and found[0].input[0] == node.output[0] else None
    bias = added.input[1] if added is not None else None
    if bias is None or bias not in initialisers or len(initialisers[bias].dims) != 1:
        added = bias = None
    return _Product(node, node.input[0], *weight, added.output[0] if added is not None else node.output[0], bias, added)


def attention_heads(x: str, producers: dict[str, Any],
                    initialisers: dict[str, Any]) -> tuple[str, str, str, int, float] | None:
    """``(q, k, v, head size, scale)`` when ``x`` is the exported attention over ``q``, ``k``, ``v``:
    heads split (Reshape, Transpose), both sides scaled, the mask added, softmax, NaN made 0, times
    the values, heads joined; else None."""
    from onnx import numpy_helper  # type: ignore[import-not-found,import-untyped,unused-ignore]

    def made_by(name: str, op: str) -> Any:
        found = producers.get(name)
        if found is None or found.op_type != op:
            raise LookupError(name)
        return found

    def constant(name: str) -> float:
        if name not in initialisers or numpy_helper.to_array(initialisers[name]).size != 1:
            raise LookupError(name)
        return float(numpy_helper.to_array(initialisers[name]).reshape(-1)[0])

    def heads_of(name: str) -> tuple[str, int]:  # Transpose(0, 2, 1, 3) of Reshape(x, (b, s, -1, head size))
        transpose = made_by(name, "Transpose")
        if [list(a.ints) for a in transpose.attribute if a.name == "perm"] != [[0, 2, 1, 3]]:
            raise LookupError(name)
        reshape = made_by(transpose.input[0], "Reshape")
        return reshape.input[0], int(constant(made_by(reshape.input[1], "Concat").input[-1]))

    try:
        joined = made_by(made_by(x, "Reshape").input[0], "Transpose")
        weighted = made_by(joined.input[0], "MatMul")
        v, size = heads_of(weighted.input[1])
        where = made_by(weighted.input[0], "Where")
        softmax = made_by(where.input[2], "Softmax")
        if made_by(where.input[0], "IsNaN").input[0] != softmax.output[0] or constant(where.input[1]) != 0.0:
            return None
        scores = made_by(made_by(softmax.input[0], "Add").input[0], "MatMul")
        scaled_q, scaled_k = made_by(scores.input[0], "Mul"), made_by(scores.input[1], "Mul")
        q, q_size = heads_of(scaled_q.input[0])
        k_t = made_by(made_by(made_by(scaled_k.input[0], "Reshape").input[0], "Transpose").input[0], "Reshape")
        k, k_size = heads_of(k_t.input[0])
        scale = constant(scaled_q.input[1]) * constant(scaled_k.input[1])
    except LookupError:
        return None
    return (q, k, v, size, scale) if size == q_size == k_size > 0 else None


def gelu_input(node: Any, producers: dict[str, Any], initialisers: dict[str, Any]) -> str | None:
    """``x`` when ``node`` is the last of the exported exact GELU, ``x * (0.5 * (1 + erf(x / sqrt 2)))``
    (``Mul(x, Mul(0.5, Add(Erf(Div(x, sqrt 2)), 1)))``); else None."""
    from onnx import numpy_helper  # type: ignore[import-not-found,import-untyped,unused-ignore]

    def constant(name: str, value: float) -> bool:
        if name not in initialisers:
            return False
        found = numpy_helper.to_array(initialisers[name])
        return bool(found.size == 1 and abs(float(found.reshape(-1)[0]) - value) < 1e-6)

    def made_by(name: str, op: str) -> Any:
        found = producers.get(name)
        return found if found is not None and found.op_type == op else None

    if node.op_type != "Mul" or len(node.input) != 2:
        return None
    x, half = node.input
    half_node = made_by(half, "Mul")
    if half_node is None or not constant(half_node.input[0], 0.5):
        return None
    plus = made_by(half_node.input[1], "Add")
    erf = made_by(plus.input[0], "Erf") if plus is not None and constant(plus.input[1], 1.0) else None
    div = made_by(erf.input[0], "Div") if erf is not None else None
    if div is None or div.input[0] != x or not constant(div.input[1], 2.0 ** 0.5):
        return None
    return str(x)


def _int8_weight(node: Any, producers: dict[str, Any], initialisers: dict[str, Any]) -> tuple[str, str] | None:
    """``(int8 weights, per-column scales)`` when ``node`` is ``MatMul(x, Mul(Cast(W_int8), s))``
    with ``s`` of shape ``(1, columns)``; else None."""
    if node.op_type != "MatMul":
        return None
    scaled = producers.get(node.input[1])
    if scaled is None or scaled.op_type != "Mul":
        return None
    cast = producers.get(scaled.input[0])
    ints, scales = (cast.input[0] if cast is not None else None), scaled.input[1]
    if cast is None or cast.op_type != "Cast" or ints not in initialisers or scales not in initialisers:
        return None
    int8, columns = 3, initialisers[ints].dims[1]  # onnx.TensorProto.INT8
    if initialisers[ints].data_type != int8 or list(initialisers[scales].dims) != [1, columns]:
        return None
    return ints, scales


def _used(nodes: list[Any], outputs: set[str]) -> list[Any]:
    """``nodes`` without those whose results nothing reads any more (the replaced ``Cast``/``Mul``)."""
    while True:
        read = outputs | {name for node in nodes for name in node.input}
        kept = [node for node in nodes if any(out in read for out in node.output)]
        if len(kept) == len(nodes):
            return kept
        nodes = kept
