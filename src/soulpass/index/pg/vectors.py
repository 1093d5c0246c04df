"""An account's vectors kept in PostgreSQL (:class:`PgVectors`, a ``VectorIndex``).

Each embedder's vectors get a table (``index_vectors_<model tag>``) keyed by account and id, made on
first use and listed in ``index_vector_tables``. With **pgvector** the column is ``vector(dim)``
under an HNSW index by inner product (vectors are unit length, so it ranks by cosine); a search
scoped to one account walks the graph with pgvector's iterative scan, so other accounts' vectors
never crowd it out. A search among given ids (a session, "as of version") is exact.

Without pgvector in the database (``CREATE EXTENSION vector`` fails) the vectors are kept in a
``bytea`` column and searched with an index derived beside them in the account's local index
folder (``soulpass.vectors``, HNSW above a few thousand rows), brought up to date from the
table's change counter before each search. A warning says so, once per database.
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import shutil
import threading
from collections.abc import Collection, Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import psycopg
from psycopg.adapt import Buffer, Dumper, PyFormat
from psycopg.pq import Format

from soulpass.errors import InvalidInput
from soulpass.index.catalog.query import Filters
from soulpass.index.passages import best_in_array, passage_id, record_of
from soulpass.index.pg.catalog import filter_sql
from soulpass.store.contract import Database
from soulpass.store.fsio import atomic_write, dump_json, load_json
from soulpass.vectors import SharedIndex, model_tag, open_vector_index
from soulpass.vectors.base import IndexMeta, check_ids, unit_query, unit_rows

log = logging.getLogger(__name__)

__all__ = ["EXACT_AMONG", "PgVectors", "has_pgvector"]

EXACT_AMONG = 20_000  # a search among at most this many given ids scores each of them exactly
EF_SEARCH = 100  # HNSW candidates per search (pgvector's default is 40): recall over a few ms
ANN_BUILD_MEMORY = "2GB"  # maintenance_work_mem for an HNSW build: past it pgvector builds slower (and says so)
_HAS: dict[str, str | None] = {}  # database URL -> the schema pgvector is in, None: not there
_LOCK = threading.Lock()


def has_pgvector(db: Any) -> str | None:
    """The schema pgvector is installed in (installed into ``public`` if it can be), None when the
    database has none; says once when it has none. Its type and operators are named with their
    schema, so a connection whose search path leaves it out still finds them."""
    with _LOCK:
        if db.url in _HAS:
            return _HAS[db.url]
        import psycopg

        found: str | None = None
        try:
            with db.connection() as conn:
                row = conn.execute("SELECT extnamespace::regnamespace::text FROM pg_extension"
                                   " WHERE extname = 'vector'").fetchone()
                if row is None:
                    has_public = conn.execute("SELECT 1 FROM pg_namespace WHERE nspname = 'public'").fetchone()
                    conn.execute("CREATE EXTENSION IF NOT EXISTS vector" + (" SCHEMA public" if has_public else ""))
                    row = conn.execute("SELECT extnamespace::regnamespace::text FROM pg_extension"
                                       " WHERE extname = 'vector'").fetchone()
                found = str(row[0]) if row else None
        except psycopg.Error as exc:
            said = _said(db)  # once per database, not once per command: a note in its local folder
            (log.debug if said.exists() else log.warning)(
                "pgvector is not available in this PostgreSQL (%s): vectors are kept in a bytea column "
                "and searched with an HNSW index derived beside them in each account's local index "
                "folder. Install pgvector (CREATE EXTENSION vector) for vectors searched in the database.",
                str(exc).strip().splitlines()[0])
            with contextlib.suppress(OSError):
                said.parent.mkdir(parents=True, exist_ok=True)
                said.touch()
        if found is not None:
            _said(db).unlink(missing_ok=True)  # should it go again, say so again
        _HAS[db.url] = found
        return found


def _said(db: Database) -> Path:
    """The note that this database's missing pgvector was already said (in its local folder)."""
    return db.local_folder / "pgvector-missing.said"


def _literal(row: npt.NDArray[np.float32]) -> str:
    """A row in pgvector's text form (for ``COPY``)."""
    return "[" + ",".join(map(str, row.tolist())) + "]"


