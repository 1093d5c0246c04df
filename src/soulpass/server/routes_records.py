"""One memory at a time: edit a record, read its history, forget it (issue 15)."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from fastapi import APIRouter, Path, Query
from pydantic import BaseModel, ConfigDict, Field

from soulpass.engine.listing import MAX_LIMIT, record_page
from soulpass.server.deps import AccountName, Caller, Pool
from soulpass.server.responses import ERRORS

__all__ = ["router"]

router = APIRouter(prefix="/v1/accounts/{account}", tags=["records"], responses=ERRORS)

RecordId = Annotated[str, Path(pattern=r"^[A-Za-z]{2}_[0-9]{8}_[0-9]+$", max_length=64, description="Record id")]


class EditIn(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")
    fields: dict[str, Any] = Field(min_length=1, description="The fields to change, with their new values")
    reason: str = Field(default="", max_length=2000)


class EditOut(BaseModel):
    version: int
    record: str
    now: str = Field(description="The id to read now: a new fact's when a fact was edited, else the same")


class ForgetIn(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")
    ids: list[str] = Field(default_factory=list, max_length=1000)
    subject: str | None = Field(default=None, max_length=2000)
    query: str | None = Field(default=None, max_length=2000)
    k: int = Field(default=10, ge=1, le=1000)
    reason: str = Field(min_length=1, max_length=2000)
    dry_run: bool = False


class ForgetOut(BaseModel):
    ids: list[str]
    dry_run: bool
    version: int | None
    rewritten: dict[str, list[int]]
    backups_holding: list[str]


Kind = Literal["episode", "turn_user", "turn_llm", "fact", "sensory"]
At = Annotated[int | None, Query(ge=0, description="Version (default HEAD)")]


@router.get("/records", response_model=dict[str, Any],
            summary="The records of one kind, newest first, a page at a time")
def records(account: AccountName, pool: Pool, kind: Annotated[Kind, Query(description="Which kind")],
            limit: Annotated[int, Query(ge=1, le=MAX_LIMIT, description="Most records in the page")] = 20,
            offset: Annotated[int, Query(ge=0, description="How many of the newest to skip")] = 0,
            at: At = None) -> dict[str, Any]:
    """``{"kind", "version", "offset", "limit", "total", "items", "next_offset"}``; ``next_offset``
    is None on the last page."""
    return record_page(pool.get(account), kind, limit, offset, at)


@router.get("/records/{record_id}", response_model=dict[str, Any], summary="One record, as of a version")
def record(account: AccountName, record_id: RecordId, pool: Pool, at: At = None) -> dict[str, Any]:
    return pool.get(account).show(record_id, at).model_dump(mode="json")


@router.get("/records/{record_id}/history", response_model=list[dict[str, Any]],
            summary="Every version that wrote a record, oldest first, with the fields each changed")
def history(account: AccountName, record_id: RecordId, pool: Pool) -> list[dict[str, Any]]:
    return [step.to_json() for step in pool.get(account).history(record_id)]


@router.patch("/records/{record_id}", response_model=EditOut,
              summary="Edit a record: a new version (a fact is superseded by a new one; history is kept)")
def edit(account: AccountName, record_id: RecordId, body: EditIn, pool: Pool, caller: Caller) -> EditOut:
    acct = pool.get(account)
    version = acct.edit(record_id, reason=body.reason, by=caller.key_id, **body.fields)
    now = next(e.edited_as or record_id for e in reversed(acct.log()) if e.version == version)
    return EditOut(version=version, record=record_id, now=now)


@router.delete("/records/{record_id}", response_model=ForgetOut,
               summary="Forget a record: erased from HEAD, every history copy and the index; a tombstone remains")
def forget_one(account: AccountName, record_id: RecordId, pool: Pool, caller: Caller,
               reason: Annotated[str, Query(min_length=1, max_length=2000, description="Why (kept)")],
               dry_run: bool = False) -> ForgetOut:
    return forget(account, ForgetIn(ids=[record_id], reason=reason, dry_run=dry_run), pool, caller)


@router.post("/forget", response_model=ForgetOut,
             summary="Forget records by id, every fact about a subject, or a query's hits (dry_run lists them)")
def forget(account: AccountName, body: ForgetIn, pool: Pool, caller: Caller) -> ForgetOut:
    with pool.indexed(account) as acct:
        result = acct.forget(body.ids, subject=body.subject, query=body.query, k=body.k, reason=body.reason,
                             by=caller.key_id, dry_run=body.dry_run)
    return ForgetOut(**result.to_json())
