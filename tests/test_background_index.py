"""Background indexing: writes never wait for embedding, the backlog is durable, nothing is lost.

The slow tests are the issue's acceptance: SIGKILL a real worker in the middle of 10,000 texts,
and stop a (private) Redis in the middle of writing.
"""

from __future__ import annotations

import json
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

import soulpass
from queue_helpers import OwnRedis, start_worker, stop_all, wait_for_workers
from soulpass.cli.main import cli
from soulpass.embed.base import Vectors
from soulpass.embed.redis_queue import connect, queue_metrics
from soulpass.embed.remote import RemoteEmbedder
from soulpass.embed.wire import QueueNames
from soulpass.ids import new_temp_id
from soulpass.index.catalog import catalog_path
from soulpass.index.recipe import embed_text
from soulpass.records import TurnUser

pytest.importorskip("onnxruntime", reason="the 'embed' extra is not installed")
T0 = datetime(2026, 1, 1, tzinfo=UTC)


class Gated:
    """The real model, but the indexer's thread waits at a gate (queries pass): lets a test look at
    the backlog before it drains. A test of our own logic, around the real embedder."""

    def __init__(self, inner: Any) -> None:
        self.inner, self.gate = inner, threading.Event()
        self.model_id, self.dim = inner.model_id, inner.dim

    def embed_batch(self, texts: Sequence[str]) -> Vectors:
        if threading.current_thread().name.startswith("soulpass-indexer"):
            self.gate.wait(60)
        vectors: Vectors = self.inner.embed_batch(texts)
        return vectors


def _turns(n: int, words: str = "about herons and tides", start: int = 0) -> list[TurnUser]:
    return [TurnUser(id=new_temp_id("turn_user"), text_excerpt=f"note {i} {words}",
                     created_at=T0 + timedelta(seconds=i)) for i in range(start, start + n)]


def _backlog_rows(home: Path, account: str) -> int:
    """Read the durable backlog straight from the catalog file, as another process would."""
    db = sqlite3.connect(catalog_path(soulpass.open(home, embedder="none").account(account).store))
    try:
        return int(db.execute("SELECT count(*) FROM embed_backlog").fetchone()[0])
    finally:
        db.close()


def _embedded_ids(acct: soulpass.Account) -> list[str]:
    idx = acct.index()
    assert idx.backlog is not None
    return [rid for (rid,) in idx.backlog._state.execute("SELECT id FROM embedded ORDER BY id")]


def test_archive_does_not_wait_and_search_says_incomplete(tmp_path: Path, minilm: Any) -> None:
    gated = Gated(minilm)
    sp = soulpass.open(tmp_path, embedder=gated, indexing="background")
    acct = sp.create_account("ann")
    sb = acct.create_sandbox("chat")
    for i in range(40):
        sb.add_turn("user", f"message {i}: my cat Miso loves tuna" if i == 7 else f"message {i} about the weather")
    try:
        acct.index()  # the indexer is running (and held at the gate)
        start = time.monotonic()
        assert sb.archive().version == 1  # type: ignore[union-attr]
        assert time.monotonic() - start < 5
        hits = acct.search("Miso tuna", k=3)
        assert hits[0].text.endswith("my cat Miso loves tuna")  # found by full text while not embedded
        assert hits.incomplete and hits.pending_embeddings == 40 and "not embedded yet" in (hits.note or "")
        assert acct.index().status().pending_embeddings == 40 and acct.index().status().vectors == 0
        gated.gate.set()
        indexer = acct.indexer()
        assert indexer is not None and indexer.wait_idle(120)
        done = acct.search("a pet that likes fish", k=3)
        assert not done.incomplete and done.pending_embeddings == 0
        assert acct.index().status().vectors == 40
        assert "dense" in done[0].parts  # the dense half sees the records now
    finally:
        gated.gate.set()
        acct.close()


def test_inline_indexing_is_unchanged(tmp_path: Path, minilm: Any) -> None:
    acct = soulpass.open(tmp_path, embedder=minilm).create_account("ann")
    acct.bulk_append(_turns(30))
    hits = acct.search("herons", k=5)
    assert len(hits) == 5 and not hits.incomplete
    assert acct.index().status().vectors == 30 and acct.indexer() is None
    acct.close()


def test_pending_counts_rows_the_backlog_has_not_looked_at(tmp_path: Path, minilm: Any) -> None:
    acct = soulpass.open(tmp_path, embedder=minilm).create_account("ann")
    acct.bulk_append(_turns(20))
    idx = acct.index()
    assert idx.backlog is not None and idx.backlog.pending() == 0  # up to date: no scan of the rows
    acct.bulk_append(_turns(5, start=20))
    idx.catalog.catch_up(acct.store)  # in the catalog, not yet looked at by the backlog
    assert idx.backlog.pending() == 5
    plan = idx.backlog._cat.execute(
        "EXPLAIN QUERY PLAN SELECT count(*) FROM catalog INDEXED BY catalog_version WHERE version > 1").fetchall()
    assert any("catalog_version" in str(step) for step in plan)
    idx.catch_up()
    assert idx.backlog.pending() == 0 and idx.status().vectors == 25
    acct.bulk_append(_turns(3, start=25))
    idx.catalog.catch_up(acct.store)  # another connection commits
    assert idx.backlog.pending() == 3
    idx.backlog._cat.set_trace_callback(None)
    acct.close()


