"""Shared helpers of the agent-tier tests: a settable clock, a memory over a fresh account, the shared Redis."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

import soulpass
from soulpass.agent import AgentConfig, AgentMemory
from soulpass.engine import Account

START = datetime(2026, 1, 5, 9, 0, tzinfo=UTC)


class Clock:
    """Injectable time: ``clock()`` returns now, ``clock.advance(minutes=…)`` moves it."""

    def __init__(self, start: datetime = START) -> None:
        self.now = start

    def __call__(self) -> datetime:
        return self.now

    def advance(self, **delta: float) -> datetime:
        self.now += timedelta(**delta)
        return self.now


def account(home: Path, embedder: Any = "none", name: str = "ann") -> Account:
    return soulpass.open(home, embedder=embedder).account(name, create=True)


def memory(acct: Account, clock: Clock | None = None, sandbox_name: str = "day", **config: Any) -> AgentMemory:
    return AgentMemory(acct.create_sandbox(sandbox_name), clock=clock or Clock(), config=AgentConfig(**config))


def shared_redis() -> Any:
    """A client of the shared Redis on 127.0.0.1:6379; skips the test without the extra or the server."""
    redis = pytest.importorskip("redis", reason="the 'redis' extra is not installed")
    client = redis.Redis(host="127.0.0.1", port=6379, socket_connect_timeout=1)
    try:
        client.ping()
    except redis.ConnectionError:
        pytest.skip("no Redis server at 127.0.0.1:6379")
    return client
