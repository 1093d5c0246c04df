"""Archiving a sandbox: plan its buffer against HEAD, commit it as the next version (planning again
when another writer moved HEAD), and close the sandbox; ``Account.archive`` is this plus waking the
background indexer. Loaded by the first archive: opening an account and searching never need it."""

from __future__ import annotations

from soulpass.consolidation.outcomes import AlreadyArchived, ArchiveResult, Committed, Planned, Unchanged
from soulpass.consolidation.plan import ConsolidationPlan, plan_consolidation
from soulpass.consolidation.rules import Rules
from soulpass.errors import InvalidInput, NotFound
from soulpass.ids import utc_now
from soulpass.records import BufferEvent
from soulpass.sessions import sandbox as sandboxes
from soulpass.sessions.buffer import Limits
from soulpass.sessions.sandbox import SandboxInfo
from soulpass.store import contract
from soulpass.store.contract import AccountBackend, Hook

__all__ = ["archive_sandbox"]


def archive_sandbox(store: AccountBackend, rules: Rules, limits: Limits, sandbox_id: str, *, dry_run: bool = False,
                    hook: Hook | None = None) -> ArchiveResult:
    """Consolidate a sandbox into version HEAD+1 (rebasing when HEAD moved on); a sandbox with
    nothing to store commits no version (``Unchanged``) and is removed all the same.

    The buffer's lock is held throughout, so no write is between the plan and the commit, and
    a second archive (or a discard) waits; when another sandbox's archive moves HEAD between
    the plan and the commit, the store says so and the plan is made again on the new HEAD."""
    if type(dry_run) is not bool:
        raise InvalidInput(f"dry_run must be true or false, not {dry_run!r}", field="dry_run")
    try:
        info = sandboxes.load_sandbox(store, sandbox_id)
    except NotFound:
        return _already_archived(store, sandbox_id)
    buffer = info.buffer(limits)
    with buffer.locked():
        try:
            info = info.current()  # a discard or another archive may have had the lock first
        except NotFound:
            return _already_archived(store, sandbox_id)
        if info.archived_as is not None:
            return AlreadyArchived(sandbox_id, info.archived_as)
        events = buffer.events()
        plan = _plan_archive(store, rules, info, events)
        if dry_run:
            return Planned(plan)
        while not plan.empty:
            outcome = store.commit(plan.change, parent=plan.version - 1, hook=hook)
            if isinstance(outcome, contract.Committed):
                info.remove()
                break
            plan = _plan_archive(store, rules, info, events)
        else:  # nothing to store (maybe only after a rebase): no version, the sandbox closes all the same
            info.remove()
            return Unchanged(sandbox_id, plan.base_version, plan)
    return Committed(plan.version, plan)


def _plan_archive(store: AccountBackend, rules: Rules, info: SandboxInfo,
                  events: list[BufferEvent]) -> ConsolidationPlan:
    head = store.snapshot()
    parent = head if info.parent_version == head.version else store.snapshot(info.parent_version)
    return plan_consolidation(head, info, events, rules, utc_now(), parent=parent)


def _already_archived(store: AccountBackend, sandbox_id: str) -> AlreadyArchived:
    """A sandbox that is gone: archived (the log names its version) or never there (``NotFound``)."""
    for entry in reversed(store.log(lists=False)):
        if entry.source_sandbox == sandbox_id:
            return AlreadyArchived(sandbox_id, entry.version)
    raise NotFound(f"sandbox {sandbox_id} does not exist in account {store.name}", sandbox_id=sandbox_id,
                   account=store.name)