def test_status_shows_the_backlog_and_drain_empties_it(tmp_path: Path) -> None:
    home = tmp_path / "home"
    acct = soulpass.open(home, embedder="none").create_account("ann")
    acct.bulk_append(_turns(25))
    runner = CliRunner()
    env = {"SOULPASS_ACCOUNT": "", "SOULPASS_HOME": "", "SOULPASS_REDIS_URL": ""}

    def run(*args: str) -> str:
        out = runner.invoke(cli, ["--home", str(home), *args], env=env)
        assert out.exit_code == 0, out.output
        return out.output

    assert json.loads(run("index", "status", "-a", "ann", "--json"))["pending_embeddings"] == 25
    assert "embedding backlog" in run("index", "status", "-a", "ann")
    assert _backlog_rows(home, "ann") == 25  # durable, in the catalog
    assert "embedded 25 record(s)" in run("index", "drain", "-a", "ann")
    status = json.loads(run("index", "status", "-a", "ann", "--json"))
    assert status["pending_embeddings"] == 0 and status["vectors"] == 25


def test_drain_with_workers_unreachable_keeps_the_backlog(tmp_path: Path) -> None:
    home = tmp_path / "home"
    soulpass.open(home, embedder="none").create_account("ann").bulk_append(_turns(5))
    out = CliRunner().invoke(cli, ["--home", str(home), "index", "drain", "-a", "ann", "--redis",
                                   "redis://127.0.0.1:1/0", "--timeout", "1"], env={"SOULPASS_ACCOUNT": ""})
    assert out.exit_code == 7 and "unreachable" in out.output
    assert _backlog_rows(home, "ann") == 5


def test_sandbox_search_reports_the_backlog_too(tmp_path: Path, minilm: Any) -> None:
    gated = Gated(minilm)
    acct = soulpass.open(tmp_path, embedder=gated, indexing="background").create_account("ann")
    try:
        acct.bulk_append(_turns(10))
        sb = acct.create_sandbox("s")
        sb.add_turn("user", "a heron in the sandbox")
        hits = sb.search("heron", k=20)
        assert len(hits) == 11 and hits.incomplete
    finally:
        gated.gate.set()
        acct.close()


_CHILD = """
import sys, soulpass
from soulpass.embed.minilm import MiniLM
acct = soulpass.open(sys.argv[1], embedder=MiniLM(threads=1), indexing="background").account("ann")
acct.index()
print("started", flush=True)
import time
time.sleep(600)
"""


