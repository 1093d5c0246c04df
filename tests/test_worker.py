"""The ``queue:gpu_heavy`` protocol with real Redis and real ``soulpass worker`` processes."""

from __future__ import annotations

import json
import signal
import time
import uuid
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from click.testing import CliRunner

from queue_helpers import start_worker, stop_all, wait_for_workers
from soulpass.cli.main import cli
from soulpass.embed.redis_queue import connect, prometheus_text, queue_metrics, reap
from soulpass.embed.wire import QueueNames, decode_reply, decode_task, encode_reply, encode_task, new_task
from soulpass.errors import InvalidInput

pytest.importorskip("onnxruntime", reason="the 'embed' extra is not installed (workers run MiniLM)")


# --- the wire format, without Redis ---------------------------------------------------------------


def test_seed_single_form_round_trips_exactly() -> None:
    task = new_task(["permission denied storage mount"], "temp:req:abc", single=True)
    body = json.loads(encode_task(task))
    assert body == {"task_id": task.task_id, "type": "embed", "content": "permission denied storage mount",
                    "reply_to": "temp:req:abc"}
    assert decode_task(json.dumps(body)) == task
    vec = np.full((1, 4), 0.5, dtype=np.float32)
    reply = json.loads(encode_reply(task, vec, model="m", worker="w"))
    assert reply["task_id"] == task.task_id and reply["vector"] == [0.5] * 4 and reply["model"] == "m"


def test_batch_form_carries_float32_rows_in_order() -> None:
    task = new_task(["a", "b", "c"], "temp:req:x", model="m")
    assert decode_task(encode_task(task)).contents == ("a", "b", "c")
    rows = np.arange(12, dtype=np.float32).reshape(3, 4) / 7
    got = decode_reply(encode_reply(task, rows, model="m", worker="w"), expected_rows=3)
    assert got.vectors is not None and np.array_equal(got.vectors, rows) and got.model == "m"
    with pytest.raises(InvalidInput, match="expected 2"):
        decode_reply(encode_reply(task, rows, model="m", worker="w"), expected_rows=2)


@pytest.mark.parametrize(("raw", "message"), [
    ("not json", "not JSON"),
    ("[1]", "JSON object"),
    ('{"type": "embed", "content": "x", "reply_to": "r"}', "task_id"),
    ('{"task_id": "t", "type": "embed", "content": "x"}', "reply_to"),
    ('{"task_id": "t", "type": "embed", "content": 5, "reply_to": "r"}', "content"),
    ('{"task_id": "t", "type": "embed_batch", "contents": ["a", 1], "reply_to": "r"}', "contents"),
    ('{"task_id": "t", "type": "summarise", "content": "x", "reply_to": "r"}', "unknown task type"),
])
def test_bad_tasks_are_named(raw: str, message: str) -> None:
    with pytest.raises(InvalidInput, match=message):
        decode_task(raw)


def test_queue_names_default_to_the_seed_and_refuse_bad_keys() -> None:
    names = QueueNames()
    assert names.queue == "queue:gpu_heavy" and names.new_reply_key().startswith("temp:req:")
    assert names.processing("w1") == "queue:gpu_heavy:processing:w1"
    with pytest.raises(InvalidInput, match="queue"):
        QueueNames("has space")


# --- real Redis, real workers -------------------------------------------------------------------


def _raw_round_trip(url: str, names: QueueNames, body: dict[str, Any], timeout: float = 30) -> dict[str, Any]:
    client = connect(url)
    client.lpush(names.queue, json.dumps(body))
    got = client.blpop([body["reply_to"]], timeout=timeout)
    assert got is not None, "no reply"
    reply: dict[str, Any] = json.loads(got[1])
    return reply