class _Vector:
    """A query's vector as a statement's parameter (``_param``), sent in pgvector's binary form
    (``%s::vector``): no number formatted here or parsed there, the same float4s as the text form."""

    __slots__ = ("row",)

    def __init__(self, row: npt.NDArray[np.float32]) -> None:
        self.row = row


class _VectorDumper(Dumper):
    """pgvector's binary input (``vector_recv``): the dimension and a zero as two int16, then the
    float4s, all big-endian. No type oid: the statement's cast names it."""

    format = Format.BINARY

    def dump(self, obj: _Vector) -> Buffer:
        return np.array([obj.row.shape[0], 0], ">u2").tobytes() + obj.row.astype(">f4").tobytes()


def _param(conn: Any, row: npt.NDArray[np.float32]) -> _Vector:
    """``row`` as a parameter of a statement on ``conn``, which is taught the binary form the first
    time (a connection copies psycopg's global adapters when it is made, perhaps before this module
    was imported)."""
    try:
        conn.adapters.get_dumper(_Vector, PyFormat.BINARY)
    except psycopg.ProgrammingError:
        conn.adapters.register_dumper(_Vector, _VectorDumper)
    return _Vector(row)


class PgVectors:
    """The vectors of account ``account_id`` made by embedder ``model_id`` (``VectorIndex``)."""

    def __init__(self, db: Any, account_id: int, *, model_id: str, dim: int, local_folder: Path) -> None:
        self.db, self.account, self.dim = db, account_id, dim
        self.schema = has_pgvector(db)
        self.pgvector = self.schema is not None
        self._vector = f"{self.schema}.vector"
        self._ip = f"OPERATOR({self.schema}.<#>)"
        self.table = f"index_vectors_{model_tag(model_id)}"
        self._meta = IndexMeta(backend="pgvector" if self.pgvector else "pg-bytea", model_id=model_id, dim=dim)
        self._lock = threading.RLock()
        self._local: SharedIndex | None = None
        self._local_folder = local_folder
        self._ann = False  # the HNSW index is known to exist
        self._ensure_table(model_id)
        if not self.pgvector:
            self._local = open_vector_index(local_folder, model_id=model_id, dim=dim, backend="hnsw")

    @property
    def meta(self) -> IndexMeta:
        return self._meta

    def _ensure_table(self, model_id: str) -> None:
        column = f"{self._vector}({self.dim})" if self.pgvector else "bytea"
        with self.db.connection() as conn, conn.transaction():
            conn.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", (self.table,))
            found = conn.execute("SELECT model, dim, pgvector FROM index_vector_tables WHERE name = %s",
                                 (self.table,)).fetchone()
            if found is not None:
                if (found[0], found[1]) != (model_id, self.dim):
                    raise InvalidInput(f"{self.table} holds {found[1]}-d vectors of {found[0]!r}, not {self.dim}-d "
                                       f"of {model_id!r}", table=self.table)
                if bool(found[2]) != self.pgvector:  # pgvector came or went since: keep what the table is
                    self.pgvector = bool(found[2])
                    self._meta = IndexMeta(backend="pgvector" if self.pgvector else "pg-bytea", model_id=model_id,
                                           dim=self.dim)
                return
            conn.execute(f"CREATE SEQUENCE {self.table}_seq")
            conn.execute(f"""CREATE TABLE {self.table} (
                account_id bigint NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
                id text COLLATE "C" NOT NULL,
                record text COLLATE "C" NOT NULL,
                source text NOT NULL DEFAULT '',
                seq bigint NOT NULL DEFAULT nextval('{self.table}_seq'),
                embedding {column},
                PRIMARY KEY (account_id, id))""")
            conn.execute(f"CREATE INDEX {self.table}_record ON {self.table} (account_id, record)")
            if not self.pgvector:
                conn.execute(f"CREATE INDEX {self.table}_seq_order ON {self.table} (account_id, seq)")
            conn.execute("INSERT INTO index_vector_tables (name, model, dim, pgvector) VALUES (%s, %s, %s, %s)",
                         (self.table, model_id, self.dim, self.pgvector))

    # --- writing -------------------------------------------------------------------------

    def upsert(self, ids: Sequence[str], vectors: npt.ArrayLike, sources: Sequence[str] | None = None) -> None:
        """Store one vector per id; ``sources`` (the embedded texts' hashes) say what each was made of."""
        ids = check_ids(ids)
        rows = unit_rows(vectors, len(ids), self.dim)
        sources = list(sources) if sources is not None else [""] * len(ids)
        with self._lock, self.db.connection() as conn, conn.transaction():
            conn.execute(f"CREATE TEMP TABLE IF NOT EXISTS incoming_vectors (id text, record text, source text, "
                         f"embedding {'text' if self.pgvector else 'bytea'}) ON COMMIT DELETE ROWS")
            with conn.cursor().copy("COPY incoming_vectors (id, record, source, embedding) FROM STDIN") as copy:
                for rid, source, row in zip(ids, sources, rows, strict=True):
                    copy.write_row((rid, record_of(rid), source, _literal(row) if self.pgvector else row.tobytes()))
            cast = f"::{self._vector}({self.dim})" if self.pgvector else ""
            conn.execute(f"INSERT INTO {self.table} (account_id, id, record, source, embedding)"
                         f" SELECT %s, id, record, source, embedding{cast} FROM incoming_vectors"
                         " ON CONFLICT (account_id, id) DO UPDATE SET record = excluded.record,"
                         " source = excluded.source, embedding = excluded.embedding,"
                         f" seq = nextval('{self.table}_seq')",
                         (self.account,))
        if self._writes_local():
            assert self._local is not None
            self._local.upsert(ids, rows)

    def delete(self, ids: Sequence[str]) -> None:
        ids = check_ids(ids)
        if not ids:
            return
        with self._lock, self.db.connection() as conn:
            if self.pgvector:
                conn.execute(f"DELETE FROM {self.table} WHERE account_id = %s AND id = ANY(%s)", (self.account, ids))
            else:  # a tombstone, so other processes' local indexes learn of it
                conn.execute(f"UPDATE {self.table} SET embedding = NULL, source = '', seq = nextval('{self.table}_seq')"
                             " WHERE account_id = %s AND id = ANY(%s)", (self.account, ids))
        if self._writes_local():
            assert self._local is not None
            self._local.delete(ids)

    # --- reading -------------------------------------------------------------------------

    def sources(self, ids: Sequence[str]) -> dict[str, str]:
        """What each id's vector was made of (the ``sources`` its upsert named)."""
        if not ids:
            return {}
        with self.db.connection() as conn:
            return dict(conn.execute(f"SELECT id, source FROM {self.table} WHERE account_id = %s AND id = ANY(%s)"
                                     " AND embedding IS NOT NULL", (self.account, list(ids))).fetchall())

    def passage_counts(self, ids: Sequence[str]) -> dict[str, int]:
        """How many passage vectors each record has (those it has any of)."""
        if not ids:
            return {}
        with self.db.reading() as conn:
            return {rid: int(n) for rid, n in conn.execute(
                f"SELECT record, count(*) FROM {self.table} WHERE account_id = %s AND record = ANY(%s)"
                " AND id <> record AND embedding IS NOT NULL GROUP BY record", (self.account, list(ids)))}

    def best_per_record(self, vector: npt.ArrayLike, records: Sequence[str]) -> dict[str, float]:
        """The best cosine of each record's own and passage vectors (those that have one): in one
        query with pgvector, else from the local index's rows."""
        if not records:
            return {}
        if self._local is not None:
            self._sync_local()
            of = {rid: tuple(passage_id(rid, n) for n in range(k)) for rid, k in self.passage_counts(records).items()}
            wanted = [*records, *itertools.chain.from_iterable(of.values())]
            return best_in_array(records, of, self._local.cosine_array(vector, wanted))
        with self.db.reading() as conn:
            return {rid: float(best) for rid, best in conn.execute(
                f"SELECT record, max(-(embedding {self._ip} %s::{self._vector})) FROM {self.table}"
                " WHERE account_id = %s AND record = ANY(%s) AND embedding IS NOT NULL GROUP BY record",
                (_param(conn, unit_query(vector, self.dim)), self.account, list(records)))}

    def passages_total(self) -> int:
        with self.db.reading() as conn:
            return int(conn.execute(f"SELECT count(*) FROM {self.table} WHERE account_id = %s AND id <> record"
                                    " AND embedding IS NOT NULL", (self.account,)).fetchone()[0])

    def count(self) -> int:
        with self.db.reading() as conn:
            return int(conn.execute(f"SELECT count(*) FROM {self.table} WHERE account_id = %s"
                                    " AND embedding IS NOT NULL", (self.account,)).fetchone()[0])

    def search(self, vector: npt.ArrayLike, k: int, allowed: Collection[str] | None = None) -> list[tuple[str, float]]:
        if type(k) is not int or k < 0:
            raise InvalidInput(f"k must be a non-negative integer, not {k!r}", field="k")
        query = unit_query(vector, self.dim)
        if k == 0 or (allowed is not None and not allowed):
            return []
        if self._local is not None:
            self._sync_local()
            return self._local.search(query, k, allowed)
        exact = allowed is not None and len(allowed) <= EXACT_AMONG
        if exact:
            assert allowed is not None
            with self.db.reading() as conn:
                # OFFSET 0 keeps the planner from walking the HNSW graph for a handful of rows.
                rows = conn.execute(
                    f"SELECT id, d FROM (SELECT id, embedding {self._ip} %s::{self._vector} AS d FROM {self.table}"
                    " WHERE account_id = %s AND id = ANY(%s) AND embedding IS NOT NULL OFFSET 0) AS s"
                    " ORDER BY d, id LIMIT %s", (_param(conn, query), self.account, list(allowed), k)).fetchall()
            return [(rid, -float(d)) for rid, d in rows]
        with self.walking(k) as conn:
            wanted = set(allowed) if allowed is not None else None
            fetch = k if wanted is None else 4 * k
            param = _param(conn, query)
            while True:
                rows = conn.execute(
                    f"SELECT id, embedding {self._ip} %s::{self._vector} AS d FROM {self.table} WHERE account_id = %s"
                    " ORDER BY d LIMIT %s", (param, self.account, fetch)).fetchall()
                found = [(rid, -float(d)) for rid, d in rows if wanted is None or rid in wanted]
                if wanted is None or len(found) >= k or len(rows) < fetch:
                    break
                fetch *= 4
        found.sort(key=lambda hit: (-hit[1], hit[0]))  # relaxed order: the graph's walk is nearly sorted
        return found[:k]

    def nearest_passing(self, vector: npt.ArrayLike, n: int, filters: Filters) -> tuple[list[tuple[str, float]], bool]:
        """The ``n`` vectors nearest ``vector`` (records' own and passages') whose record has a catalog
        row passing ``filters``, best first, and whether that was every one there is: one query,
        the HNSW walk going on while rows fail the filter (``hnsw.iterative_scan``), where the vectors
        are in the database (pgvector); ``filters`` a broad one (no version, session or event: those
        are searched among the ids that pass, ``search(allowed=...)``)."""
        if not self.pgvector:
            raise InvalidInput("a filtered walk needs the vectors in the database (pgvector)", table=self.table)
        if type(n) is not int or n < 1:
            raise InvalidInput(f"n must be a positive integer, not {n!r}", field="n")
        where, params = filter_sql(filters)
        with self.walking(n) as conn:
            rows = conn.execute(
                f"SELECT v.id, v.embedding {self._ip} %s::{self._vector} AS d FROM {self.table} AS v"
                " WHERE v.account_id = %s AND EXISTS (SELECT 1 FROM index_rows AS c WHERE c.account_id = v.account_id"
                f" AND c.id = v.record AND {where}) ORDER BY d LIMIT %s",
                (_param(conn, unit_query(vector, self.dim)), self.account, *params, n)).fetchall()
        found = sorted(((rid, -float(d)) for rid, d in rows), key=lambda hit: (-hit[1], hit[0]))
        return found, len(rows) < n

    @contextlib.contextmanager
    def walking(self, n: int) -> Iterator[Any]:
        """A connection in a transaction (pipelined: its statements go with the caller's first) whose
        HNSW walks consider ``n`` candidates at least (``EF_SEARCH``; 1,000, pgvector's ceiling, at
        most) and go on while rows fail a filter (``hnsw.iterative_scan``); the index built first if
        there is none."""
        self._ensure_ann()  # on its own connection: none held idle meanwhile
        with self.db.connection() as conn, conn.pipeline(), conn.transaction():  # the SET LOCALs hold for it
            conn.execute(f"SET LOCAL hnsw.ef_search = {min(max(EF_SEARCH, n), 1000)}")
            conn.execute("SET LOCAL hnsw.iterative_scan = relaxed_order")
            yield conn

    def vector_sql(self, conn: Any, vector: npt.ArrayLike) -> tuple[str, str, _Vector]:
        """For a statement of the search (``soulpass.index.pg.gather``): the table, and the distance
        of a row ``v`` to ``vector`` (the negated inner product, ascending is nearest first) with the
        one parameter it takes, for a statement on ``conn`` (``_param``)."""
        return self.table, f"v.embedding {self._ip} %s::{self._vector}", _param(conn, unit_query(vector, self.dim))

    def _ensure_ann(self) -> None:
        """Build the HNSW index if the table has none yet: at the first search, not at the table's
        making, so a bulk load (an import, a rebuild, a million rows) is indexed in one build
        instead of row by row. Processes that search meanwhile wait for the one building it."""
        if self._ann:
            return
        name = f"{self.table}_hnsw"
        with self.db.connection() as conn, conn.transaction():
            if conn.execute("SELECT to_regclass(%s)", (name,)).fetchone()[0] is None:
                conn.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", (name,))
                if conn.execute("SELECT to_regclass(%s)", (name,)).fetchone()[0] is None:
                    rows = conn.execute(f"SELECT count(*) FROM {self.table}").fetchone()[0]
                    if rows > 10_000:
                        log.info("building the HNSW index of %s over %d vectors (once)", self.table, rows)
                    conn.execute(f"SET LOCAL maintenance_work_mem = '{ANN_BUILD_MEMORY}'")
                    conn.execute(f"CREATE INDEX {name} ON {self.table}"
                                 f" USING hnsw (embedding {self.schema}.vector_ip_ops)")
        self._ann = True

    def _writes_local(self) -> bool:
        """Whether this process keeps the local index (bytea mode; another process on this host may)."""
        return self._local is not None and not self._local.read_only

    def _sync_local(self) -> None:
        """Bring the local index (bytea mode) up to the table's change counter; an index that holds
        more than the table (the account's index was dropped: a forget) is made again from it."""
        assert self._local is not None
        if not self._writes_local():
            return
        mark_file = self._local_folder / "pg_seq.json"
        with self._lock:
            if self._local.count() > self.count():
                self._local.close()
                shutil.rmtree(self._local_folder, ignore_errors=True)
                self._local = open_vector_index(self._local_folder, model_id=self._meta.model_id, dim=self.dim,
                                                backend="hnsw")
            try:
                mark = int(load_json(mark_file)["seq"]) if mark_file.exists() else 0
            except (KeyError, TypeError, ValueError, OSError):
                mark = 0
            with self.db.connection() as conn:
                changed = conn.execute(f"SELECT id, embedding, seq FROM {self.table} WHERE account_id = %s AND seq > %s"
                                       " ORDER BY seq", (self.account, mark)).fetchall()
            if not changed:
                return
            gone = [rid for rid, data, _ in changed if data is None]
            put = {rid: data for rid, data, _ in changed if data is not None}
            if gone:
                self._local.delete([g for g in dict.fromkeys(gone) if g not in put])
            if put:
                ids = list(put)
                matrix = np.frombuffer(b"".join(bytes(put[i]) for i in ids), dtype=np.float32).reshape(len(ids), -1)
                self._local.upsert(ids, matrix)
            atomic_write(mark_file, dump_json({"seq": int(changed[-1][2])}))

    def close(self) -> None:
        if self._local is not None:
            self._local.close()
