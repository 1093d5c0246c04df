"""Passages: the parts of a record that get a vector of their own beside the record's.

One vector for a whole turn blurs it when the turn says several things ("Hi! Since we last talked
I had a little car accident, and the insurance…"): a question about one of them matches the mix
weakly. So a short record (up to ``SHORT_TEXT`` characters) of two sentences or more also gets a
vector per sentence (at most ``MAX_PASSAGES``: more sentences are grouped, in order), and its dense
score is the best of its own cosine and its passages'. Measured on LoCoMo (``soulpass bench
locomo``): R@10 0.791 -> 0.80, NDCG@10 0.600 -> 0.606; restricting passages to long turns (150+
characters) loses the gain.

A long record is not cut into sentences: an assistant's 4,000-character reply has 40 of them, and a
vector per sentence made indexing a user-assistant chat crawl (BEAM-500K: 4.3 turns/s). Embedding
costs what it reads, so a long record gets what it needs to be found by meaning and no more:
- up to ``LONG_TEXT`` characters, its own vector only, of its opening (``EMBED_CHARS``, about 128
  tokens, the length MiniLM was trained on), where a reply says what it is about; full text covers
  the rest. Measured on the first five BEAM-500K conversations (89 questions, dense alone, R@10):
  the first 500 characters 0.451, the first 1,000 (256 tokens, all the model reads) 0.438, and the
  shorter input embeds five times faster;
- beyond that (a pasted document, a transcript), also ``MAX_PASSAGES`` windows of
  ``WINDOW_CHARS`` spread evenly over the text, so a question about its middle or end can match.

Passage vectors live in the record's vector index under ``<record id>#<n>`` and are written in the
same drain as the record's own (soulpass.index.backlog); how many a record has is kept in the
embedding state (table ``passages``), so a search can ask for exactly those ids.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterable, Sequence
from itertools import pairwise

import numpy as np
import numpy.typing as npt

from soulpass.sentences import sentences as split_sentences
from soulpass.vectors.base import Matrix, VectorIndex

__all__ = ["EMBED_CHARS", "LONG_TEXT", "MAX_PASSAGES", "SHORT_TEXT", "WINDOW_CHARS", "best_in_array",
           "best_per_record", "create_table", "of", "passage_counts", "passage_id", "passage_ids", "record_of",
           "record_passages", "replace", "sentences", "total", "windows"]

MAX_PASSAGES = 8
SHORT_TEXT = 1_000  # up to here a record of several sentences gets a vector per sentence
LONG_TEXT = 8_000  # beyond here a record also gets MAX_PASSAGES windows spread over it
EMBED_CHARS = 500  # what of a record's text its own vector reads (about 128 tokens)
WINDOW_CHARS = EMBED_CHARS
SEP = "#"  # record ids never contain it (soulpass.ids)


def sentences(text: str) -> list[str]:
    """The sentences of ``text`` as passages: none for one sentence (the record's vector covers
    it), at most ``MAX_PASSAGES`` (neighbouring sentences grouped when there are more)."""
    parts = split_sentences(text)
    if len(parts) < 2:
        return []
    if len(parts) > MAX_PASSAGES:  # MAX_PASSAGES groups of neighbouring sentences, sizes differing by one at most
        size, longer = divmod(len(parts), MAX_PASSAGES)
        starts = [n * size + min(n, longer) for n in range(MAX_PASSAGES + 1)]
        parts = [" ".join(parts[a:b]) for a, b in pairwise(starts)]
    return parts


def of(text: str) -> list[str]:
    """The passages of a record's text: sentences when it is short, nothing when it is of
    middling length, evenly spread windows when it is very long (see the module's doc)."""
    if len(text) <= SHORT_TEXT:
        return sentences(text)
    if len(text) <= LONG_TEXT:
        return []
    return windows(text)


def windows(text: str, n: int = MAX_PASSAGES, size: int = WINDOW_CHARS) -> list[str]:
    """``n`` windows of about ``size`` characters, the first at the start and the last at the end,
    each beginning at a word boundary."""
    text = text.strip()
    if len(text) <= size:
        return [text] if text else []
    step = (len(text) - size) / max(1, n - 1)
    out = []
    for i in range(n):
        start = round(i * step)
        if start > 0:  # start at the next word, not mid-word
            space = text.find(" ", start, start + 100)
            start = space + 1 if space >= 0 else start
        out.append(text[start:start + size].strip())
    return [w for w in dict.fromkeys(out) if w]


def passage_id(record_id: str, n: int) -> str:
    return f"{record_id}{SEP}{n}"


def record_of(vector_id: str) -> str:
    """The record a vector belongs to (itself for a record's own vector)."""
    return vector_id.split(SEP, 1)[0]


def best_per_record(hits: Iterable[tuple[str, float]]) -> dict[str, float]:
    """Vector hits (records' and passages') as the best cosine per record."""
    best: dict[str, float] = {}
    for vid, score in hits:
        rid = record_of(vid)
        if score > best.get(rid, -2.0):
            best[rid] = score
    return best


def replace(index: VectorIndex, found: dict[str, list[str]], vectors: Matrix, before: dict[str, int]) -> None:
    """Upsert the passage vectors of records (``found``: record id -> its passages, in the order of
    ``vectors``) and delete those a record had ``before`` and no longer has."""
    ids = [passage_id(rid, n) for rid, ps in found.items() for n in range(len(ps))]
    if ids:
        index.upsert(ids, vectors)
    stale = [passage_id(rid, n) for rid, had in before.items() for n in range(len(found.get(rid, ())), had)]
    if stale:
        index.delete(stale)


def create_table(conn: sqlite3.Connection) -> None:
    conn.execute("CREATE TABLE IF NOT EXISTS passages (id TEXT PRIMARY KEY, n INTEGER NOT NULL)")


def passage_counts(conn: sqlite3.Connection, ids: Sequence[str]) -> dict[str, int]:
    """How many passage vectors each of ``ids`` has (those without any are left out)."""
    if not ids:
        return {}
    return dict(conn.execute("SELECT id, n FROM passages WHERE id IN (SELECT value FROM json_each(?))",
                             (json.dumps(list(ids)),)).fetchall())


def passage_ids(conn: sqlite3.Connection, ids: Sequence[str]) -> dict[str, tuple[str, ...]]:
    """Record id -> its passages' vector ids, for those of ``ids`` that have passages."""
    return {rid: tuple(passage_id(rid, n) for n in range(k)) for rid, k in passage_counts(conn, ids).items()}


def best_in_array(ids: Sequence[str], passage_ids: dict[str, tuple[str, ...]],
                  scores: npt.NDArray[np.float32]) -> dict[str, float]:
    """``best_per_record`` where ``scores`` are those of ``ids`` then of their passages
    (``passage_ids``' vector ids, in its order), -2 (or less) where a vector is missing: no id is parsed."""
    best = scores[:len(ids)].copy()
    if len(scores) > len(ids):
        at = {rid: n for n, rid in enumerate(ids)}
        owner = np.fromiter((at[rid] for rid, vids in passage_ids.items() for _ in vids), dtype=np.intp,
                            count=len(scores) - len(ids))
        np.maximum.at(best, owner, scores[len(ids):])
    return {rid: score for rid, score in zip(ids, best.tolist(), strict=True) if score > -2.0}


def record_passages(conn: sqlite3.Connection, counts: dict[str, int]) -> None:
    """Write how many passages each record now has (in the caller's transaction)."""
    conn.executemany("DELETE FROM passages WHERE id = ?", [(rid,) for rid, n in counts.items() if n == 0])
    conn.executemany("INSERT OR REPLACE INTO passages (id, n) VALUES (?, ?)",
                     [(rid, n) for rid, n in counts.items() if n > 0])


def total(conn: sqlite3.Connection) -> int:
    return int(conn.execute("SELECT coalesce(sum(n), 0) FROM passages").fetchone()[0])
