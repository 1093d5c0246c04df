"""Backends under the store contract. A backend joins the suite by adding a param to ``backend``
and a :class:`contract_backends.Backend` that opens its stores (PostgreSQL: one schema per test)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from contract_backends import Backend, FilesBackend, PostgresBackend

from postgres_helpers import postgres_url


@pytest.fixture(params=["files", "postgres"])
def backend(request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Backend]:
    if request.param == "files":
        monkeypatch.setattr(os, "fsync", lambda fd: None)  # durability is the crash tests' business
        yield FilesBackend(tmp_path)
    else:
        yield from (PostgresBackend(url) for url in postgres_url(tmp_path))
