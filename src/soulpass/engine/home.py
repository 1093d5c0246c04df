"""The home: ``soulpass.open(home)`` -> :class:`Soulpass`, which hands out accounts and keeps
what every account of the home shares (rules, limits, the embedder, the reranker)."""

from __future__ import annotations

import contextlib
import os
import reprlib
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from soulpass.embed.base import Embedder
from soulpass.embed.colbert import LateScorer
from soulpass.embed.rerank import Reranker
from soulpass.engine.account import Account
from soulpass.engine.sandbox import Sandbox
from soulpass.errors import BackendUnavailable, InvalidInput, NotFound
from soulpass.ids import check_name
from soulpass.index.catalog import FullText
from soulpass.sessions.arguments import library_boundary
from soulpass.sessions.buffer import Limits
from soulpass.store.location import locate
from soulpass.store.open import open_backend
from soulpass.vectors import VectorBackend

if TYPE_CHECKING:
    from soulpass.consolidation.rules import Rules
    from soulpass.engine.deleting import AccountDeleted, AccountKeys

__all__ = ["EmbedderChoice", "Indexing", "LateChoice", "RerankerChoice", "Soulpass", "open"]

EmbedderChoice = Embedder | Literal["auto", "none"]
RerankerChoice = Reranker | Literal["auto", "none"]
LateChoice = LateScorer | Literal["auto", "none"]
Indexing = Literal["inline", "background", "deferred"]


def open(home: str | Path, *, rules: Rules | None = None, limits: Limits | None = None,
         embedder: EmbedderChoice = "auto", vector_backend: VectorBackend = "hnsw",
         reranker: RerankerChoice = "none", indexing: Indexing = "inline", fulltext: FullText | None = None,
         late: LateChoice = "none") -> Soulpass:
    """Open (or start) a Soulpass home folder, or the accounts of a ``postgresql://`` URL (extra ``postgres``).

    ``embedder``: "auto" loads the embedded MiniLM when the ``embed`` extra is installed (full text
    only otherwise), "none" never embeds, or pass any :class:`soulpass.embed.Embedder`.
    ``reranker``: "none" (default), "auto" (the cross-encoder of the ``rerank`` extra re-orders the
    best 30 hits; ~0.3 s a search on 2 cores; an error when the extra is missing), or a
    :class:`soulpass.embed.rerank.Reranker`.
    ``late``: "none" (default), "auto" (answerai-colbert-small-v1 of the ``rerank`` extra scores every
    candidate by late interaction, a ``late`` part of each hit; docs/performance.md has its costs), or a
    :class:`soulpass.embed.colbert.LateScorer`.
    ``indexing``: "inline" embeds new records when the index catches up (before a search); "background"
    leaves them to a thread (``soulpass.index.indexer``): archives and searches never wait for embedding,
    and searches say when records are not embedded yet; "deferred" only queues them (another process,
    e.g. ``soulpass index drain``, embeds them). Pass a
    :class:`soulpass.embed.remote.RemoteEmbedder` as ``embedder`` to embed on Redis workers.
    ``fulltext``: "fts5" or "tantivy" (extra ``search``) ranks full text, recorded in each account's
    index for every later handle; None: what the index records, else FTS5.
    """
    return Soulpass(home, rules=rules, limits=limits, embedder=embedder, vector_backend=vector_backend,
                    reranker=reranker, indexing=indexing, fulltext=fulltext, late=late)


