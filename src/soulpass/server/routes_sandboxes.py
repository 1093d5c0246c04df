"""Sandboxes: open one, write to its session buffer, read the buffer, search it, archive or discard;
read or delete the history of one an archive kept (it left items out)."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Body, Path, Query, Request, Response, status
from fastapi import status as status_codes

from soulpass.consolidation.preview import ArchivePreview
from soulpass.consolidation.sandbox_history import SandboxHistory
from soulpass.engine import AlreadyArchived, ArchiveResult, AwaitingReview, Committed, Sandbox, Unchanged
from soulpass.errors import Conflict
from soulpass.ids import MAX_NAME_LENGTH
from soulpass.records import SessionBuffer
from soulpass.server import access
from soulpass.server.deps import AccountName, Approves, Caller, Forbidden, Pool, SandboxId
from soulpass.server.models import (
    NAME_PATTERN,
    ApproveIn,
    ArchiveIn,
    ArchiveOut,
    CoreIn,
    FactIn,
    SandboxIn,
    SandboxOut,
    SearchIn,
    SearchOut,
    SensoryIn,
    StateIn,
    TurnIn,
    WrittenOut,
)
from soulpass.server.responses import ERRORS
from soulpass.server.review_notice import ReviewNotice

__all__ = ["archive_out", "router", "search_kwargs"]

router = APIRouter(prefix="/v1/accounts/{account}/sandboxes", tags=["sandboxes"], responses=ERRORS)
CREATED = status.HTTP_201_CREATED


def _sandbox(pool: Pool, account: str, sandbox_id: str) -> Sandbox:
    return pool.get(account).sandbox(sandbox_id)


def archive_out(result: ArchiveResult, response: Response | None = None) -> ArchiveOut:
    """The archive's answer; ``AwaitingReview`` sets ``response`` to 202 (accepted, not committed)."""
    if isinstance(result, AlreadyArchived):
        return ArchiveOut(status="already_archived", version=result.version)
    summary = result.plan.summary()  # its version is HEAD when the sandbox held nothing to store
    status = {Unchanged: "unchanged", Committed: "committed", AwaitingReview: "awaiting_review"}.get(
        type(result), "planned")
    warning = result.warning if isinstance(result, Committed) else None
    held = [i.id for i in result.plan.items if i.review is not None]
    if isinstance(result, AwaitingReview):
        summary["version"] = result.version  # nothing committed: HEAD
        if response is not None:
            response.status_code = status_codes.HTTP_202_ACCEPTED
    return ArchiveOut(status=status, version=int(summary["version"]), summary=summary, warning=warning,
                      items=list(result.plan.items), needs_review=held)


def search_kwargs(body: SearchIn) -> dict[str, Any]:
    return {"kinds": tuple(body.kinds), "agent": body.agent, "tags": tuple(body.tags), "since": body.since,
            "until": body.until, "session_id": body.session_id, "persona_id": body.persona_id,
            "event_id": body.event_id, "source": body.source, "min_score": body.min_score}


@router.get("", response_model=list[SandboxOut], summary="Live sandboxes")
def list_sandboxes(account: AccountName, pool: Pool) -> list[SandboxOut]:
    return [SandboxOut.of(i) for i in pool.get(account).sandboxes()]


@router.post("", response_model=SandboxOut, status_code=CREATED, summary="Open a sandbox on the current version")
def create_sandbox(account: AccountName, body: SandboxIn, pool: Pool) -> SandboxOut:
    acct = pool.get(account)
    if body.sandbox_id is not None and any(i.sandbox_id == body.sandbox_id for i in acct.sandboxes()):
        raise Conflict(f"sandbox {body.sandbox_id} already exists", sandbox_id=body.sandbox_id)
    return SandboxOut.of(acct.create_sandbox(body.name, body.sandbox_id).info)


@router.get("/{sandbox_id}", response_model=SandboxOut, summary="One sandbox")
def get_sandbox(account: AccountName, sandbox_id: SandboxId, pool: Pool) -> SandboxOut:
    return SandboxOut.of(_sandbox(pool, account, sandbox_id).info)


@router.delete("/{sandbox_id}", status_code=status.HTTP_204_NO_CONTENT,
               summary="Discard the sandbox and its buffer; the master is untouched")
def discard_sandbox(account: AccountName, sandbox_id: SandboxId, pool: Pool) -> None:
    pool.get(account).discard(sandbox_id)


@router.get("/{sandbox_id}/buffer", response_model=SessionBuffer,
            summary="The session buffer (the seed's session-buffer schema)")
def get_buffer(account: AccountName, sandbox_id: SandboxId, pool: Pool) -> SessionBuffer:
    return _sandbox(pool, account, sandbox_id).buffer()


@router.post("/{sandbox_id}/turns", response_model=WrittenOut, status_code=CREATED,
             summary="Append a user or agent turn")
def write_turn(account: AccountName, sandbox_id: SandboxId, body: TurnIn, pool: Pool) -> WrittenOut:
    return WrittenOut(id=_sandbox(pool, account, sandbox_id).add_turn(body.speaker, body.text, **body.fields))


@router.post("/{sandbox_id}/episodes", response_model=WrittenOut, status_code=CREATED,
             summary="Append an episode (V3, or the seed's shape with inline turn_1/turn_2)")
def write_episode(account: AccountName, sandbox_id: SandboxId, pool: Pool,
                  body: Annotated[dict[str, Any], Body(description="The episode")]) -> WrittenOut:
    return WrittenOut(id=_sandbox(pool, account, sandbox_id).write_episode(body))


