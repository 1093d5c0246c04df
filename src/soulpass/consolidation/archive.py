"""Archiving a sandbox: plan its buffer against HEAD, commit it as the next version (planning again
when another writer moved HEAD), and close the sandbox; ``Account.archive`` is this plus waking the
background indexer. Loaded by the first archive: opening an account and searching never need it."""

from __future__ import annotations

import contextlib
from collections.abc import Iterable

from soulpass.consolidation.outcomes import (
    AlreadyArchived,
    ArchiveResult,
    AwaitingReview,
    Committed,
    Planned,
    Unchanged,
)
from soulpass.consolidation.plan import ConsolidationPlan, plan_consolidation
from soulpass.consolidation.preview import Exclusion, check_exclusion
from soulpass.consolidation.rules import Rules
from soulpass.errors import BackendUnavailable, InvalidInput, NotFound
from soulpass.ids import utc_now
from soulpass.records import BufferEvent
from soulpass.sessions import sandbox as sandboxes
from soulpass.sessions.buffer import Limits
from soulpass.sessions.sandbox import SandboxInfo
from soulpass.store import contract
from soulpass.store.contract import AccountBackend, Hook

__all__ = ["archive_sandbox"]


def archive_sandbox(store: AccountBackend, rules: Rules, limits: Limits, sandbox_id: str, *, dry_run: bool = False,
                    exclude: Iterable[str] = (), by: str | None = None, reason: str | None = None,
                    may_approve: bool = True, hook: Hook | None = None) -> ArchiveResult:
    """Consolidate a sandbox into version HEAD+1 (rebasing when HEAD moved on); a sandbox with
    nothing to store commits no version (``Unchanged``) and is removed all the same.

    The buffer's lock is held throughout, so no write is between the plan and the commit, and
    a second archive (or a discard) waits; when another sandbox's archive moves HEAD between
    the plan and the commit, the store says so and the plan is made again on the new HEAD.

    ``exclude`` (item ids, ``preview.PreviewItem.id``) are left out: planned as if never written,
    named in the version entry with ``by`` and ``reason``. When a planned item needs review
    (``rules.review``) and ``may_approve`` is false, nothing is committed: ``AwaitingReview``.

    Past the commit point the result is ``Committed`` whatever fails next (its ``warning`` says
    what recovery finishes); an error raised means this call committed nothing."""
    for name, flag in (("dry_run", dry_run), ("may_approve", may_approve)):
        if type(flag) is not bool:
            raise InvalidInput(f"{name} must be true or false, not {flag!r}", field=name)
    for name, text in (("by", by), ("reason", reason)):
        if text is not None and not isinstance(text, str):
            raise InvalidInput(f"{name} must be a string or None, not {type(text).__name__}", field=name)
    try:
        info = sandboxes.load_sandbox(store, sandbox_id)
    except NotFound:
        return _already_archived(store, sandbox_id)
    buffer = info.buffer(limits)
    with buffer.locked():
        events: list[BufferEvent] | None = None
        while True:
            # Again after every HEAD move: recovery run by that commit (this process's own earlier
            # try, finished now) may have archived this very sandbox.
            try:
                info = info.current()  # a discard or another archive may have had the lock first
            except NotFound:
                return _already_archived(store, sandbox_id)
            if info.archived_as is not None:
                return _finished(store, sandbox_id, info.archived_as)
            if events is None:
                events = buffer.events()
                exclusion = Exclusion(check_exclusion(exclude, events, sandbox_id), by, reason)
            plan = _plan_archive(store, rules, info, events, exclusion)
            if dry_run:
                return Planned(plan)
            if not may_approve and any(i.review is not None for i in plan.items):
                return AwaitingReview(sandbox_id, plan.base_version, plan)
            if plan.empty:  # nothing to store (maybe only after a rebase): no version, the sandbox closes all the same
                info.remove()
                return Unchanged(sandbox_id, plan.base_version, plan)
            outcome = store.commit(plan.change, parent=plan.version - 1, hook=hook)
            if isinstance(outcome, contract.VersionWritten):
                return Committed(plan.version, plan, _close(info, outcome.pending, keep=plan.keeps_sandbox))


def _close(info: SandboxInfo, pending: str | None, *, keep: bool) -> str | None:
    """Remove an archived sandbox, unless its commit keeps it (``keep``: items were left
    out, and stay readable in its history); what is left after the commit point (``pending``, a
    removal that failed) is said, not raised: the version is committed, recovery finishes the rest.

    Removed even while the commit's last steps are pending (its ``ARCHIVED.json`` may not be in
    place yet): an append to it now is refused, never acknowledged and then swept away. A kept one
    may take such an append until recovery puts the marker in place; its history shows it as
    appended after the archive (``consolidation.sandbox_history``)."""
    if keep:
        return pending
    try:
        info.remove()
    except (OSError, BackendUnavailable) as exc:
        return (f"{pending or 'version committed'}; removing sandbox {info.sandbox_id} failed too ({exc}), "
                "recovery removes it at the next commit or open")
    return pending


def _plan_archive(store: AccountBackend, rules: Rules, info: SandboxInfo, events: list[BufferEvent],
                  exclusion: Exclusion) -> ConsolidationPlan:
    head = store.snapshot()
    parent = head if info.parent_version == head.version else store.snapshot(info.parent_version)
    return plan_consolidation(head, info, events, rules, utc_now(), parent=parent, exclusion=exclusion)


def _finished(store: AccountBackend, sandbox_id: str, version: int) -> AlreadyArchived:
    """A sandbox whose archive committed earlier (its marker says so) but is still there: the
    commit's last steps failed. Recovery finishes them now, so HEAD and the log show ``version``
    to this process as to a fresh one; a disk still full leaves that for the next try."""
    with contextlib.suppress(OSError, BackendUnavailable):
        store.recover()
    return AlreadyArchived(sandbox_id, version)


def _already_archived(store: AccountBackend, sandbox_id: str) -> AlreadyArchived:
    """A sandbox that is gone: archived (the log names its version) or never there (``NotFound``).
    Recovery runs first: an archive whose last steps were left pending has its line in the log then."""
    with contextlib.suppress(OSError, BackendUnavailable):
        store.recover()
    for entry in reversed(store.log(lists=False)):
        if entry.source_sandbox == sandbox_id:
            return AlreadyArchived(sandbox_id, entry.version)
    raise NotFound(f"sandbox {sandbox_id} does not exist in account {store.name}", sandbox_id=sandbox_id,
                   account=store.name)
