"""A PostgreSQL database for a test: a schema of its own on the machine's server, dropped after.

The server is ``$SOULPASS_TEST_POSTGRES`` (default ``postgresql://postgres@127.0.0.1:5432/test``);
a test that needs it is skipped, saying why, only when no PostgreSQL answers there.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import quote

import pytest

SERVER = os.environ.get("SOULPASS_TEST_POSTGRES", "postgresql://postgres@127.0.0.1:5432/test")


def postgres_url(tmp_path: Path) -> Iterator[str]:
    """A URL whose tables live in a new schema of the machine's server (dropped, pool closed, after
    the test) and whose local cache (what each process derives) is under ``tmp_path``."""
    yield from schema_url(SERVER, tmp_path)


def schema_url(server: str, tmp_path: Path) -> Iterator[str]:
    """As ``postgres_url``, on the server ``server``."""
    psycopg = pytest.importorskip("psycopg", reason="the 'postgres' extra (psycopg) is not installed")
    try:
        admin = psycopg.connect(server, autocommit=True, connect_timeout=3)
    except psycopg.OperationalError as exc:
        pytest.skip(f"no PostgreSQL answers at {server}: {exc}")
    schema = f"sp_test_{uuid.uuid4().hex[:12]}"
    with admin:
        admin.execute(f"CREATE SCHEMA {schema}")
        sep = "&" if "?" in server else "?"
        url = f"{server}{sep}options={quote(f'-csearch_path={schema}')}&soulpass_cache={quote(str(tmp_path / 'pg'))}"
        try:
            yield url
        finally:
            from soulpass.store.postgres.connections import close_database

            close_database(url)
            admin.execute(f"DROP SCHEMA {schema} CASCADE")
