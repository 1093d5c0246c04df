"""``RemoteEmbedder``: queries through the queue with a timeout, the local model as the fallback."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import soulpass
from queue_helpers import start_worker, stop_all, wait_for_workers
from soulpass.embed.redis_queue import connect, queue_metrics
from soulpass.embed.remote import RemoteEmbedder
from soulpass.embed.wire import QueueNames, decode_task, encode_task, error_reply, new_task
from soulpass.errors import BackendUnavailable, ConfigError

pytest.importorskip("onnxruntime", reason="the 'embed' extra is not installed")
MODEL = "all-MiniLM-L6-v2/onnx-int8"


def _fake_alive(url: str, names: QueueNames, model: str = MODEL) -> None:
    """A heartbeat with nobody behind it: the client believes a worker is there."""
    client = connect(url)
    client.set(names.heartbeat("phantom"), json.dumps({"model": model}), px=30_000)
    client.sadd(names.workers, "phantom")


def test_query_round_trip_matches_the_local_model(redis_url: str, names: QueueNames, tmp_path: Path,
                                                  minilm: Any) -> None:
    proc = start_worker(redis_url, names, tmp_path / "w.log")
    try:
        wait_for_workers(redis_url, names, 1)
        remote = RemoteEmbedder(redis_url, names=names, local=minilm, query_timeout=20)
        for text in ("permission denied storage mount", "", "ünïcödé ✓ text"):
            got = remote.embed_batch([text])
            assert got.shape == (1, 384) and np.allclose(got, minilm.embed_batch([text]), atol=1e-5)
        assert remote.stats["fallbacks"] == 0 and remote.stats["requests"] == 3
    finally:
        stop_all([proc])


def test_no_worker_falls_back_at_once(redis_url: str, names: QueueNames, minilm: Any) -> None:
    remote = RemoteEmbedder(redis_url, names=names, local=lambda: minilm, query_timeout=30)
    start = time.monotonic()
    got = remote.embed_batch(["a query"])
    assert time.monotonic() - start < 5  # the heartbeat check, not the 30 s timeout
    assert np.allclose(got, minilm.embed_batch(["a query"])) and remote.stats["fallbacks"] == 1
    with pytest.raises(BackendUnavailable, match="no embedding worker"):
        RemoteEmbedder(redis_url, names=names).embed_batch(["no local model either"])


def test_redis_down_falls_back(minilm: Any) -> None:
    remote = RemoteEmbedder("redis://127.0.0.1:1/0", local=minilm, query_timeout=1)
    assert np.allclose(remote.embed_batch(["x"]), minilm.embed_batch(["x"]))
    with pytest.raises(BackendUnavailable, match="unreachable"):
        remote.embed_for_index(["bulk work waits for the workers"])


def test_timeout_takes_the_task_back(redis_url: str, names: QueueNames, minilm: Any) -> None:
    _fake_alive(redis_url, names)
    remote = RemoteEmbedder(redis_url, names=names, local=minilm, query_timeout=0.5)
    start = time.monotonic()
    assert np.allclose(remote.embed_batch(["nobody answers"]), minilm.embed_batch(["nobody answers"]))
    assert 0.5 <= time.monotonic() - start < 5
    assert connect(redis_url).llen(names.queue) == 0  # no orphan task left for a worker to waste time on


def _answer_with(redis_url: str, names: QueueNames, make: Any) -> threading.Thread:
    client = connect(redis_url)

    def serve() -> None:
        got = client.brpop([names.queue], timeout=10)
        if got is not None:
            task = decode_task(got[1])
            client.rpush(task.reply_to, make(task))

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    return thread


def test_vectors_of_another_model_are_refused(redis_url: str, names: QueueNames) -> None:
    _fake_alive(redis_url, names)
    vector = json.dumps([0.1] * 384)
    _answer_with(redis_url, names, lambda t: f'{{"task_id": "{t.task_id}", "vector": {vector}, "model": "nomic"}}')
    remote = RemoteEmbedder(redis_url, names=names, query_timeout=10)
    with pytest.raises(ConfigError, match="nomic"):
        remote.embed_batch(["which model?"])


def test_workers_of_another_model_are_not_used(redis_url: str, names: QueueNames, minilm: Any) -> None:
    _fake_alive(redis_url, names, model="nomic-embed-text")
    remote = RemoteEmbedder(redis_url, names=names, local=minilm, query_timeout=10)
    with pytest.raises(ConfigError, match="nomic-embed-text"):
        remote.embed_remote(["x"], timeout=10)
    assert np.allclose(remote.embed_batch(["x"]), minilm.embed_batch(["x"]))  # queries fall back
    assert connect(redis_url).llen(names.queue) == 0  # nothing was even sent


def test_an_error_reply_is_a_failure_not_a_vector(redis_url: str, names: QueueNames) -> None:
    _fake_alive(redis_url, names)
    _answer_with(redis_url, names, lambda t: error_reply(t.task_id, "GPU on fire", model=MODEL, worker="w"))
    with pytest.raises(BackendUnavailable, match="GPU on fire"):
        RemoteEmbedder(redis_url, names=names).embed_remote(["x"], timeout=10)


def test_duplicate_answers_are_ignored(redis_url: str, names: QueueNames, minilm: Any) -> None:
    """A slow worker that was reaped may answer a task a second time: the first answer is kept."""
    _fake_alive(redis_url, names)
    client = connect(redis_url)
    remote = RemoteEmbedder(redis_url, names=names, task_size=2)

    def serve() -> None:
        for _ in range(2):
            got = client.brpop([names.queue], timeout=10)
            assert got is not None
            task = decode_task(got[1])
            vecs = minilm.embed_batch(list(task.contents))
            from soulpass.embed.wire import encode_reply

            reply = encode_reply(task, vecs, model=MODEL, worker="w")
            client.rpush(task.reply_to, reply, reply)  # twice

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    texts = ["one", "two", "three", "four"]
    assert np.allclose(remote.embed_for_index(texts), minilm.embed_batch(texts), atol=1e-5)
    thread.join(10)
    assert remote.stats["duplicates"] >= 1


def test_expired_queries_are_dropped_by_the_worker(redis_url: str, names: QueueNames, tmp_path: Path) -> None:
    client = connect(redis_url)
    stale = new_task(["nobody waits"], names.new_reply_key(), single=True, expires_at=time.time() - 1)
    fresh = new_task(["someone waits"], names.new_reply_key(), single=True, expires_at=time.time() + 60)
    client.lpush(names.queue, encode_task(stale), encode_task(fresh))
    proc = start_worker(redis_url, names, tmp_path / "w.log", worker_id="w-exp")
    try:
        assert client.blpop([fresh.reply_to], timeout=60) is not None
        time.sleep(0.3)
        assert client.llen(stale.reply_to) == 0
        worker = next(w for w in queue_metrics(client, names).workers if w.worker_id == "w-exp")
        assert worker.expired == 1 and worker.tasks == 1
    finally:
        stop_all([proc])


def test_search_answers_from_full_text_when_redis_is_down_and_there_is_no_local_model(tmp_path: Path) -> None:
    remote = RemoteEmbedder("redis://127.0.0.1:1/0", query_timeout=0.5, index_timeout=0.5)  # nothing listens
    acct = soulpass.open(tmp_path, embedder=remote).create_account("ann")
    sb = acct.create_sandbox("chat")
    sb.add_turn("user", "the harbour is full of sailing boats this morning")
    sb.add_turn("user", "I had pasta for lunch")
    sb.archive()
    hits = acct.search("sailing boats")
    assert hits and "sailing boats" in hits[0].text and hits[0].parts.get("dense") in (None, 0.0)
    assert hits.incomplete and hits.dense_error and "full-text results only" in (hits.note or "")


def test_a_sandbox_search_that_reorders_a_superseded_fact_still_says_it_is_full_text_only(tmp_path: Path) -> None:
    """Moving a fact the session supersedes below its superseder rebuilds the results: the reason
    the query could not be embedded goes with them."""
    remote = RemoteEmbedder("redis://127.0.0.1:1/0", query_timeout=0.5, index_timeout=0.5)  # nothing listens
    acct = soulpass.open(tmp_path, embedder=remote).create_account("ann")
    sb = acct.create_sandbox("s1")
    sb.add_fact("Ann", "lives in", "Paris", confidence=0.9)
    sb.archive()
    sb = acct.create_sandbox("s2")
    lyon = sb.add_fact("Ann", "lives in", "Lyon", confidence=0.9)
    hits = sb.search("Ann lives in Paris", k=5)
    assert hits[0].id == lyon and hits[1].parts["superseded"] == 1.0  # reordered
    assert hits.incomplete and hits.dense_error and "full-text results only" in (hits.note or "")