@library_boundary
class Soulpass:
    def __init__(self, home: str | Path, *, rules: Rules | None = None, limits: Limits | None = None,
                 embedder: EmbedderChoice = "auto", vector_backend: VectorBackend = "hnsw",
                 reranker: RerankerChoice = "none", indexing: Indexing = "inline", fulltext: FullText | None = None,
         late: LateChoice = "none") -> None:
        if not isinstance(home, str | os.PathLike) or "\x00" in str(home):
            raise InvalidInput(f"home must be a folder or a postgresql:// URL, not {reprlib.repr(home)}", field="home")
        if indexing not in ("inline", "background", "deferred"):
            raise InvalidInput(f"indexing must be inline, background or deferred, not {indexing!r}", field="indexing")
        self.indexing, self.fulltext = indexing, fulltext
        # A folder is the files backend's home; a postgresql:// URL names the database, and ``home``
        # is then the local folder of what this process derives from it (indexes, server key file).
        where = locate(home)
        self.home = where.local
        self.location = where.name  # for messages: no password
        self.backend = open_backend(home if where.kind == "postgresql" else self.home)
        self._rules = rules  # the defaults are built when first needed (an archive, not a search)
        self.limits = limits or Limits()
        self.vector_backend = vector_backend
        self._embedder_choice = embedder
        self._embedder: Embedder | None = None
        self.embedder_missing: str | None = None  # why "auto" found no model: searches say full text only
        self._reranker_choice = reranker
        self._reranker: Reranker | None = None
        if late not in ("auto", "none") and not isinstance(late, LateScorer):
            raise InvalidInput(f"late must be 'auto', 'none' or a LateScorer, not {reprlib.repr(late)}", field="late")
        self._late_choice = late
        self._late: LateScorer | None = None

    @property
    def rules(self) -> Rules:
        from soulpass.consolidation.rules import Rules
        self._rules = self._rules or Rules()
        return self._rules

    def reranker(self) -> Reranker | None:
        """The cross-encoder that re-orders search hits, if one was asked for (loaded once)."""
        if self._reranker is None and self._reranker_choice != "none":
            if self._reranker_choice == "auto":
                from soulpass.embed.rerank import MsMarcoReranker

                self._reranker = MsMarcoReranker()
            else:
                self._reranker = self._reranker_choice
        return self._reranker

    def late(self) -> LateScorer | None:
        """The late-interaction scorer of search candidates, if one was asked for (loaded once)."""
        if self._late is None and self._late_choice != "none":
            if self._late_choice == "auto":
                from soulpass.embed.colbert import ColbertScorer

                self._late = ColbertScorer()
            else:
                self._late = self._late_choice
        return self._late

    def embedder(self) -> Embedder | None:
        """The embedder for search (loaded once, on first use)."""
        if self._embedder is None and self._embedder_choice != "none":
            if self._embedder_choice == "auto":
                try:
                    from soulpass.embed.minilm import MiniLM

                    self._embedder = MiniLM()
                except BackendUnavailable as exc:
                    self._embedder_choice = "none"  # full text only, and every search says so
                    self.embedder_missing = f"{exc}; a search finds the words it is given, not what they mean"
            else:
                self._embedder = self._embedder_choice
        return self._embedder

    def accounts(self) -> list[str]:
        return self.backend.accounts()

    def account(self, name: str, *, create: bool = False) -> Account:
        return Account(self, self.backend.open(name, create=create))

    def create_account(self, name: str) -> Account:
        return self.account(name, create=True)

    def delete_account(self, name: str, *, confirm: str, by: str | None = None,
                       keys: AccountKeys | None = None) -> AccountDeleted:
        """Erase account ``name`` for good: its versions, history, sandboxes, index, vectors, local
        caches and the backups kept in the home; ``keys`` (the home's key store,
        ``soulpass.server.keyring.key_store(sp)``) loses its keys too. ``confirm`` must be the name
        again. A tombstone (who, when; no content) goes to the home's deletion log
        (:meth:`deletions`). Close this process's other handles on the account first."""
        from soulpass.engine.deleting import delete_account
        acct = self.account(name)  # NotFound before anything is touched
        version = acct.head()
        acct.close()
        return delete_account(self, name, confirm=confirm, by=by, keys=keys, version=version)

    def deletions(self) -> list[dict[str, Any]]:
        """The tombstones of the accounts deleted from this home, oldest first."""
        return self.backend.deletions()

    def find_sandbox(self, sandbox_id: str) -> Sandbox:
        """The sandbox with this id in whichever account holds it."""
        check_name(sandbox_id, "sandbox id")
        for name in self.accounts():
            with contextlib.suppress(NotFound):
                return self.account(name).sandbox(sandbox_id)
        raise NotFound(f"sandbox {sandbox_id} does not exist in {self.home}", sandbox_id=sandbox_id)
