"""What ranking reads of its candidates besides their scores (``Traits``), and a cache of them.

A search ranks a few hundred candidates by their kind, session, speaker, text length and whether
they ask something; reading those from SQLite (the length and the question marks counted over the
text) was ~0.4 ms of a 2.7 ms LoCoMo search. A copy never changes, so the traits of the latest
copies are kept while the catalog stays as it was (this connection's changes and SQLite's
``data_version``, which moves when another connection commits), the way full text keeps its last
query's matches.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable, Sequence
from typing import Any

from .rows import ASKS_SQL, Traits

__all__ = ["TraitsCache", "fetch_traits"]

TRAITS_KEPT = 20_000  # traits kept at most (~8 MB; then the cache starts again): a small account whole


def fetch_traits(conn: sqlite3.Connection, by_id: str, ids: Sequence[str],
                 as_of_version: int | None = None) -> dict[str, Traits]:
    """The traits of each of ``ids`` the catalog knows: its latest copy, or the one on disk at
    ``as_of_version``. ``by_id``: the catalog table, looked up by id (``c``)."""
    sql = (f"SELECT c.id, c.kind, c.session_id, c.agent, length(c.text), {ASKS_SQL}"
           f" FROM json_each(?) AS w CROSS JOIN {by_id} ON c.id = w.value")
    params: list[Any] = [json.dumps(list(ids))]
    if as_of_version is not None:
        sql += " WHERE c.version <= ? AND (c.replaced_at IS NULL OR c.replaced_at > ?)"
        params += [as_of_version, as_of_version]
    fetched = conn.execute(sql + " ORDER BY c.id, c.version", params).fetchall()
    # Later copies come later in the key order: the last one wins.
    return {rid: Traits(kind, session, agent, length or 0, bool(asks))
            for rid, kind, session, agent, length, asks in fetched}


class TraitsCache:
    """The traits of latest copies, kept while the catalog is unchanged (its caller holds its lock)."""

    def __init__(self, most: int = TRAITS_KEPT) -> None:
        self._most = most
        self._state: tuple[int, int] | None = None
        self._kept: dict[str, Traits] = {}

    def get(self, conn: sqlite3.Connection, wanted: Sequence[str],
            fetch: Callable[[Sequence[str]], dict[str, Traits]]) -> dict[str, Traits]:
        """The traits of ``wanted`` (unknown ids left out), fetching those not kept."""
        state = (conn.total_changes, int(conn.execute("PRAGMA data_version").fetchone()[0]))
        if state != self._state:
            self._state, self._kept = state, {}
        missing = [i for i in wanted if i not in self._kept]
        if missing:
            if len(self._kept) + len(missing) > self._most:
                self._kept = {}
            self._kept.update(fetch(missing))
        kept = self._kept
        return {i: kept[i] for i in wanted if i in kept}
