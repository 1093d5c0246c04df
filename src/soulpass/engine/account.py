"""One account: its versions (log, diff, rollback, edit, history, show), its records and documents,
its sandboxes, its derived index and search, and the archive of a sandbox into a version."""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from datetime import datetime
from typing import TYPE_CHECKING, Any, TypeVar

from soulpass.consolidation.outcomes import ArchiveResult, Committed, Planned
from soulpass.engine.sandbox import Sandbox
from soulpass.errors import BackendUnavailable, Conflict, Corrupted, InvalidInput, NotFound
from soulpass.ids import check_name, is_permanent_id, utc_now
from soulpass.index.account import AccountIndex
from soulpass.index.catalog import Filters
from soulpass.index.indexer import BackgroundIndexer
from soulpass.index.relevance import above
from soulpass.index.results import SearchResults, search_results
from soulpass.retrieval.plans import governed_search
from soulpass.sessions import sandbox as sandboxes
from soulpass.sessions.arguments import check_text, library_boundary, strings
from soulpass.sessions.sandbox import SandboxInfo
from soulpass.store import contract
from soulpass.store import keys as store_keys
from soulpass.store.contract import AccountBackend, Change, Hook, Snapshot, VersionEntry
from soulpass.store.versions import diff_entries

if TYPE_CHECKING:  # what only writes, edits, the journal or the graph need loads when first used

    from soulpass.consolidation.preview import ArchivePreview
    from soulpass.consolidation.sandbox_history import SandboxHistory
    from soulpass.engine.forget import ForgetResult
    from soulpass.engine.home import Soulpass
    from soulpass.engine.journal import Journal
    from soulpass.engine.views import Diff, HistoryStep, LogEntry
    from soulpass.prose import JournalEntry
    from soulpass.records import CoreMemory, Document, GKSGraph, Record, StateBlob, UserProfile

    # What ``show`` returns: a record, a journal entry, or a document of the account.
    Shown = Record | JournalEntry | CoreMemory | UserProfile | GKSGraph | StateBlob

logger = logging.getLogger(__name__)

__all__ = ["Account"]

D = TypeVar("D", bound="Document")


def _earlier_copy_readable(store: AccountBackend, entry: VersionEntry) -> bool:
    """Whether the version before ``entry`` still reads one copy ``entry`` replaced or retired
    (True when it replaced nothing a snapshot would need)."""
    version = entry.version
    for path in [*entry.replaced, *entry.retired]:
        if not isinstance(path, str) or version < 2:
            continue
        stem = path.rsplit("/", 1)[-1].rsplit(".", 1)[0]
        before = store.snapshot(version - 1)
        if is_permanent_id(stem):
            return before.record(stem) is not None
        if path.startswith(store_keys.CORE + "/") and path.endswith(".json"):
            return before.document(path) is not None
    return True


