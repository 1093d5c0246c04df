"""Real Redis and real worker processes for the embedding-queue tests.

``shared_or_own_redis``: the shared Redis on 127.0.0.1:6379 (each test uses its own queue name, so
nothing else on it is touched), else a private ``redis-server``; skipped with a reason when neither
exists. ``OwnRedis`` starts a private ``redis-server`` on a free port, for tests that stop Redis.
"""

from __future__ import annotations

import contextlib
import shutil
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from soulpass.embed.wire import QueueNames

SHARED_URL = "redis://127.0.0.1:6379/0"


def redis_module() -> Any:
    return pytest.importorskip("redis", reason="the 'redis' extra (redis-py) is not installed")


def reachable(url: str) -> bool:
    redis = redis_module()
    try:
        return bool(redis.Redis.from_url(url, socket_connect_timeout=1, socket_timeout=2).ping())
    except redis.exceptions.RedisError:
        return False


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class OwnRedis:
    """A private, non-persistent redis-server on a free port; ``stop()``/``start()`` again on the same port."""

    def __init__(self, folder: Path) -> None:
        if shutil.which("redis-server") is None:
            pytest.skip("no redis-server binary to start a private Redis (this test needs one of its own)")
        self.folder, self.port = folder, free_port()
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> OwnRedis:
        self.folder.mkdir(parents=True, exist_ok=True)
        self.proc = subprocess.Popen(
            ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
             "--dir", str(self.folder)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 10
        while not reachable(self.url):
            if time.monotonic() > deadline:
                raise RuntimeError(f"redis-server on port {self.port} did not start")
            time.sleep(0.05)
        return self

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)  # as abrupt as a crash: nothing is saved anyway
            self.proc.wait(10)
        self.proc = None


def shared_or_own_redis(tmp_path: Path) -> Iterator[str]:
    """For conftest's ``redis_url`` fixture: the shared Redis, else a private one, else skip."""
    if reachable(SHARED_URL):
        yield SHARED_URL
        return
    if shutil.which("redis-server") is None:
        pytest.skip("no Redis reachable on 127.0.0.1:6379 and no redis-server binary to start one")
    own = OwnRedis(tmp_path / "redis").start()
    try:
        yield own.url
    finally:
        own.stop()


def private_queue(redis_url: str) -> Iterator[QueueNames]:
    """For conftest's ``names`` fixture: a queue of the test's own, its keys deleted afterwards."""
    q = QueueNames(f"queue:gpu_heavy:test-{uuid.uuid4().hex[:10]}")
    yield q
    client = redis_module().Redis.from_url(redis_url)
    with contextlib.suppress(Exception):
        keys = list(client.scan_iter(match=f"{q.queue}*", count=1000))
        if keys:
            client.delete(*keys)


def start_worker(url: str, names: QueueNames, log: Path, *, worker_id: str | None = None, visibility: float = 3.0,
                 batch: int = 64, threads: int = 1) -> subprocess.Popen[bytes]:
    """A real ``soulpass worker`` process (``python -m soulpass.worker``), output into ``log``."""
    args = [sys.executable, "-m", "soulpass.worker", "--redis", url, "--queue", names.queue, "--visibility",
            str(visibility), "--batch", str(batch), "--threads", str(threads)]
    if worker_id:
        args += ["--id", worker_id]
    with log.open("ab") as out:  # the child keeps its own descriptor
        return subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT)


def wait_for_workers(url: str, names: QueueNames, n: int, timeout: float = 60.0) -> dict[str, Any]:
    from soulpass.embed.redis_queue import connect, live_workers

    client = connect(url)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        alive = live_workers(client, names)
        if len(alive) >= n:
            return alive
        time.sleep(0.1)
    raise AssertionError(f"{n} worker(s) did not come up on {names.queue} within {timeout} s")


def stop_all(procs: list[subprocess.Popen[bytes]]) -> None:
    for p in procs:
        if p.poll() is None:
            p.kill()
            p.wait(10)
