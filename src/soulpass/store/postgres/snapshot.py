"""An account as of one version: each read is one indexed query on the rows valid at it.

Rows a snapshot reads never change (a later commit only sets ``to_version`` past it), so a
snapshot holds no connection and no transaction: each read borrows a pooled connection.
"""

from __future__ import annotations

from collections.abc import Collection, Iterator, Mapping
from typing import Any

from soulpass.errors import Corrupted
from soulpass.records import RECORD_MODELS, Record
from soulpass.store.contract import VersionEntry
from soulpass.store.files.account import parse_model
from soulpass.store.keys import kind_of_id, record_path
from soulpass.store.lookup import by_hash
from soulpass.store.postgres.connections import Database
from soulpass.store.postgres.rows import VISIBLE, record_of_key

__all__ = ["PAGE", "PostgresSnapshot"]

PAGE = 1000  # rows a listing fetches at a time (keyset pages: no cursor held between them)


class PostgresSnapshot:
    """Account ``account_id`` at version ``version`` (:class:`soulpass.store.contract.Snapshot`)."""

    def __init__(self, db: Database, account_id: int, version: int) -> None:
        self._db, self._account, self._version = db, account_id, version

    @property
    def version(self) -> int:
        return self._version

    def _args(self, **more: Any) -> dict[str, Any]:
        return {"account": self._account, "at": self._version, **more}

    def entry(self) -> VersionEntry:
        if self._version == 0:
            return VersionEntry({"version": 0, "parent": None, "counts": {}})
        with self._db.connection() as conn:
            row = conn.execute("SELECT entry FROM versions WHERE account_id = %s AND version = %s",
                               (self._account, self._version)).fetchone()
        if row is None:
            raise Corrupted(f"version {self._version} has no entry in the version log", account=str(self._account))
        return VersionEntry(_mapping(row[0]))

    def record(self, record_id: str) -> Record | None:
        kind = kind_of_id(record_id)
        body = self._record_body(record_id)
        return None if body is None else parse_model(RECORD_MODELS[kind], body, record_path(record_id))

    def _record_body(self, record_id: str) -> dict[str, Any] | None:
        with self._db.connection() as conn:
            row = conn.execute(f"SELECT body FROM records WHERE account_id = %(account)s AND record_id = %(id)s "
                               f"AND {VISIBLE}", self._args(id=record_id)).fetchone()
        return None if row is None else _mapping(row[0])

    def document(self, key: str) -> dict[str, Any] | None:
        """A document, or the record a record's key names (a rollback reads records by key)."""
        record_id = record_of_key(key)
        if record_id is not None:
            return self._record_body(record_id)
        with self._db.connection() as conn:
            row = conn.execute(f"SELECT body FROM documents WHERE account_id = %(account)s AND key = %(key)s "
                               f"AND {VISIBLE}", self._args(key=key)).fetchone()
        return None if row is None else _mapping(row[0])

    def keys(self, prefix: str) -> Iterator[str]:
        """Keys of documents and records under the folder ``prefix``; '/' + 1 is '0', so the folder
        is one range of the ``COLLATE "C"`` key index."""
        low = prefix.rstrip("/") + "/"
        args = self._args(low=low, high=low[:-1] + "0")
        where = f"account_id = %(account)s AND key >= %(low)s AND key < %(high)s AND {VISIBLE}"
        with self._db.connection() as conn:
            rows = conn.execute(f"SELECT key FROM documents WHERE {where} UNION ALL "
                                f"SELECT key FROM records WHERE {where} ORDER BY 1", args).fetchall()
        return iter([str(r[0]) for r in rows])

    def records(self, kind: str) -> Iterator[Record]:
        model = RECORD_MODELS[kind]
        after = ""
        while True:
            with self._db.connection() as conn:
                rows = conn.execute(
                    f"SELECT key, body FROM records WHERE account_id = %(account)s AND kind = %(kind)s "
                    f"AND key > %(after)s AND {VISIBLE} ORDER BY key LIMIT {PAGE}",
                    self._args(kind=kind, after=after)).fetchall()
            for key, body in rows:
                yield parse_model(model, _mapping(body), str(key))
            if len(rows) < PAGE:
                return
            after = str(rows[-1][0])


    def with_semantic_hash(self, prefix: str, hashes: Collection[str]) -> dict[str, list[tuple[str, str]]]:
        """The folder's documents valid at this version whose body carries one of the hashes (the
        index ``documents_semantic_hash``, then the key range)."""
        wanted = list(dict.fromkeys(h for h in hashes if h))
        low = prefix.rstrip("/") + "/"
        found: list[tuple[str, dict[str, Any]]] = []
        for start in range(0, len(wanted), PAGE):
            with self._db.connection() as conn:
                rows = conn.execute(
                    f"SELECT key, body FROM documents WHERE account_id = %(account)s AND key >= %(low)s "
                    f"AND key < %(high)s AND {VISIBLE} AND body ? 'semantic_hash' "
                    "AND body->>'semantic_hash' = ANY(%(hashes)s)",
                    self._args(low=low, high=low[:-1] + "0", hashes=wanted[start:start + PAGE])).fetchall()
            found += [(str(key), _mapping(body)) for key, body in rows]
        return by_hash(found, frozenset(wanted))

    def tags_carried(self, tags: Collection[str]) -> frozenset[str]:
        wanted = list(dict.fromkeys(tags))
        found: set[str] = set()
        for start in range(0, len(wanted), PAGE):
            chunk = wanted[start:start + PAGE]
            with self._db.connection() as conn:
                rows = conn.execute(
                    "SELECT DISTINCT t.tag FROM records AS r, jsonb_array_elements_text(r.body->'tags') AS t(tag) "
                    f"WHERE r.account_id = %(account)s AND r.body->'tags' ?| %(tags)s AND {VISIBLE} "
                    "AND t.tag = ANY(%(tags)s)", self._args(tags=chunk)).fetchall()
            found.update(str(r[0]) for r in rows)
        return frozenset(found)


def _mapping(value: object) -> dict[str, Any]:
    if not isinstance(value, Mapping):
        raise Corrupted(f"a stored body is not a JSON object: {str(value)[:80]}")
    return dict(value)

