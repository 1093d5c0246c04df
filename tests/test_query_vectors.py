"""A search's query vector: embedded on another thread while the full-text search runs, kept for a
query asked again, safe across a fork; and the cached passage ids its exact cosines read."""

from __future__ import annotations

import multiprocessing
import random
import sqlite3
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import soulpass
from soulpass.embed.base import Vectors
from soulpass.engine import Account, Committed
from soulpass.errors import BackendUnavailable
from soulpass.index import passages
from soulpass.index.query_vectors import QueryVectors


class Counting:
    """A tiny embedder for the logic here (the real model is in the end-to-end test below)."""

    model_id, dim = "counting", 4

    def __init__(self, fail: bool = False) -> None:
        self.calls: list[str] = []
        self.fail = fail

    def embed_batch(self, texts: Sequence[str]) -> Vectors:
        self.calls.extend(texts)
        if self.fail:
            raise BackendUnavailable("no worker answered")
        return np.array([[len(t), 1.0, 0.0, 0.0] for t in texts], dtype=np.float32)


def test_a_query_asked_again_is_not_embedded_again_and_only_the_last_ones_are_kept() -> None:
    embedder = Counting()
    vectors = QueryVectors(embedder, size=2)
    first, _ = vectors.start("alpha")()
    again, error = vectors.start("alpha")()
    assert error is None and np.array_equal(first, again) and embedder.calls == ["alpha"]
    vectors.start("beta")()
    vectors.start("alpha")()  # the most recent again: "beta" is now the oldest
    vectors.start("gamma")()  # evicts "beta"
    vectors.start("alpha")()
    vectors.start("beta")()
    assert embedder.calls == ["alpha", "beta", "gamma", "beta"]


def test_a_query_started_twice_while_it_is_embedded_is_embedded_once() -> None:
    release = threading.Event()

    class Slow(Counting):
        def embed_batch(self, texts: Sequence[str]) -> Vectors:
            assert release.wait(10)
            return super().embed_batch(texts)

    embedder = Slow()
    vectors = QueryVectors(embedder, size=4)
    first, second = vectors.start("alpha"), vectors.start("alpha")  # the second while the first runs
    release.set()
    (a, error_a), (b, error_b) = first(), second()
    assert error_a is None and error_b is None and np.array_equal(a, b)
    assert embedder.calls == ["alpha"] and not vectors._running
    failing = QueryVectors(Counting(fail=True), size=4)
    assert failing.start("beta")() == (None, "no worker answered")
    assert not failing._running  # a failure is not waited for again: the next start tries anew


def test_an_embedder_that_cannot_answer_gives_the_reason_not_an_exception() -> None:
    embedder = Counting(fail=True)
    vector, error = QueryVectors(embedder, size=4).start("alpha")()
    assert vector is None and error == "no worker answered"
    QueryVectors(embedder, size=4).start("alpha")()
    assert embedder.calls == ["alpha", "alpha"]  # a failure is not kept


def _embed_in_forked_child(queue: Any) -> None:
    vector, error = QueryVectors(Counting(), size=4).start("in the child")()
    queue.put((vector.tolist(), error))


def test_a_forked_child_embeds_on_threads_of_its_own() -> None:
    # The parent's embedding thread exists (and sits idle) when it forks; the child inherits the
    # executor but not its thread, and would wait forever for it.
    QueryVectors(Counting(), size=4).start("in the parent")()
    ctx = multiprocessing.get_context("fork")
    queue = ctx.Queue()
    child = ctx.Process(target=_embed_in_forked_child, args=(queue,))
    child.start()
    child.join(30)
    if child.is_alive():
        child.kill()
        pytest.fail("the forked child waited for its parent's embedding thread")
    assert queue.get(timeout=5) == ([12.0, 1.0, 0.0, 0.0], None)


def test_passage_ids_follow_writes_by_this_and_other_connections(tmp_path: Path) -> None:
    path = tmp_path / "state.sqlite"
    reader, writer = sqlite3.connect(path), sqlite3.connect(path)
    reader.execute("PRAGMA journal_mode=WAL")
    passages.create_table(reader)
    reader.commit()
    assert passages.passage_ids(reader, ["a", "b"]) == {}
    with writer:
        passages.record_passages(writer, {"a": 2})
    assert passages.passage_ids(reader, ["a", "b"]) == {"a": ("a#0", "a#1")}
    with reader:  # this connection's own write
        passages.record_passages(reader, {"a": 0, "b": 1})
    assert passages.passage_ids(reader, ["b", "a"]) == {"b": ("b#0",)}


def test_best_in_array_is_the_best_cosine_per_record() -> None:
    rng = random.Random(7)
    for _ in range(200):
        ids = [f"r{n}" for n in range(rng.randint(0, 8))]
        of = {rid: tuple(passages.passage_id(rid, n) for n in range(rng.randint(1, 3)))
              for rid in ids if rng.random() < 0.6}
        vector_ids = [*ids, *(p for ps in of.values() for p in ps)]
        scored = {vid: rng.uniform(-1, 1) for vid in vector_ids if rng.random() < 0.8}  # some have no vector
        # From an array in the order of the vector ids, -2 where a vector is missing.
        in_order = np.array([scored.get(vid, -2.0) for vid in vector_ids], dtype=np.float32)
        as_floats = [(vid, float(np.float32(s))) for vid, s in scored.items()]
        assert passages.best_in_array(ids, of, in_order) == passages.best_per_record(as_floats)


@pytest.fixture
def acct(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Account:
    pytest.importorskip("onnxruntime", reason="the 'embed' extra is not installed")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    account = soulpass.open(tmp_path).account("ann", create=True)
    sb = account.create_sandbox("chat")
    sb.add_turn("user", "I adopted a golden retriever puppy named Biscuit last weekend")
    sb.add_turn("eva", "Congratulations on Biscuit! Puppies need lots of sleep.")
    assert isinstance(sb.archive(), Committed)
    return account


def test_the_query_is_embedded_while_the_full_text_search_runs(acct: Account,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    index = acct.index()
    query_vectors = index._search._query_vectors
    assert query_vectors is not None
    model = query_vectors.embedder
    searching = threading.Event()
    full_text = index.catalog.fts_search

    def fts_search(*args: Any, **kwargs: Any) -> Any:
        searching.set()
        return full_text(*args, **kwargs)

    overlapped: list[bool] = []

    class WaitsForTheFullTextSearch:
        model_id, dim = model.model_id, model.dim

        def embed_batch(self, texts: Sequence[str]) -> Vectors:
            overlapped.append(searching.wait(10))  # run one after the other, this waits in vain
            return model.embed_batch(texts)

    monkeypatch.setattr(index.catalog, "fts_search", fts_search)
    monkeypatch.setattr(query_vectors, "embedder", WaitsForTheFullTextSearch())
    hits = acct.search("a young dog", k=1)
    assert overlapped == [True]
    assert "golden retriever" in hits[0].text and "dense" in hits[0].parts
