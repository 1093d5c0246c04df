"""The embedding backlog: records the catalog holds whose vectors are not written yet.

Indexing runs behind writes. Catching up the catalog is cheap and makes new records searchable by
full text at once; embedding is the slow part, so it is split in two steps:

* ``enqueue`` (at every catch-up): the catalog rows of versions after the backlog's watermark whose
  embedded text is not in the vector index yet (by text hash) become backlog entries; entries and
  the new watermark are written in one catalog transaction. Idempotent.
* ``drain`` (inline, or by the background indexer): take the oldest entries, embed their texts
  (locally or through the Redis workers), upsert the vectors (durable on return), record the text
  hashes as embedded, and only then delete the entries.

A crash between any two steps leaves the entry in the backlog; draining it again upserts the same
id, which replaces its vector: every record ends up embedded exactly once in the index, none lost.
The backlog lives in the catalog (``embed_backlog``, ``embed_queued``; migration 004), one set per
embedder (model id + embedding recipe), so another model gets its own backlog.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
import sys
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Protocol

import numpy as np
import numpy.typing as npt

from soulpass.embed.base import Embedder, Vectors
from soulpass.errors import Corrupted
from soulpass.index import passages
from soulpass.index.carried import load_carried
from soulpass.index.catalog import CatalogRow
from soulpass.index.catalog.rows import COLUMNS
from soulpass.index.catalog.schema import configure, transaction
from soulpass.vectors import VectorIndex
from soulpass.vectors.abilities import SharesFolder

__all__ = ["EmbedBacklog", "EmbedFn", "CarriedFirst", "drain_until_empty", "embedded_state", "indexing_embed",
           "text_hash"]

EmbedFn = Callable[[list[str]], Vectors]
Progress = Callable[[int, int], None]
_SELECT = ", ".join(f"c.{col}" for col in COLUMNS)


def indexing_embed(embedder: Embedder, cancelled: Callable[[], bool] | None = None) -> EmbedFn:
    """How the backlog is embedded: the workers' batch path for a remote embedder (bulk work does not
    silently fall back to the local model; ``cancelled`` ends a wait for them), else the embedder."""
    remote_module = sys.modules.get("soulpass.embed.remote")  # not imported: no RemoteEmbedder exists
    if remote_module is not None and isinstance(embedder, remote_module.RemoteEmbedder):
        remote = embedder
        return lambda texts: remote.embed_for_index(texts, cancelled=cancelled)
    return lambda texts: embedder.embed_batch(texts)


def text_hash(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


class Drainable(Protocol):
    def pending(self) -> int: ...

    def drain(self, embed: EmbedFn, limit: int = 256) -> int: ...


def drain_until_empty(backlog: Drainable, embed: EmbedFn, batch: int, progress: Progress | None) -> int:
    """``backlog.drain`` until it has nothing left; returns the entries handled (``progress(done, total)``)."""
    total, done = (backlog.pending() if progress is not None else 0), 0
    while n := backlog.drain(embed, batch):
        done += n
        if progress is not None:
            progress(done, max(total, done))
    return done


class CarriedFirst:
    """Embedding that takes what vectors an import carried hold (``soulpass.index.carried``) before
    the embedder."""

    def __init__(self, carried: Path | None, key: str) -> None:
        self._carried_file, self.key = carried, key
        self._carried: dict[str, npt.NDArray[np.float32]] | None = None

    def embed(self, embed: EmbedFn, texts: list[str]) -> npt.NDArray[np.float32]:
        """``embed(texts)``, taking what the carried vectors hold from them (only the rest is embedded)."""
        if self._carried is None and self._carried_file is not None and self._carried_file.exists():
            try:
                self._carried = load_carried(self._carried_file, self.key) or {}
            except Corrupted:  # derived data: embed everything instead
                self._carried = {}
        if not self._carried:
            return np.asarray(embed(texts), dtype=np.float32)
        hashes = [text_hash(t) for t in texts]
        todo = [n for n, h in enumerate(hashes) if h not in self._carried]
        fresh = np.asarray(embed([texts[n] for n in todo]), dtype=np.float32) if todo else None
        dim = fresh.shape[1] if fresh is not None else len(next(iter(self._carried.values())))
        out = np.empty((len(texts), dim), dtype=np.float32)
        for n, h in enumerate(hashes):
            if h in self._carried:
                out[n] = self._carried[h]
        if fresh is not None:
            out[todo] = fresh
        return out


class EmbedBacklog:
    """The backlog of one embedder over one account's catalog; safe to share between threads.

    ``state_file`` is the embedder's ``*.embedded.sqlite`` (ids and text hashes whose vectors are in
    ``vectors``); ``key`` names the embedder and recipe; ``embed_text`` makes a row's text.
    """

    def __init__(self, catalog_file: Path, state_file: Path, key: str, vectors: VectorIndex,
                 embed_text: Callable[[CatalogRow], str], kinds: Sequence[str], *, busy_timeout: float = 30.0,
                 passages_of: Callable[[CatalogRow], list[str]] | None = None, carried: Path | None = None) -> None:
        """``passages_of``: a row's passage texts, embedded in the same drain (soulpass.index.passages);
        ``carried``: vectors an import brought (soulpass.index.carried), used before the embedder."""
        self.key, self.vectors, self.embed_text, self.kinds = key, vectors, embed_text, tuple(kinds)
        self.passages_of = passages_of
        self._shared = vectors if isinstance(vectors, SharesFolder) else None  # another process may write it
        self._carried = CarriedFirst(carried, key)
        self._lock = threading.RLock()  # one connection pair, used by the caller's and the indexer's thread
        self._draining = threading.Lock()  # one drain at a time
        self._cat = sqlite3.connect(catalog_file, timeout=busy_timeout, isolation_level=None,
                                    check_same_thread=False)
        configure(self._cat, int(busy_timeout * 1000))
        self._state = sqlite3.connect(state_file, timeout=busy_timeout, check_same_thread=False)

    def close(self) -> None:
        with self._lock:
            self._cat.close()
            self._state.close()

    # --- what is pending ------------------------------------------------------------------

    def pending(self) -> int:
        """Records waiting for a vector: backlog entries plus rows of versions not looked at yet."""
        with self._lock:
            queued = self._cat.execute("SELECT count(*) FROM embed_backlog WHERE model = ?", (self.key,)).fetchone()[0]
            upto, _ = self._watermark()
            if upto >= self._store_version():  # every row looked at: only the entries wait
                return int(queued)
            marks = ",".join("?" * len(self.kinds))
            unseen = self._cat.execute(
                f"SELECT count(*) FROM catalog INDEXED BY catalog_version WHERE version > ? AND kind IN ({marks})"
                f" AND text != ''",
                (upto, *self.kinds)).fetchone()[0]
        return int(queued) + int(unseen)

    def _store_version(self) -> int:
        return int(self._cat.execute("SELECT value FROM meta WHERE key = 'store_version'").fetchone()[0])

    def _watermark(self) -> tuple[int, int]:
        got = self._cat.execute("SELECT version, generation FROM embed_queued WHERE model = ?", (self.key,)).fetchone()
        generation = int(self._cat.execute("SELECT value FROM meta WHERE key = 'generation'").fetchone()[0])
        if got is None or int(got[1]) != generation:  # a new or rebuilt catalog: look at every row
            return 0, generation
        return int(got[0]), generation

    # --- enqueue --------------------------------------------------------------------------

    def reset(self) -> None:
        """Look at every row again at the next ``enqueue`` (after a rebuild or lost vectors)."""
        with self._lock, transaction(self._cat):
            _, generation = self._watermark()
            self._cat.execute("INSERT OR REPLACE INTO embed_queued (model, version, generation) VALUES (?, 0, ?)",
                              (self.key, generation))

    def enqueue(self) -> int:
        """Turn the rows the catalog gained since the last call into backlog entries; returns how many."""
        with self._lock:  # every search comes here: nothing new takes no write lock
            if self._watermark()[0] == self._store_version():
                return 0
        with self._lock, transaction(self._cat):
            upto, generation = self._watermark()
            target = self._store_version()
            if target == upto:
                return 0
            marks = ",".join("?" * len(self.kinds))
            latest: dict[str, CatalogRow] = {}
            for values in self._cat.execute(
                    f"SELECT {_SELECT} FROM catalog AS c INDEXED BY catalog_version WHERE c.version > ?"
                    f" AND c.kind IN ({marks})"
                    " ORDER BY c.version, c.id", (upto, *self.kinds)):
                row = CatalogRow.from_sql(values)
                if row.text.strip():
                    latest[row.id] = row
            texts = {rid: self.embed_text(row) for rid, row in latest.items()}
            known = dict(self._state.execute(
                "SELECT id, text_hash FROM embedded WHERE id IN (SELECT value FROM json_each(?))",
                (json.dumps(list(texts)),)).fetchall()) if texts else {}
            todo = [(self.key, rid, h, latest[rid].version) for rid, t in texts.items()
                    if known.get(rid) != (h := text_hash(t))]
            self._cat.executemany("INSERT OR REPLACE INTO embed_backlog (model, id, text_hash, version)"
                                  " VALUES (?, ?, ?, ?)", todo)
            self._cat.execute("INSERT OR REPLACE INTO embed_queued (model, version, generation) VALUES (?, ?, ?)",
                              (self.key, target, generation))
        return len(todo)

    # --- drain ---------------------------------------------------------------------------

    def drain(self, embed: EmbedFn, limit: int = 256) -> int:
        """Embed the oldest ``limit`` entries and remove them; returns how many were handled (0: empty).
        When ``embed`` raises, the entries stay for the next try. A reader of a vector index another
        process writes (``read_only``) drains nothing: that process embeds them."""
        if self._shared is not None and self._shared.read_only:
            return 0
        with self._draining:
            with self._lock:
                todo = self._cat.execute(
                    "SELECT id, text_hash FROM embed_backlog WHERE model = ? ORDER BY version, id LIMIT ?",
                    (self.key, limit)).fetchall()
                rows = self._latest([rid for rid, _ in todo])
            if not todo:
                return 0
            work = [(rid, self.embed_text(rows[rid])) for rid, _ in todo
                    if rid in rows and rows[rid].kind in self.kinds and rows[rid].text.strip()]
            if work:
                extra = {rid: self.passages_of(rows[rid]) for rid, _ in work} if self.passages_of else {}
                texts = [t for _, t in work] + [p for ps in extra.values() for p in ps]
                vectors = self._carried.embed(embed, texts)
                self.vectors.upsert([rid for rid, _ in work], vectors[:len(work)])
                if self.passages_of is not None:
                    with self._lock:
                        before = passages.passage_counts(self._state, list(extra))
                    passages.replace(self.vectors, extra, vectors[len(work):], before)
                with self._lock, self._state:
                    self._state.executemany("INSERT OR REPLACE INTO embedded (id, text_hash) VALUES (?, ?)",
                                            [(rid, text_hash(t)) for rid, t in work])
                    passages.record_passages(self._state, {rid: len(ps) for rid, ps in extra.items()})
            with self._lock, transaction(self._cat):
                self._cat.executemany("DELETE FROM embed_backlog WHERE model = ? AND id = ? AND text_hash = ?",
                                      [(self.key, rid, h) for rid, h in todo])
        return len(todo)

    def drain_all(self, embed: EmbedFn, batch: int = 256, progress: Progress | None = None) -> int:
        """Drain until the backlog is empty; returns the entries handled."""
        return drain_until_empty(self, embed, batch, progress)

    def _latest(self, ids: list[str]) -> dict[str, CatalogRow]:
        if not ids:
            return {}
        latest: dict[str, CatalogRow] = {}
        for values in self._cat.execute(
                f"SELECT {_SELECT} FROM json_each(?) AS w CROSS JOIN catalog AS c INDEXED BY sqlite_autoindex_catalog_1"
                " ON c.id = w.value"
                " ORDER BY c.id, c.version", (json.dumps(ids),)):
            row = CatalogRow.from_sql(values)
            latest[row.id] = row
        return latest


def embedded_state(path: Path, model_id: str) -> sqlite3.Connection:
    """Which record texts are embedded (by text hash), and for which model."""
    path.parent.mkdir(parents=True, exist_ok=True)
    conn = sqlite3.connect(path, timeout=30.0, check_same_thread=False)
    conn.execute("PRAGMA journal_mode=WAL")
    with conn:
        conn.execute("CREATE TABLE IF NOT EXISTS embed_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
        conn.execute("CREATE TABLE IF NOT EXISTS embedded (id TEXT PRIMARY KEY, text_hash TEXT NOT NULL)")
        passages.create_table(conn)  # kept across model changes: it says what the vector folder holds
        conn.execute("INSERT OR IGNORE INTO embed_meta VALUES ('model_id', ?)", (model_id,))
        stored = conn.execute("SELECT value FROM embed_meta WHERE key = 'model_id'").fetchone()[0]
        if stored != model_id:  # another model: its vectors are useless, start over
            conn.execute("DELETE FROM embedded")
            conn.execute("UPDATE embed_meta SET value = ? WHERE key = 'model_id'", (model_id,))
    return conn
