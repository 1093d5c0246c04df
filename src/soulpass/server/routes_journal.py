"""Journal entries (write through a sandbox, look up what is committed) and the account audit."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Path, Query, status
from pydantic import Field

from soulpass.integrity import audit
from soulpass.server.deps import AccountName, Pool, SandboxId
from soulpass.server.models import WrittenOut, _In, _Out
from soulpass.server.responses import ERRORS

__all__ = ["router"]

router = APIRouter(prefix="/v1/accounts/{account}", tags=["journal"], responses=ERRORS)

EntryType = Literal["journal", "experiment", "reflection", "conversation"]


class JournalIn(_In):
    text: str = Field(description="The verbatim body (Markdown)")
    type: EntryType = "journal"
    title: str = ""
    tags: list[str] = Field(default_factory=list)
    core_insight: str = ""
    brief_summary: str = ""
    timestamp: datetime | None = None
    agent: str | None = None


class JournalItemOut(_Out):
    id: str
    type: str
    path: str
    timestamp: datetime | None
    tags: list[str]
    semantic_hash: str
    version: int


class AuditOut(_Out):
    account: str
    ok: bool
    store_version: int
    catalog_version: int | None
    index_lag: int  # versions the index is behind the store: caught up by the next search, not a finding
    files: int
    rows_in_force: int
    findings: list[dict[str, str]]


@router.post("/sandboxes/{sandbox_id}/journal", response_model=WrittenOut, status_code=status.HTTP_201_CREATED,
             summary="Write a journal entry (journal, experiment, reflection, conversation) to the session")
def write_journal(account: AccountName, sandbox_id: SandboxId, body: JournalIn, pool: Pool) -> WrittenOut:
    sb = pool.get(account).sandbox(sandbox_id)
    return WrittenOut(id=sb.add_journal(body.text, type=body.type, title=body.title, tags=body.tags,
                                        core_insight=body.core_insight, brief_summary=body.brief_summary,
                                        timestamp=body.timestamp, agent=body.agent))


@router.get("/journal", response_model=list[JournalItemOut],
            summary="Committed journal entries by tag (any of), time range and type, oldest first")
def find_journal(account: AccountName, pool: Pool, tag: Annotated[list[str], Query()] = [],  # noqa: B006
                 since: datetime | None = None, until: datetime | None = None, type: EntryType | None = None,
                 at: Annotated[int | None, Query(ge=0)] = None) -> list[JournalItemOut]:
    with pool.indexed(account) as acct:
        items = acct.journal().find(tags=tag, since=since, until=until, type=type, at=at)
    return [JournalItemOut(id=i.id, type=i.type, path=i.path, timestamp=i.timestamp, tags=list(i.tags),
                           semantic_hash=i.semantic_hash, version=i.version) for i in items]


@router.get("/journal/{entry_id}", response_model=dict[str, Any], summary="One committed journal entry")
def get_journal(account: AccountName, pool: Pool,
                entry_id: Annotated[str, Path(pattern=r"^JE_\d{8}_\d{3,9}$")]) -> dict[str, Any]:
    with pool.indexed(account) as acct:
        entry, path = acct.journal().get(entry_id)
    return {**entry.model_dump(mode="json"), "path": path}


@router.get("/audit", response_model=AuditOut,
            summary="Check files against the index: missing files, orphans, hash mismatches, drift")
def audit_account(account: AccountName, pool: Pool) -> AuditOut:
    with pool.indexed(account) as acct:
        acct.close()  # the audit opens the index itself, without catching it up
        report = audit(pool.engine, account)
    return AuditOut.model_validate(report.to_json())
