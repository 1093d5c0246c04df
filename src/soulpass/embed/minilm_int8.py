"""MiniLM's query graph: its 36 weight products in int8 arithmetic, a query's vector in ~60% of the time.

The model stores each weight matrix as int8 with one scale per output column (``Cast`` then ``Mul``
before the ``MatMul``); ONNX Runtime turns them back into float32 and multiplies in float32, which
is what indexing uses (``MiniLM.embed_batch``). For a query, each of those products becomes ONNX
Runtime's ``DynamicQuantizeMatMul`` over the *same* int8 weights and scales: the activations are
quantised to uint8 on the fly and multiplied in integers. One scale per product would be set by the
[CLS] row, whose values span 3-6x the other tokens' (20-40 against 4-10 after a layer norm), so the
[CLS] row and the other rows are quantised and multiplied apart and joined again (``Slice``, two
products, ``Concat``). The rest of the graph (attention products, layer norms, GELU) is unchanged.

Measured on LoCoMo's questions (2 cores, one intra-op thread, ad hoc and ``benchmarks/embed_threads.py``):
2.2-2.3 ms a query against 3.4-3.8 ms in float32 (1.8 ms with one scale per product); cosine to the
float32 vector 0.9989 on average, 0.996 at worst (0.995 / 0.977 with one scale per product, which
cost recall: LoCoMo's in-sample recall@10 fell for 16 questions and rose for 4). With the split, over
all of LoCoMo and BEAM-500K, recall@10 is the float32 one within the noise (README, retrieval).
The indexed vectors are never made here: a query is compared with the float32 vectors of the texts,
so nothing stored depends on this graph.

The rewrite (~0.17 s: importing onnx, parsing and writing 23 MB) is done once per machine: its result
is kept in ``~/.cache/soulpass/models``, named by the model's sha256
and its own, and read back only when its bytes still have that sha256; a cache that cannot be
written (read-only home, full disk) costs the rewrite in each process, nothing else. Writing one
removes the files of earlier rewrites and models (23 MB each).

Only where integers are multiplied exactly: x86 CPUs before VNNI multiply uint8 by int8 pairwise
into int16 (``vpmaddubsw``), which saturates for weights using all 8 bits (ONNX Runtime's and
OpenVINO's quantisation notes), so :func:`exact_int8_products` asks for AVX512-VNNI; elsewhere
``MiniLM`` embeds queries in float32 as before.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib
import logging
import os
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

from soulpass.embed.base import missing_extra
from soulpass.errors import Corrupted

__all__ = ["WEIGHT_PRODUCTS", "cache_dir", "exact_int8_products", "query_model", "rewrite"]

log = logging.getLogger(__name__)

#: the rewrite's version, in the cached file's name: bump it when ``rewrite`` changes what it writes
REWRITE = 2
PREFIX = "soulpass-int8-query/"  # the names of the constants the rewrite adds

#: all-MiniLM-L6-v2's weight products: 6 layers x (query, key, value, output, two feed-forward)
WEIGHT_PRODUCTS = 36


def exact_int8_products() -> bool:
    """Whether this CPU multiplies uint8 by int8 without saturating (AVX512-VNNI: ``vpdpbusd``),
    as numpy's own CPU dispatch detected it."""
    try:  # what numpy.show_runtime() reads
        features = importlib.import_module("numpy._core._multiarray_umath").__cpu_features__
    except (ImportError, AttributeError):  # another numpy layout: say no, and embed queries in float32
        return False
    return bool(features.get("AVX512VNNI"))


def query_model(model_path: Path, model_sha256: str) -> bytes:
    """The serialised query graph of ``model_path`` (whose sha256 the caller checked): from the
    cache where it holds a sound copy, else rewritten and kept there."""
    folder = cache_dir()
    prefix = f"minilm-int8-query-v{REWRITE}-{model_sha256[:16]}-"
    for kept in sorted(folder.glob(f"{prefix}*.onnx")) if folder.is_dir() else []:
        try:
            data = kept.read_bytes()
        except OSError:
            continue
        if hashlib.sha256(data).hexdigest()[:16] == kept.name[len(prefix):-len(".onnx")]:
            return data
        log.warning("ignoring %s: its bytes do not have the sha256 its name says", kept)
    data = rewrite(model_path)
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
        log.info("query graph not cached (%s): rewritten again in the next process", e)
        return data
    for stale in folder.glob("minilm-int8-query-*.onnx"):  # an earlier rewrite's, or an earlier model's
        if not stale.name.startswith(prefix):
            with contextlib.suppress(OSError):
                stale.unlink()
    return data


def cache_dir() -> Path:
    """Where the query graph is kept: ``~/.cache/soulpass/models`` (beside ``postgres``, the local
    folders of PostgreSQL accounts)."""
    return Path("~/.cache/soulpass/models").expanduser()


def rewrite(model_path: Path) -> bytes:
    """The serialised query graph of ``model_path`` (see the module's notes); ``Corrupted`` when the
    file does not have the 36 int8 weight products this rewrite expects."""
    try:
        import onnx  # type: ignore[import-not-found,import-untyped,unused-ignore]
        from onnx import helper, numpy_helper  # type: ignore[import-not-found,import-untyped,unused-ignore]
    except ImportError as e:
        raise missing_extra("The embedded MiniLM model's query graph", e) from e
    model = onnx.load(str(model_path))
    graph = model.graph
    initialisers = {i.name: i for i in graph.initializer}
    producers = {out: node for node in graph.node for out in node.output}
    first, second, end, axis = (f"{PREFIX}{name}" for name in ("first", "second", "end", "axis"))
    graph.initializer.extend(numpy_helper.from_array(np.array([value], dtype=np.int64), name)
                             for name, value in ((first, 0), (second, 1), (end, 2**62), (axis, 1)))
    nodes: list[Any] = []
    split: set[str] = set()  # inputs already cut into their [CLS] row and the rest
    replaced = 0
    for node in graph.node:
        weight = _int8_weight(node, producers, initialisers)
        if weight is None:
            nodes.append(node)
            continue
        ints, scales = weight
        x, out = node.input[0], node.output[0]
        if f"{scales}/per_column" not in initialisers:  # once, should two products share their scales
            column_scales = numpy_helper.from_array(numpy_helper.to_array(initialisers[scales]).reshape(-1),
                                                    f"{scales}/per_column")
            graph.initializer.append(column_scales)
            initialisers[column_scales.name] = column_scales
        if x not in split:  # (batch, tokens, features): the [CLS] row, then the others
            split.add(x)
            nodes += [helper.make_node("Slice", [x, first, second, axis], [f"{x}/cls"]),
                      helper.make_node("Slice", [x, second, end, axis], [f"{x}/rest"])]
        nodes += [helper.make_node("DynamicQuantizeMatMul", [f"{x}/{rows}", ints, f"{scales}/per_column"],
                                   [f"{out}/{rows}"], name=f"{node.name}/int8/{rows}", domain="com.microsoft")
                  for rows in ("cls", "rest")]
        nodes.append(helper.make_node("Concat", [f"{out}/cls", f"{out}/rest"], [out], name=f"{node.name}/rows", axis=1))
        replaced += 1
    if replaced != WEIGHT_PRODUCTS:
        raise Corrupted(f"model file {model_path} has {replaced} int8 weight products, expected {WEIGHT_PRODUCTS}",
                        path=str(model_path))
    del graph.node[:]
    graph.node.extend(_used(nodes, {o.name for o in graph.output}))
    model.opset_import.append(helper.make_opsetid("com.microsoft", 1))
    serialised: bytes = model.SerializeToString()
    return serialised


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