def test_worker_answers_the_seed_payload(redis_url: str, names: QueueNames, tmp_path: Path, minilm: Any) -> None:
    proc = start_worker(redis_url, names, tmp_path / "w.log")
    try:
        wait_for_workers(redis_url, names, 1)
        req = str(uuid.uuid4())
        body = {"task_id": req, "type": "embed", "content": "permission denied storage mount",
                "reply_to": f"{names.reply_prefix}{req}"}
        reply = _raw_round_trip(redis_url, names, body)
        assert reply["task_id"] == req and reply["model"] == minilm.model_id
        assert np.allclose(reply["vector"], minilm.embed_batch([body["content"]])[0], atol=1e-5)
        bad = _raw_round_trip(redis_url, names, {"task_id": "t2", "type": "embed", "content": 3,
                                                 "reply_to": f"{names.reply_prefix}t2"})
        assert bad["task_id"] == "t2" and "content" in bad["error"]
        other = _raw_round_trip(redis_url, names, {**body, "task_id": "t3", "model": "nomic-embed-text",
                                                   "reply_to": f"{names.reply_prefix}t3"})
        assert "nomic-embed-text" in other["error"] and "vector" not in other
        assert connect(redis_url).ttl(f"{names.reply_prefix}t3") == -2  # popped: the list is gone
    finally:
        stop_all([proc])


def test_sigterm_finishes_the_batch_and_leaves(redis_url: str, names: QueueNames, tmp_path: Path) -> None:
    client = connect(redis_url)
    proc = start_worker(redis_url, names, tmp_path / "w.log", worker_id="w-term", batch=256)
    try:
        wait_for_workers(redis_url, names, 1)
        reply_to = names.new_reply_key()
        tasks = [new_task([f"text {i} {j}" for j in range(64)], reply_to) for i in range(8)]
        client.lpush(names.queue, *[encode_task(t) for t in tasks])
        deadline = time.monotonic() + 30
        while client.llen(names.processing("w-term")) == 0 and time.monotonic() < deadline:
            time.sleep(0.01)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(60) == 0
        answered = {decode_reply(r).task_id for r in client.lrange(reply_to, 0, -1)}
        left = client.llen(names.queue)
        assert answered, "the batch in hand was not answered before leaving"
        assert len(answered) + left == len(tasks)  # every task answered or still queued: none lost
        assert client.llen(names.processing("w-term")) == 0
        assert b"w-term" not in client.smembers(names.workers)
    finally:
        stop_all([proc])


def test_reaper_requeues_a_dead_workers_tasks(redis_url: str, names: QueueNames) -> None:
    client = connect(redis_url)
    raw = encode_task(new_task(["x"], names.new_reply_key()))
    client.sadd(names.workers, "ghost")
    client.lpush(names.processing("ghost"), raw)
    client.set(names.heartbeat("ghost"), "{}", px=200)
    assert reap(client, names) == 0  # heartbeat alive: left alone
    time.sleep(0.3)
    assert reap(client, names) == 1
    assert client.lrange(names.queue, 0, -1) == [raw.encode()]
    assert client.llen(names.processing("ghost")) == 0 and not client.sismember(names.workers, "ghost")
    assert queue_metrics(client, names).requeued == 1


def test_a_task_that_keeps_killing_workers_is_answered_with_an_error(redis_url: str, names: QueueNames) -> None:
    client = connect(redis_url)
    task = new_task(["poison"], names.new_reply_key())
    raw = encode_task(task)
    for attempt in range(1, 6):
        client.lrem(names.queue, 0, raw)  # a worker takes it ...
        client.sadd(names.workers, f"ghost{attempt}")
        client.lpush(names.processing(f"ghost{attempt}"), raw)
        reap(client, names, max_deliveries=5)  # ... and dies without a heartbeat
        assert client.llen(names.queue) == (1 if attempt < 5 else 0)
    reply = decode_reply(client.lpop(task.reply_to))
    assert reply.task_id == task.task_id and "stopped answering 5 times" in (reply.error or "")
    assert queue_metrics(client, names).poisoned == 1 and queue_metrics(client, names).requeued == 4