@library_boundary
class Account:
    """One account's master state, versions and sandboxes. Safe to share between threads, and a
    process may hold several handles on one account (they share its open vector index)."""

    def __init__(self, sp: Soulpass, store: AccountBackend) -> None:
        self.sp, self.store, self.name = sp, store, store.name
        self._lock = threading.RLock()  # this handle's index: opened once, caught up in place
        self._index: AccountIndex | None = None
        self._indexer: BackgroundIndexer | None = None
        self._cleanup_pending = False  # a commit of this handle left its last steps to recovery
        self._floor: tuple[int, int | None] | None = None  # (HEAD, history_floor) as last found

    # --- sandboxes -------------------------------------------------------------------

    def create_sandbox(self, name: str, sandbox_id: str | None = None) -> Sandbox:
        return Sandbox(self, sandboxes.create_sandbox(self.store, name, sandbox_id))

    def sandbox(self, sandbox_id: str) -> Sandbox:
        """An open sandbox (``Conflict`` for one kept for its history: :meth:`sandbox_history` reads it)."""
        return Sandbox(self, sandboxes.refuse_kept(sandboxes.load_sandbox(self.store, sandbox_id)))

    def sandboxes(self) -> list[SandboxInfo]:
        return [s for s in sandboxes.list_sandboxes(self.store) if s.archived_as is None]

    # --- versions ---------------------------------------------------------------------

    def head(self) -> int:
        """HEAD. After a commit of this handle whose last steps failed (a full disk), recovery is
        tried again first, so the handle reads the version it reported once the disk allows."""
        if self._cleanup_pending:
            self._finish_pending()
        return self.store.head()

    def _finish_pending(self) -> None:
        try:
            self.store.recover()
        except (OSError, BackendUnavailable):
            return  # still failing: HEAD stays where the files are, the next try is the next read
        self._cleanup_pending = False

    def check_version(self, at: int | None) -> int:
        """``at`` if it names a version of this account (HEAD if None); ``NotFound`` past HEAD, and
        before :meth:`history_floor` ("history not carried": that version cannot be read back)."""
        version = self.store.snapshot(at).version
        if at is not None and version < self.head():
            floor = self.history_floor()
            if floor is not None and version < floor:
                raise NotFound(f"history not carried: account {self.name!r} holds no copies replaced before "
                               f"version {floor} (imported from a passport made without history), so version "
                               f"{version} cannot be read back; versions {floor}..{self.head()} can",
                               account=self.name, version=version)
        return version

    def history_floor(self) -> int | None:
        """The oldest version that can be read back when earlier ones cannot (a passport imported
        without history keeps the log but not the copies later versions replaced); None when every
        version can. Found from the log: the newest version whose replaced copy is missing. The
        whole log is read once per handle; then only the versions committed since are (a commit
        keeps the copies it replaces, so an older floor stays the floor)."""
        head = self.head()
        known = self._floor
        if known is not None and known[0] == head:
            return known[1]
        since, floor = known if known is not None and known[0] < head else (0, None)
        for entry in reversed(self.store.log(since, lists=True)):
            if not _earlier_copy_readable(self.store, entry):
                floor = entry.version
                break
        self._floor = (head, floor)  # check_version asks once per record a page reads
        return floor

    def log(self) -> list[LogEntry]:
        """The version log as ``soulpass log`` prints it (a bulk version's id lists left out)."""
        from soulpass.engine.views import LogEntry
        return [LogEntry.of(e) for e in self.store.log(lists=False)]

    def diff(self, a: int, b: int) -> Diff:
        """What changed from version ``a`` to ``b`` (two ints, ``a <= b``): records added, superseded,
        replaced, retired; ``documents`` created, changed or removed, with the keys inside."""
        for field, value in (("a", a), ("b", b)):
            if type(value) is not int:
                raise InvalidInput(f"diff needs two version numbers; {field} is {value!r}", field=field)
            self.check_version(value)
        from soulpass.consolidation.document_diff import document_changes
        from soulpass.engine.views import Diff
        log = self.store.log(a)
        documents = document_changes(log, self.store.snapshot(a), self.store.snapshot(b))
        return Diff.of(diff_entries(log, a, b), documents)

    def rollback(self, target: int, hook: Hook | None = None) -> int:
        """Commit a new version whose content equals version ``target``."""
        from soulpass.consolidation.rollback import plan_rollback
        version = self.check_version(target)
        return self.commit(lambda head: plan_rollback(head, self.store.snapshot(version), self.store.log(version),
                                                      utc_now()), hook=hook)

    def commit(self, plan: Callable[[Snapshot], Change], *, first: Change | None = None,
               hook: Hook | None = None) -> int:
        """Commit what ``plan`` makes of HEAD (``first``, already planned, is tried first); when
        another writer moved HEAD meanwhile, plan again on the new HEAD (a rebase) until it lands.
        Past the commit point the version is returned whatever fails next (logged as a warning;
        recovery finishes it)."""
        change = first or plan(self.store.snapshot())
        while not isinstance(outcome := self.store.commit(change, parent=change.parent, hook=hook),
                             contract.VersionWritten):
            change = plan(self.store.snapshot())
        if outcome.pending is not None:
            self._cleanup_pending = True
            logger.warning("account %s: %s", self.name, outcome.pending)
        return outcome.version

    def record(self, record_id: str, at: int | None = None) -> Record:
        store_keys.kind_of_id(record_id)  # a clear error for what is no record id
        snap = self.store.snapshot(at)
        rec = snap.record(record_id)
        if rec is None:
            raise NotFound(f"record {record_id} does not exist at version {snap.version}", id=record_id)
        return rec

    def edit(self, record_id: str, *, reason: str = "", by: str | None = None, **fields: Any) -> int:
        """Commit a version in which record ``record_id`` (or journal entry ``JE_…``) carries ``fields``
        (engine/editing.py says how)."""
        from soulpass.engine import editing
        if isinstance(record_id, str) and record_id.startswith(editing.JOURNAL_PREFIX):
            found = editing.journal_key(self.store.log(), record_id)
            if found is None:
                raise NotFound(f"journal entry {record_id} does not exist in any version", id=record_id)
            return self.commit(lambda head: editing.plan_journal_edit(head, record_id, found[1], fields, reason, by))
        return self.commit(lambda head: editing.plan_edit(head, record_id, fields, self.sp.rules.semantic, reason, by))

    def adopt(self, *, dry_run: bool = False, by: str | None = "adopt") -> list[dict[str, Any]]:
        """Commit the files edited by hand (``audit``'s ``edited_by_hand``): each edit becomes a
        version of its own, as :meth:`edit` would make it, with the original as committed put back
        first, so it stays in the history (``show --at``). One dict per file: ``key``, ``id``,
        ``fields`` and ``version`` (None on a dry run, or when the original is not kept: then
        nothing is written and ``note`` says why)."""
        from soulpass.engine import editing
        out: list[dict[str, Any]] = []
        for copy in self.store.hand_edits():
            rid = str(copy.edited.get("id", ""))
            row: dict[str, Any] = {"key": copy.key, "id": rid, "committed_at": copy.version, "version": None}
            if copy.original is None:
                row.update(fields=[], note="the original is not kept here (restore it from a backup, or "
                                           "make the change with `soulpass edit`)")
                out.append(row)
                continue
            fields = editing.adopted_fields(copy.original, copy.edited)
            row["fields"] = sorted(fields)
            if not dry_run and self.store.put_back(copy.key) and fields:
                row["version"] = self.edit(rid, reason=f"adopted a hand edit of {copy.key}", by=by, **fields)
            elif not fields:
                row["note"] = "only the layout changed: the committed bytes are back"
            out.append(row)
        return out

    def retag(self, *, dry_run: bool = False, by: str | None = "retag") -> list[dict[str, Any]]:
        """Read again which user turns in force give a standing instruction or preference
        (``soulpass.retrieval.standing``: the tags a turn is stamped with when it is consolidated)
        and commit the ``standing:*`` tags that changed: a turn consolidated before the reader
        knew its kind of statement gets its tag, one the reader no longer reads as standing loses
        it. Each turn is an edit, a version of its own, so it shows in the history and rolls back.
        One dict per turn whose tags change: ``id``, ``added``, ``removed``, ``version`` (None on a
        dry run)."""
        from soulpass.records import TurnUser
        from soulpass.retrieval.standing import TAG_PREFIX, standing_tags
        out: list[dict[str, Any]] = []
        for rec in [r for r in self.records("turn_user") if isinstance(r, TurnUser)]:
            now = standing_tags(rec.text_excerpt)
            was = tuple(t for t in rec.tags if t.startswith(TAG_PREFIX))
            if set(now) == set(was):
                continue
            row: dict[str, Any] = {"id": rec.id, "added": sorted(set(now) - set(was)),
                                   "removed": sorted(set(was) - set(now)), "version": None}
            if not dry_run:
                tags = [*(t for t in rec.tags if not t.startswith(TAG_PREFIX)), *now]
                row["version"] = self.edit(rec.id, reason="standing tags read again", by=by, tags=tags)
            out.append(row)
        return out

    def history(self, record_id: str) -> list[HistoryStep]:
        """Every version that wrote record ``record_id``, oldest first, with the fields it changed."""
        from soulpass.engine import editing
        return editing.record_history(self.store, record_id, self.store.log())

    def forget(self, ids: Iterable[str] = (), **how: Any) -> ForgetResult:
        """Erase records from HEAD, history and index (engine/forget.py: subject, query, reason, by, dry_run)."""
        from soulpass.engine import forget
        return forget.forget(self, ids, **how)

    def records(self, kind: str, at: int | None = None) -> Iterator[Record]:
        if not isinstance(kind, str) or kind not in store_keys.RECORD_DIRS:
            known = ", ".join(store_keys.RECORD_DIRS)
            raise InvalidInput(f"unknown record kind {kind!r} (one of {known})", field="kind")
        return self.store.snapshot(at).records(kind)

    def _document(self, key: str, model: type[D], at: int | None) -> D | None:
        from pydantic import ValidationError
        raw = self.store.snapshot(at).document(key)
        if raw is None:
            return None
        try:
            return model.model_validate(raw)
        except (ValidationError, InvalidInput) as exc:
            raise Corrupted(f"{key} does not match the {model.__name__} schema: {exc}", path=key) from exc

    def core_memory(self, at: int | None = None) -> CoreMemory:
        from soulpass.records import EPOCH, CoreMemory
        return self._document(store_keys.CORE_MEMORY, CoreMemory, at) or CoreMemory(updated_at=EPOCH)

    def user_profile(self, at: int | None = None) -> UserProfile:
        from soulpass.records import EPOCH, UserProfile
        return self._document(store_keys.USER_PROFILE, UserProfile, at) or UserProfile(updated_at=EPOCH)

    def state(self, name: str, at: int | None = None) -> StateBlob | None:
        from soulpass.records import StateBlob
        check_name(name, "state name")
        return self._document(store_keys.state_path(name.removesuffix("_state")), StateBlob, at)

    def states(self, at: int | None = None) -> dict[str, StateBlob]:
        out: dict[str, StateBlob] = {}
        snap = self.store.snapshot(at)
        for rel in snap.keys(store_keys.STATE_DIR):
            name = rel.rsplit("/", 1)[-1].removesuffix("_state.json")
            blob = self.state(name, snap.version)
            if blob is not None:
                out[name] = blob
        return out

    def gks(self, at: int | None = None) -> GKSGraph:
        """The whole knowledge graph assembled from its shards."""
        from soulpass.consolidation.gks import assemble_graph
        return assemble_graph(self.store.snapshot(at))

    def show(self, ref: str, at: int | None = None) -> Shown:
        """A record (by id, a journal entry's too) or a document (``core``, ``profile``, ``gks``,
        ``state:<name>``) as of version ``at`` (default HEAD): its model (``model_dump(mode="json")``
        is what ``soulpass show`` prints)."""
        version = self.check_version(at)
        if not isinstance(ref, str):
            raise InvalidInput(f"ref (a record id or a document name) must be a string, not {type(ref).__name__}",
                               field="ref")
        doc: Shown | None
        if ref == "core":
            doc = self.core_memory(version)
        elif ref == "profile":
            doc = self.user_profile(version)
        elif ref == "gks":
            doc = self.gks(version)
        elif ref.startswith("state:"):
            doc = self.state(ref.split(":", 1)[1], version)
            if doc is None:
                raise NotFound(f"state {ref[6:]!r} does not exist at version {version}", ref=ref)
        elif ref.startswith("JE_"):
            doc = self.journal().get(ref, at=version)[0]
        else:
            store_keys.kind_of_id(ref)
            doc = self.record(ref, version)
        return doc

    # --- the derived index ---------------------------------------------------------------

    @contextmanager
    def exclusive(self) -> Iterator[Account]:
        """This handle's index to the calling thread for the block (a compound read, e.g. a context)."""
        with self._lock:
            yield self

    def index(self) -> AccountIndex:
        """The account's derived index (catalog + vectors), opened once and caught up to HEAD."""
        with self._lock:
            if self._index is not None and self._index.dropped():  # by another handle (a forget)
                self.close()
            if self._index is None:
                self._index = AccountIndex(self.store, self.sp.embedder(), backend=self.sp.vector_backend,
                                           reranker=self.sp.reranker(), late=self.sp.late(),
                                           embed_inline=self.sp.indexing == "inline", fulltext=self.sp.fulltext)
                if self.sp.indexing == "background" and self._index.embedder is not None:
                    self._indexer = BackgroundIndexer(self._index).start()
            self._index.catch_up()  # the catalog (full text) always; vectors inline or by the indexer
            if self._indexer is not None:
                self._indexer.wake()
            return self._index

    def indexer(self) -> BackgroundIndexer | None:
        """The background indexer (``indexing="background"``, once the index is open), else None."""
        return self._indexer

    def search(self, query: str, k: int = 10, *, kinds: Iterable[str] = (), agent: str | None = None,
               tags: Iterable[str] = (), since: datetime | None = None, until: datetime | None = None,
               session_id: str | None = None, persona_id: str | None = None, event_id: str | None = None,
               source: str | None = None, at: int | None = None, min_score: float | None = None) -> SearchResults:
        """Hybrid search (full text + vectors, fused) over what is committed, as of HEAD or ``at``.
        ``.incomplete`` on the result says records not embedded yet may be missing from it;
        ``source`` keeps what one importer or tool brought in (its tag ``source:<source>``);
        ``min_score`` (0 to 1) drops hits of a lower ``soulpass.index.relevance.relevance``."""
        if at is not None:
            self.check_version(at)
        for field, value, kind in (("agent", agent, str), ("session_id", session_id, str),
                                   ("persona_id", persona_id, str), ("event_id", event_id, str),
                                   ("source", source, str), ("since", since, datetime), ("until", until, datetime)):
            if value is not None and not isinstance(value, kind):
                raise InvalidInput(f"{field} must be a {kind.__name__} or None, not {type(value).__name__}",
                                   field=field)
            if isinstance(value, str):
                check_text(value, field)
        filters = Filters(kinds=strings(kinds, "kinds", one=True), agent=agent, tags=strings(tags, "tags", one=True),
                          since=since, until=until, session_id=session_id, persona_id=persona_id, event_id=event_id,
                          source=source, as_of_version=at)
        with self._lock:
            index = self.index()
            found = search_results(index, governed_search(index, query, k, filters))
        if found.dense_error is None and self.sp.embedder_missing is not None:
            found.dense_error = self.sp.embedder_missing  # a core-only install: full text, and it says so
        return above(found, query, min_score)

    def journal(self) -> Journal:
        """The verbatim journal: add entries, look up by tag/time/semantic hash, patterns."""
        from soulpass.engine.journal import Journal
        return Journal(self)

    def close(self) -> None:
        with self._lock:
            if self._indexer is not None:
                self._indexer.stop()
                self._indexer = None
            if self._index is not None:
                self._index.close()
                self._index = None

    def drop_index(self) -> None:
        """Close and delete the derived index (catalog, full text, vectors): the next search
        rebuilds it from the store, re-embedding everything."""
        from soulpass.index.opening import drop_index

        with self._lock:
            self.close()
            drop_index(self.store)

    def bulk_append(self, records: Iterable[Record]) -> int:
        """Fast path for imports and benchmarks: one version, files written straight into place."""
        from soulpass.consolidation.bulk import plan_bulk_append
        batch = list(records)
        return self.commit(lambda head: plan_bulk_append(head, batch, utc_now(), self.sp.rules.semantic))

    # --- archive and discard ------------------------------------------------------------

    def archive(self, sandbox_id: str, *, dry_run: bool = False, exclude: Iterable[str] = (), by: str | None = None,
                reason: str | None = None, may_approve: bool = False, hook: Hook | None = None) -> ArchiveResult:
        """Consolidate a sandbox into version HEAD+1 (``consolidation.archive.archive_sandbox``).

        ``exclude``: item ids (:meth:`preview`) left out; the version entry names them with
        ``by`` and ``reason``. ``may_approve``: whether the caller may approve what the review
        policy (``rules.review``) holds for a person; when it may not and the archive touches
        such an item, nothing is committed and the result is ``AwaitingReview``."""
        from soulpass.consolidation.archive import archive_sandbox
        result = archive_sandbox(self.store, self.sp.rules, self.sp.limits, sandbox_id, dry_run=dry_run,
                                 exclude=exclude, by=by, reason=reason, may_approve=may_approve, hook=hook)
        if isinstance(result, Committed) and result.warning is not None:
            self._cleanup_pending = True  # durable; recovery finishes it (``head`` tries again)
        if self._indexer is not None and isinstance(result, Committed):
            self._indexer.wake()  # committed: the indexer catches up behind this call
        return result

    def approve(self, sandbox_id: str, *, exclude: Iterable[str] = (), by: str | None = None,
                reason: str | None = None, hook: Hook | None = None) -> ArchiveResult:
        """Archive as a person who may approve (the account's owner): what the review policy holds
        is committed too, except the items in ``exclude``."""
        return self.archive(sandbox_id, exclude=exclude, by=by, reason=reason, may_approve=True, hook=hook)

    def preview(self, sandbox_id: str, *, exclude: Iterable[str] = ()) -> ArchivePreview:
        """What archiving the sandbox would commit now, item by item: the plan ``archive`` applies
        (``consolidation.preview``). ``Conflict`` when the sandbox was archived already."""
        result = self.archive(sandbox_id, dry_run=True, exclude=exclude)
        if not isinstance(result, Planned):  # a dry run of a sandbox that is gone
            raise Conflict(f"sandbox {sandbox_id} was archived already", sandbox_id=sandbox_id)
        return result.plan.preview()

    def awaiting_review(self) -> list[ArchivePreview]:
        """The open sandboxes whose archive holds items the review policy leaves to a person, each
        as its preview (planned now: what an approval would commit). Empty when there is no policy."""
        from soulpass.consolidation.rules import ReviewRule
        if self.sp.rules.review == ReviewRule():
            return []  # no policy: nothing ever waits, and no sandbox needs planning
        out = []
        for info in self.sandboxes():
            with contextlib.suppress(NotFound, Conflict):  # archived or discarded meanwhile
                preview = self.preview(info.sandbox_id)
                if preview.needs_review:
                    out.append(preview)
        return out

    def discard(self, sandbox_id: str) -> None:
        sandboxes.discard_sandbox(self.store, sandbox_id)

    # --- kept sandboxes: what an archive left out, readable (consolidation.sandbox_history) ---

    def sandbox_history(self, sandbox_id: str) -> SandboxHistory:
        """A sandbox an archive with exclusions kept: every event of its session log, whether it was
        archived or excluded, and who excluded what and why. ``Conflict`` while it is open,
        ``NotFound`` when none is kept (an archive that left nothing out removes its sandbox)."""
        from soulpass.consolidation.sandbox_history import sandbox_history
        return sandbox_history(self.store, sandbox_id)

    def kept_sandboxes(self) -> list[SandboxInfo]:
        """The sandboxes kept for their history, oldest first (never among :meth:`sandboxes`)."""
        from soulpass.consolidation.sandbox_history import kept_sandboxes
        return kept_sandboxes(self.store)

    def delete_sandbox_history(self, sandbox_id: str) -> None:
        """Remove a kept sandbox and the excluded content it holds, for good; the version entry
        still names what was excluded (ids, kinds, who and why, never the text)."""
        from soulpass.consolidation.sandbox_history import delete_sandbox_history
        delete_sandbox_history(self.store, sandbox_id)