@pytest.mark.slow
def test_indexer_resumes_after_sigkill(tmp_path: Path, minilm: Any) -> None:
    home = tmp_path / "home"
    acct = soulpass.open(home, embedder="none").create_account("ann")
    acct.bulk_append(_turns(3000))
    child = subprocess.Popen([sys.executable, "-c", _CHILD, str(home)], stdout=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 120
        left = 3000
        while time.monotonic() < deadline:
            try:
                left = _backlog_rows(home, "ann")
            except sqlite3.OperationalError:  # the child is creating the tables
                left = 3000
            if 0 < left < 2500:
                break
            time.sleep(0.05)
        assert 0 < left < 2500, f"the child did not get going (backlog {left})"
        child.send_signal(signal.SIGKILL)
        child.wait(10)
    finally:
        stop_all([child])  # type: ignore[list-item]
        if child.stdout is not None:
            child.stdout.close()
    after = soulpass.open(home, embedder=minilm, indexing="background").account("ann")
    try:
        indexer = (after.index(), after.indexer())[1]
        assert indexer is not None and indexer.wait_idle(300)
        status = after.index().status()
        ids = _embedded_ids(after)
        assert status.pending_embeddings == 0 and status.vectors == 3000 and len(ids) == len(set(ids)) == 3000
        assert {h.id for h in after.search("note 2999 about herons", k=1)} <= set(ids)
    finally:
        after.close()


def _check_vectors(acct: soulpass.Account, minilm: Any, sample: int = 25) -> None:
    """Stored vectors are the model's vectors of the records' texts (not another record's)."""
    idx = acct.index()
    assert idx.vectors is not None
    rows = idx.catalog.get(_embedded_ids(acct)[:sample])
    for row in rows:
        want = minilm.embed_batch([embed_text(row)])[0]
        (rid, score), *_ = idx.vectors.search(want, 1, allowed=[row.id])
        assert rid == row.id and score > 0.9999


@pytest.mark.slow
def test_sigkill_a_worker_mid_batch_of_10000(redis_url: str, names: QueueNames, tmp_path: Path, minilm: Any) -> None:
    home = tmp_path / "home"
    soulpass.open(home, embedder="none").create_account("ann").bulk_append(_turns(10_000, "tide"))
    workers = [start_worker(redis_url, names, tmp_path / "a.log", worker_id="victim", batch=64, visibility=5.0),
               start_worker(redis_url, names, tmp_path / "b.log", worker_id="survivor", batch=64, visibility=5.0)]
    client = connect(redis_url)
    acct = None
    try:
        wait_for_workers(redis_url, names, 2)
        remote = RemoteEmbedder(redis_url, names=names, task_size=32, index_timeout=60)
        acct = soulpass.open(home, embedder=remote, indexing="background").account("ann")
        backlog = acct.index().backlog
        assert backlog is not None
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline:  # let it get going, then kill the victim holding tasks
            if backlog.pending() < 9000 and client.llen(names.processing("victim")) > 0:
                break
            time.sleep(0.01)
        held = client.llen(names.processing("victim"))
        workers[0].send_signal(signal.SIGKILL)
        workers[0].wait(10)
        assert held > 0, "the victim held no task when killed"
        indexer = acct.indexer()
        assert indexer is not None and indexer.wait_idle(600), indexer.status()
        status = acct.index().status()
        ids = _embedded_ids(acct)
        assert status.pending_embeddings == 0
        assert status.vectors == 10_000 and len(ids) == len(set(ids)) == 10_000  # none missing, none twice
        stats = queue_metrics(client, names)
        assert stats.requeued >= 1  # the victim's batch went back to the queue ...
        assert sum(w.texts for w in stats.workers) == 10_000  # ... and every text was answered exactly once
        _check_vectors(acct, minilm)
    finally:
        if acct is not None:
            acct.close()
        stop_all(workers)


@pytest.mark.slow
def test_redis_stopped_mid_way(tmp_path: Path, minilm: Any) -> None:
    own = OwnRedis(tmp_path / "redis").start()
    names = QueueNames()  # the seed's own names: a private server
    worker = start_worker(own.url, names, tmp_path / "w.log", visibility=3.0)
    acct = None
    try:
        wait_for_workers(own.url, names, 1)
        remote = RemoteEmbedder(own.url, names=names, local=minilm, index_timeout=5, query_timeout=2)
        acct = soulpass.open(tmp_path / "home", embedder=remote, indexing="background").create_account("ann")
        acct.bulk_append(_turns(200))
        indexer = (acct.index(), acct.indexer())[1]
        assert indexer is not None and indexer.wait_idle(120)
        assert acct.index().status().vectors == 200

        own.stop()  # Redis goes away in the middle of the day
        sb = acct.create_sandbox("offline")
        for i in range(30):
            sb.add_turn("user", f"offline thought {i} about lighthouses")
        assert sb.archive().version == 2  # type: ignore[union-attr]  # writes keep working
        acct.bulk_append(_turns(100, "written while redis was down", start=200))
        hits = acct.search("lighthouses", k=5)  # full text finds them; the query vector came from the local model
        assert len(hits) == 5 and hits.incomplete and sum("lighthouses" in h.text for h in hits) >= 3
        time.sleep(2)
        assert acct.index().status().pending_embeddings == 130  # kept, not embedded locally, not lost
        assert indexer.status().failures >= 1

        own.start()  # back (empty: the backlog lives in the catalog, not in Redis)
        wait_for_workers(own.url, names, 1, timeout=60)
        assert indexer.wait_idle(300), indexer.status()
        status = acct.index().status()
        assert status.pending_embeddings == 0 and status.vectors == 330
        # The worker process's own count: 200 + 130, each embedded once (the query below is one more).
        assert queue_metrics(connect(own.url), names).workers[0].texts == 330
        assert not acct.search("lighthouses", k=5).incomplete
        _check_vectors(acct, minilm)
    finally:
        if acct is not None:
            acct.close()
        stop_all([worker])
        own.stop()


def test_vectors_are_the_models(tmp_path: Path, minilm: Any) -> None:
    acct = soulpass.open(tmp_path, embedder=minilm, indexing="background").create_account("ann")
    try:
        acct.bulk_append(_turns(12))
        indexer = (acct.index(), acct.indexer())[1]
        assert indexer is not None and indexer.wait_idle(60)
        _check_vectors(acct, minilm)
    finally:
        acct.close()


def test_close_does_not_hang_on_silent_workers(redis_url: str, names: QueueNames, tmp_path: Path) -> None:
    """Workers that took nothing and never answer: closing the account stops the wait at once, the
    tasks are taken back off the queue and the records stay in the backlog."""
    client = connect(redis_url)
    client.set(names.heartbeat("phantom"), json.dumps({"model": "all-MiniLM-L6-v2/onnx-int8"}), px=60_000)
    client.sadd(names.workers, "phantom")
    remote = RemoteEmbedder(redis_url, names=names, index_timeout=120)
    home = tmp_path / "home"
    acct = soulpass.open(home, embedder=remote, indexing="background").create_account("ann")
    acct.bulk_append(_turns(20))
    acct.index()
    deadline = time.monotonic() + 10
    while client.llen(names.queue) == 0 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert client.llen(names.queue) > 0  # the indexer is waiting for an answer
    start = time.monotonic()
    acct.close()
    assert time.monotonic() - start < 5
    assert client.llen(names.queue) == 0 and _backlog_rows(home, "ann") == 20
