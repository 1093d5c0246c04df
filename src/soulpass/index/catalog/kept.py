"""What ranking reads of its candidates besides their scores, kept while the catalog is unchanged.

A search ranks a few hundred candidates by their sessions and by the turns next to them there;
reading those from SQLite for every search is a quarter of a small account's search. While the
catalog stays as it was (this connection's changes and SQLite's ``data_version``, which moves when
another connection commits) the answers stand, so they are kept (``Kept``), the way full text keeps
its last query's matches.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable, Hashable, Sequence
from typing import Any, TypeVar

__all__ = ["Kept", "fetch_rows", "fetch_sessions", "last_row"]

V = TypeVar("V")
_NONE = object()  # the catalog has no answer for this id
ANSWERS_KEPT = 20_000  # answers kept at most (~8 MB; then it starts again): a small account whole


def fetch_sessions(conn: sqlite3.Connection, by_id: str, ids: Sequence[str],
                   as_of_version: int | None = None) -> dict[str, str | None]:
    """The session (None: none) of each of ``ids`` the catalog knows: of its latest copy, or of the one
    on disk at ``as_of_version``. ``by_id``: the catalog table, looked up by id (``c``)."""
    sql = f"SELECT c.id, c.session_id FROM json_each(?) AS w CROSS JOIN {by_id} ON c.id = w.value"
    params: list[Any] = [json.dumps(list(ids))]
    if as_of_version is not None:
        sql += " WHERE c.version <= ? AND (c.replaced_at IS NULL OR c.replaced_at > ?)"
        params += [as_of_version, as_of_version]
    fetched = conn.execute(sql + " ORDER BY c.id, c.version", params).fetchall()
    return dict(fetched)  # later copies come later in the key order: the last one wins


def fetch_rows(conn: sqlite3.Connection, by_id: str, where: str, params: Sequence[Any],
               ids: Sequence[str]) -> dict[str, tuple[int, ...]]:
    """The catalog rows of each of ``ids`` passing ``where`` (``filter_sql``'s condition over ``c``);
    ids with none left out."""
    found: dict[str, tuple[int, ...]] = {}
    sql = f"SELECT c.row, c.id FROM json_each(?) AS w CROSS JOIN {by_id} ON c.id = w.value WHERE {where}"
    for row, rid in conn.execute(sql, (json.dumps(list(ids)), *params)):
        found[rid] = (*found.get(rid, ()), row)
    return found


def last_row(conn: sqlite3.Connection) -> int:
    """About how many rows the catalog holds: its last row number (no count over every row)."""
    return int(conn.execute("SELECT coalesce(max(row), 0) FROM catalog").fetchone()[0])


class Kept:
    """Answers about ids (their sessions, their neighbours, by a key naming the question) kept while
    the catalog is unchanged; an id the catalog does not answer for is kept as such. At most
    ``most`` answers, then it starts again; nothing is kept while ``rows(conn)`` (the catalog's
    size) is above ``most``: a large account's candidates are seldom asked for twice, and starting
    again every few searches would only add the time to free what was kept. Its caller holds the
    catalog's lock."""

    def __init__(self, most: int = ANSWERS_KEPT, rows: Callable[[sqlite3.Connection], int] | None = None) -> None:
        self._most, self._rows = most, rows
        self._state: tuple[int, int] | None = None
        self._keeping = True
        self._kept: dict[Hashable, dict[str, Any]] = {}
        self._size = 0

    def get(self, conn: sqlite3.Connection, key: Hashable, wanted: Sequence[str],
            fetch: Callable[[Sequence[str]], dict[str, V]]) -> dict[str, V]:
        """``fetch``'s answer for ``wanted`` (ids it does not answer for left out), asking it only
        for the ids not kept under ``key``."""
        state = (conn.total_changes, int(conn.execute("PRAGMA data_version").fetchone()[0]))
        if state != self._state:
            self._state, self._kept, self._size = state, {}, 0
            self._keeping = self._rows is None or self._rows(conn) <= self._most
        if not self._keeping:
            return fetch(wanted)
        kept = self._kept.setdefault(key, {})
        missing = [i for i in wanted if i not in kept]
        if missing:
            if self._size + len(missing) > self._most:  # start again: every one of ``wanted`` is asked
                self._kept, self._size = {key: {}}, 0
                kept, missing = self._kept[key], list(wanted)
            found = fetch(missing)
            for i in missing:
                kept[i] = found.get(i, _NONE)
            self._size += len(missing)
        return {i: value for i in wanted if (value := kept[i]) is not _NONE}
