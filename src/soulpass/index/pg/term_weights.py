"""The weights of a full-text query's terms among one account's rows in PostgreSQL
(:class:`TermWeights`): each term's inverse document frequency and document frequency, as
``PgCatalog``'s full-text search ranks by them.

The GIN index over ``index_rows.tsv`` holds every account's rows, so counting a term through it
reads every account's postings of the term. A small account's counts are read once in one pass over
its own rows instead (``ts_stat``); the counts, the rows in force (the IDFs' N) and each term's
lexeme are remembered by the handle under one rule: the same generation, rows within a tenth.
"""

from __future__ import annotations

import math
import re
import time
from collections.abc import Callable
from typing import Any

from soulpass.index.catalog.query import query_terms

__all__ = ["DF_CAP", "LEXEMES_KEPT", "SMALL_ACCOUNT", "TermWeights"]

_IDF_CACHE = 4_096  # terms whose document frequency a handle remembers
DF_CAP = 500  # document frequencies are counted up to here (see ``TermWeights.counted``)
RECOUNT_S = 60.0  # rows in force (the IDFs' N) past SMALL_ACCOUNT are counted again at most this often
SMALL_ACCOUNT = 10_000
# An account of at most SMALL_ACCOUNT rows in force has every lexeme's document frequency read in one
# pass over its rows (``ts_stat``) and remembered, if it holds at most this many lexemes; a term is
# then counted on its own only where the pass did not see its lexeme (a word written since).
LEXEMES_KEPT = 50_000
_LEXEME = re.compile(r"^'([^']+)'$")  # a term's tsquery of one lexeme (``plainto_tsquery(...)::text``)

State = Callable[[Any], tuple[int, str, int]]  # conn -> the account's (store version, stamp, generation)


