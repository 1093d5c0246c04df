"""Fixtures shared by several test modules."""

from __future__ import annotations

import pytest


@pytest.fixture(params=["fts5", "tantivy"])
def engine(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """The full-text engine: FTS5 alone, and the tantivy sidecar (when it is installed)."""
    if request.param == "tantivy":
        pytest.importorskip("tantivy")
    else:
        monkeypatch.setattr("soulpass.index.catalog.catalog.tantivy_module", lambda: None)
    return str(request.param)
