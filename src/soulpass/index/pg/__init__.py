"""An account's derived index kept in its PostgreSQL database, beside the store: the catalog
(``index_rows``, full text by tsvector + GIN), the vectors (pgvector HNSW, or bytea with a local
index derived beside them) and the embedding backlog. Every process serving the account shares it.
Needs the ``postgres`` extra (psycopg)."""

from soulpass.index.pg.backlog import PgBacklog
from soulpass.index.pg.catalog import PgCatalog
from soulpass.index.pg.vectors import PgVectors, has_pgvector

__all__ = ["PgBacklog", "PgCatalog", "PgVectors", "has_pgvector"]