class TermWeights:
    """The term weights of the account ``account``; ``read_state`` reads its index state on a
    connection (``PgCatalog._state``). Safe to share between threads: each remembered value is read
    and written whole, and one dropped meanwhile (a memory cleared at its bound) is counted again."""

    def __init__(self, account: int, read_state: State) -> None:
        self.account, self._read_state = account, read_state
        self._idf: dict[str, tuple[tuple[int, int], float]] = {}  # term -> ((rows, generation), df)
        self._rows_in_force: tuple[int, int, float, int] | None = None  # (generation, version, when, rows)
        self._common: tuple[float, dict[str, float]] | None = None  # (when, lexeme -> share of the table)
        # (rows, generation) -> every lexeme's rows in force, or None where the account has too many
        self._lexemes: tuple[tuple[int, int], dict[str, int] | None] | None = None
        self._lexeme_of: dict[str, str] = {}  # term -> its tsquery as text ('' for a stop word)

    def forget(self) -> None:
        """Remember nothing: every term counted again, as in a fresh process."""
        self._idf, self._rows_in_force, self._common, self._lexemes, self._lexeme_of = {}, None, None, None, {}

    def counted(self, conn: Any, terms: list[str]) -> list[tuple[str, float, int]]:
        """Each term's inverse document frequency among the rows in force and its document frequency,
        rarest first; terms the configuration drops (stop words) are left out. A frequency is counted
        in the account up to ``DF_CAP`` (each row counted is a heap page read); a term found that
        often takes its share of the table from PostgreSQL's statistics of the column (ANALYZE's
        most common lexemes) times the account's rows, or ``DF_CAP`` if it has none. A small
        account's counts are read off one pass over its rows where it saw the term's lexeme
        (``_counted_in_pass``): the same numbers. Remembered per handle until the rows in force
        change by a tenth, or a rebuild."""
        total, generation = self._size(conn)
        new = [t for t in dict.fromkeys(terms) if not self._counted(t, total, generation)]
        if new:
            counted = self._counted_in_pass(conn, new, total, generation)
            seen = {term for term, _, _ in counted}
            rest = [t for t in new if t not in seen]
            if rest:
                counted += conn.execute(
                    "SELECT t.term, plainto_tsquery('english', t.term)::text, (SELECT count(*) FROM (SELECT 1"
                    " FROM index_rows WHERE account_id = %s AND valid_to IS NULL"
                    " AND tsv @@ plainto_tsquery('english', t.term) LIMIT %s) AS m)"
                    " FROM unnest(%s::text[]) AS t(term)", (self.account, DF_CAP, rest)).fetchall()
            common = self._common_lexemes(conn) if any(n >= DF_CAP for _, _, n in counted) else {}
            if len(self._idf) + len(new) > _IDF_CACHE:
                self._idf.clear()
            for term, lexeme, n in counted:
                df = float(n)
                if n >= DF_CAP:
                    df = max(df, common.get(lexeme.strip("'"), 0.0) * total)
                self._idf[term] = ((total, generation), df)
        return self._weighed(terms, total)

    def _counted_in_pass(self, conn: Any, terms: list[str], total: int,
                         generation: int) -> list[tuple[str, str, int]]:
        """``(term, its tsquery as text, rows holding it up to DF_CAP)`` of the ``terms`` whose one
        lexeme the account's pass over its rows saw (``_lexemes_in_force``; none past SMALL_ACCOUNT
        rows or LEXEMES_KEPT lexemes), and of those that are stop words; the others are left to be
        counted one by one."""
        lexemes = self._lexemes_in_force(conn, total, generation)
        if lexemes is None:
            return []
        unknown = [t for t in terms if t not in self._lexeme_of]
        if unknown:
            if len(self._lexeme_of) + len(unknown) > _IDF_CACHE:
                self._lexeme_of.clear()
            self._lexeme_of.update(conn.execute(
                "SELECT t.term, plainto_tsquery('english', t.term)::text FROM unnest(%s::text[]) AS t(term)",
                (unknown,)).fetchall())
        out = []
        for term in terms:
            query = self._lexeme_of.get(term)
            if query == "":
                out.append((term, query, 0))
            elif query is not None and (one := _LEXEME.match(query)) and one.group(1) in lexemes:
                out.append((term, query, min(lexemes[one.group(1)], DF_CAP)))
        return out

    def _lexemes_in_force(self, conn: Any, total: int, generation: int) -> dict[str, int] | None:
        """Every lexeme of the account's rows in force with the rows holding it, read in one pass
        over them (``ts_stat``) while the account has at most SMALL_ACCOUNT rows in force, and kept
        as the terms' counts are (the same generation, rows within a tenth); None past
        SMALL_ACCOUNT rows or LEXEMES_KEPT lexemes. Each term would otherwise be counted on its own
        through the full-text index, which holds every account's rows."""
        if total > SMALL_ACCOUNT:
            return None
        kept = self._lexemes
        if kept is None or not _holds(kept[0], total, generation):
            rows = conn.execute(
                "SELECT word, ndoc FROM ts_stat(format('SELECT tsv FROM index_rows WHERE account_id = %%s"
                " AND valid_to IS NULL', %s::bigint)) LIMIT %s", (self.account, LEXEMES_KEPT + 1)).fetchall()
            kept = self._lexemes = ((total, generation), dict(rows) if len(rows) <= LEXEMES_KEPT else None)
        return kept[1]

    def _weighed(self, terms: list[str], total: int) -> list[tuple[str, float, int]]:
        """``counted`` from the counted document frequencies of ``terms`` among ``total`` rows."""
        out = []
        for term in terms:
            df = int(self._idf[term][1])
            if df:
                out.append((term, math.log(1 + (max(total, df) - df + 0.5) / (df + 0.5)), df))
        out.sort(key=lambda w: (w[2], w[0]))
        return out

    def of_query(self, conn: Any, query: str) -> list[tuple[str, float, int]]:
        """The weights of ``query``'s terms (see ``counted``) as this handle's last full-text search
        counted them, without a statement; counted on ``conn`` where a term was not."""
        terms = query_terms(query)
        kept = self._rows_in_force
        if kept is not None and all(self._counted(t, kept[3], kept[0]) for t in terms):
            return self._weighed(terms, kept[3])  # what ``counted`` gives while the rows stay as counted
        return self.counted(conn, terms) if terms else []

    def _counted(self, term: str, total: int, generation: int) -> bool:
        """Whether ``term``'s remembered document frequency holds for ``total`` rows in force of
        ``generation``: counted in that generation, among rows within a tenth of ``total``."""
        cached = self._idf.get(term)
        return cached is not None and _holds(cached[0], total, generation)

    def _common_lexemes(self, conn: Any) -> dict[str, float]:
        """The share of ``index_rows`` holding each of its most common lexemes, from the column's
        statistics (empty until PostgreSQL has analysed the table), read again every ``RECOUNT_S``."""
        now = time.monotonic()
        if self._common is None or now - self._common[0] >= RECOUNT_S:
            row = conn.execute(
                "SELECT most_common_elems::text::text[], most_common_elem_freqs FROM pg_stats"
                " WHERE schemaname = current_schema() AND tablename = 'index_rows' AND attname = 'tsv'").fetchone()
            shares = dict(zip(row[0], map(float, row[1]), strict=False)) if row and row[0] else {}
            self._common = (now, shares)
        return self._common[1]

    def _size(self, conn: Any) -> tuple[int, int]:
        """Rows in force and the generation. Counted again after a rebuild, after each new version
        while the account is small, and at most every ``RECOUNT_S`` past that: counting a million
        rows takes a fifth of a second, and N moves the IDFs little between two counts."""
        version, _, generation = self._read_state(conn)
        now = time.monotonic()
        cached = self._rows_in_force
        if (cached is None or cached[0] != generation
                or (cached[1] != version and (cached[3] < SMALL_ACCOUNT or now - cached[2] >= RECOUNT_S))):
            total = int(conn.execute("SELECT count(*) FROM index_rows WHERE account_id = %s AND valid_to IS NULL",
                                     (self.account,)).fetchone()[0])
            cached = self._rows_in_force = (generation, version, now, total)
        return cached[3], generation


def _holds(counted_at: tuple[int, int], total: int, generation: int) -> bool:
    """The one rule for every remembered count: what was counted among ``counted_at`` (rows in
    force, generation) still holds for ``total`` rows of ``generation``: the same generation, rows
    within a tenth."""
    return counted_at[1] == generation and abs(counted_at[0] - total) <= total // 10