def test_status_and_metrics_commands(redis_url: str, names: QueueNames, tmp_path: Path) -> None:
    proc = start_worker(redis_url, names, tmp_path / "w.log", worker_id="w-status")
    try:
        wait_for_workers(redis_url, names, 1)
        _raw_round_trip(redis_url, names, {"task_id": "s1", "type": "embed", "content": "hello",
                                           "reply_to": f"{names.reply_prefix}s1"})
        time.sleep(0.2)
        runner = CliRunner()
        args = ["--redis", redis_url, "--queue", names.queue]
        out = runner.invoke(cli, ["worker", "status", *args, "--json"])
        assert out.exit_code == 0, out.output
        status = json.loads(out.output)
        assert status["workers_alive"] == 1 and status["depth"] == 0
        worker = status["workers"][0]
        assert worker["worker_id"] == "w-status" and worker["texts"] >= 1 and worker["model"].startswith("all-MiniLM")
        text = runner.invoke(cli, ["worker", "metrics", *args]).output
        assert "# TYPE soulpass_embed_queue_depth gauge" in text
        assert f'soulpass_embed_texts_total{{queue="{names.queue}",worker="w-status"' in text
        assert runner.invoke(cli, ["worker", "status", *args]).exit_code == 0
        down = runner.invoke(cli, ["worker", "status", "--redis", "redis://127.0.0.1:1/0"])
        assert down.exit_code == 7 and "unreachable" in down.output
    finally:
        stop_all([proc])


def test_prometheus_text_escapes_labels() -> None:
    from soulpass.embed.redis_queue import QueueMetrics, WorkerInfo

    m = QueueMetrics(queue='q"1', depth=3, in_flight=1, requeued=0, workers=(WorkerInfo(
        worker_id="w\n", alive=True, model="m", host=None, pid=None, in_flight=1, tasks=2, texts=5, batches=1,
        errors=0, expired=0, busy_seconds=0.25, texts_per_second=1.5),))
    text = prometheus_text(m)
    assert 'soulpass_embed_queue_depth{queue="q\\"1"} 3' in text
    assert 'worker="w\\n"' in text and "soulpass_embed_busy_seconds_total" in text and " 0.25" in text


@pytest.mark.slow
def test_several_workers_share_the_queue(redis_url: str, names: QueueNames, tmp_path: Path, minilm: Any) -> None:
    from soulpass.embed.remote import RemoteEmbedder

    procs = [start_worker(redis_url, names, tmp_path / f"w{i}.log", worker_id=f"w{i}", batch=32) for i in range(2)]
    try:
        wait_for_workers(redis_url, names, 2)
        remote = RemoteEmbedder(redis_url, names=names, task_size=16, index_timeout=60)
        texts = [f"note {i}: the heron stood in the shallow water" for i in range(600)]
        got = remote.embed_for_index(texts)
        assert np.allclose(got, minilm.embed_batch(texts), atol=1e-5)
        stats = queue_metrics(connect(redis_url), names)
        by_worker = {w.worker_id: w.texts for w in stats.workers}
        assert sum(by_worker.values()) == 600 and all(by_worker.get(f"w{i}", 0) > 0 for i in range(2)), by_worker
    finally:
        stop_all(procs)


def test_worker_exits_cleanly_without_redis(tmp_path: Path) -> None:
    """No Redis: the worker waits it out (retrying) and still stops on SIGTERM."""
    proc = start_worker("redis://127.0.0.1:1/0", QueueNames(), tmp_path / "w.log")
    try:
        time.sleep(3)
        assert proc.poll() is None
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(30) == 0
        assert "Redis unavailable" in (tmp_path / "w.log").read_text()
    finally:
        stop_all([proc])


def test_device_choice() -> None:
    import onnxruntime as ort

    from soulpass.errors import BackendUnavailable
    from soulpass.worker.serve import providers_for

    assert providers_for("cpu") == ("CPUExecutionProvider",)
    if "CUDAExecutionProvider" in ort.get_available_providers():
        assert providers_for("auto")[0] == "CUDAExecutionProvider"
        return
    assert providers_for("auto") == ("CPUExecutionProvider",)
    with pytest.raises(BackendUnavailable, match="onnxruntime-gpu"):
        providers_for("cuda")
    out = CliRunner().invoke(cli, ["worker", "--device", "cuda", "--redis", "redis://127.0.0.1:1/0"])
    assert out.exit_code == 7 and "onnxruntime-gpu" in out.output