@router.post("/{sandbox_id}/facts", response_model=WrittenOut, status_code=CREATED,
             summary="Propose a semantic fact (validated and merged at archive)")
def write_fact(account: AccountName, sandbox_id: SandboxId, body: FactIn, pool: Pool) -> WrittenOut:
    sb = _sandbox(pool, account, sandbox_id)
    return WrittenOut(id=sb.add_fact(body.subject, body.predicate, body.object, confidence=body.confidence,
                                     content=body.content, source_refs=body.source_refs),
                      warning=sb.fact_warning(body.confidence))


@router.post("/{sandbox_id}/states/{name}", response_model=WrittenOut, status_code=CREATED,
             summary="Set keys of a named state (latest wins at archive)")
def write_state(account: AccountName, sandbox_id: SandboxId, body: StateIn, pool: Pool,
                name: Annotated[str, Path(pattern=NAME_PATTERN, max_length=MAX_NAME_LENGTH)]) -> WrittenOut:
    _sandbox(pool, account, sandbox_id).update_state(name, body.data)
    return WrittenOut()


@router.post("/{sandbox_id}/profile", response_model=WrittenOut, status_code=CREATED,
             summary="Update the user profile (merged at archive)")
def write_profile(account: AccountName, sandbox_id: SandboxId, body: StateIn, pool: Pool) -> WrittenOut:
    _sandbox(pool, account, sandbox_id).update_profile(body.data)
    return WrittenOut()


@router.post("/{sandbox_id}/core", response_model=WrittenOut, status_code=CREATED,
             summary="Propose a change to core memory (careful merge at archive)")
def write_core(account: AccountName, sandbox_id: SandboxId, body: CoreIn, pool: Pool) -> WrittenOut:
    _sandbox(pool, account, sandbox_id).propose_core(body.section, body.value, key=body.key,
                                                     confidence=body.confidence, reason=body.reason)
    return WrittenOut()


@router.post("/{sandbox_id}/sensory", response_model=WrittenOut, status_code=CREATED,
             summary="Store a raw input (text, a page's content) as a sensory record")
def write_sensory(account: AccountName, sandbox_id: SandboxId, body: SensoryIn, pool: Pool) -> WrittenOut:
    sb = _sandbox(pool, account, sandbox_id)
    return WrittenOut(id=sb.add_sensory(body.content, source=body.source, modality=body.modality,
                                        media_type=body.media_type))


@router.post("/{sandbox_id}/archive", response_model=ArchiveOut,
             responses={202: {"model": ArchiveOut, "description": "Awaiting review: the review policy holds "
                              "items for a person; nothing committed, the sandbox stays open"}},
             summary="Consolidate the sandbox into the next master version (202 while it awaits review)")
def archive(account: AccountName, sandbox_id: SandboxId, body: ArchiveIn, pool: Pool, key: Caller,
            approves: Approves, request: Request, response: Response) -> ArchiveOut:
    if body.exclude and not approves:
        raise Forbidden("excluding items from an archive needs a key that may approve (the owner's)")
    result = pool.get(account).archive(sandbox_id, dry_run=body.dry_run, exclude=body.exclude,
                                       by=access.approver(key), reason=body.reason, may_approve=approves)
    notice: ReviewNotice | None = request.app.state.review_notice
    if isinstance(result, AwaitingReview) and notice is not None:
        notice(account, result)
    return archive_out(result, response)


@router.get("/{sandbox_id}/preview", response_model=ArchivePreview,
            summary="What archiving the sandbox would commit now, item by item (the plan archive applies)")
def preview(account: AccountName, sandbox_id: SandboxId, pool: Pool,
            exclude: Annotated[list[str], Query(description="Item ids to leave out")] = []) -> ArchivePreview:  # noqa: B006
    return pool.get(account).preview(sandbox_id, exclude=exclude)


@router.post("/{sandbox_id}/approve", response_model=ArchiveOut,
             summary="Approve and archive what the review policy holds, except the excluded items")
def approve(account: AccountName, sandbox_id: SandboxId, body: ApproveIn, pool: Pool, key: Caller,
            approves: Approves) -> ArchiveOut:
    if not approves:
        raise Forbidden("approving an archive needs a key that may approve (the owner's)")
    return archive_out(pool.get(account).approve(sandbox_id, exclude=body.exclude, by=access.approver(key),
                                                 reason=body.reason))


@router.get("/{sandbox_id}/history", response_model=SandboxHistory,
            summary="A kept sandbox's history: every event, archived or excluded (who, why), with its text")
def sandbox_history(account: AccountName, sandbox_id: SandboxId, pool: Pool) -> SandboxHistory:
    return pool.get(account).sandbox_history(sandbox_id)


@router.delete("/{sandbox_id}/history", status_code=status.HTTP_204_NO_CONTENT,
               summary="Delete a kept sandbox and what it holds, for good (the version entry still names "
                       "what was excluded)")
def delete_sandbox_history(account: AccountName, sandbox_id: SandboxId, pool: Pool) -> None:
    pool.get(account).delete_sandbox_history(sandbox_id)


@router.post("/{sandbox_id}/search", response_model=SearchOut,
             summary="Search what the sandbox sees: the master as of its parent plus its own buffer")
def search_sandbox(account: AccountName, sandbox_id: SandboxId, body: SearchIn, pool: Pool) -> SearchOut:
    with pool.indexed(account) as acct:
        hits = acct.sandbox(sandbox_id).search(body.query, body.k, **search_kwargs(body))
    return SearchOut.of(hits, body.query)
