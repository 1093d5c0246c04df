"""What the benchmarks that also run on PostgreSQL share: a fresh schema to run in, dropped after."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

__all__ = ["postgres_schema"]


def postgres_schema(server: str, work: Path) -> tuple[str, Callable[[], None]]:
    """A fresh schema in ``server``'s database: the URL that uses it, and a function dropping it."""
    import uuid
    from urllib.parse import quote

    import psycopg

    schema = f"sp_load_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(server, autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA {schema}")
    sep = "&" if "?" in server else "?"
    url = f"{server}{sep}options={quote(f'-csearch_path={schema}')}&soulpass_cache={quote(str(work / 'pgcache'))}"

    def drop() -> None:
        from soulpass.store.postgres.connections import close_database

        close_database(url)
        with psycopg.connect(server, autocommit=True) as conn:
            conn.execute(f"DROP SCHEMA {schema} CASCADE")

    return url, drop
