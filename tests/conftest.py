"""Fixtures shared by several test modules."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from queue_helpers import private_queue, shared_or_own_redis

if TYPE_CHECKING:
    from fastapi.testclient import TestClient

    from server_world import World
    from soulpass.embed.wire import QueueNames


@pytest.fixture(params=["fts5", "tantivy"])
def engine(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """The full-text engine: FTS5 alone, and the tantivy sidecar (when it is installed), as the
    default of every catalog the test opens without a choice of its own."""
    if request.param == "tantivy":
        pytest.importorskip("tantivy")
    monkeypatch.setattr("soulpass.index.catalog.catalog.DEFAULT_FULLTEXT", request.param)
    return str(request.param)


# --- the embedding queue (queue_helpers) ----------------------------------------------------------


@pytest.fixture
def redis_url(tmp_path: Path) -> Iterator[str]:
    """The shared Redis, else a private ``redis-server``, else the test is skipped."""
    yield from shared_or_own_redis(tmp_path)


@pytest.fixture
def names(redis_url: str) -> Iterator[QueueNames]:
    """A queue of the test's own on ``redis_url``, its keys deleted afterwards."""
    yield from private_queue(redis_url)


@pytest.fixture(scope="module")
def minilm() -> Any:
    """The real MiniLM embedder on one thread, loaded once per module."""
    from soulpass.embed.minilm import MiniLM

    return MiniLM(threads=1)


# --- the REST API (server_world; fastapi is imported only by the tests that ask) ------------------


@pytest.fixture
def world(tmp_path: Path) -> World:
    """Two accounts with data and keys, and an admin key (``server_world.build_world``)."""
    from server_world import build_world

    return build_world(tmp_path / "home")


@pytest.fixture
def client(world: World) -> TestClient:
    """A test client of the API over ``world``."""
    from fastapi.testclient import TestClient

    return TestClient(world.app())
