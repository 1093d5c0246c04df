"""Importers over REST: another tool's export, sent as its text (the server reads no path)."""

from __future__ import annotations

from typing import Literal

from fastapi import APIRouter
from pydantic import Field

from soulpass.importers import import_text
from soulpass.server.deps import AccountName, Pool
from soulpass.server.models import _In, _Out
from soulpass.server.responses import ERRORS

__all__ = ["router"]

router = APIRouter(prefix="/v1/accounts/{account}", tags=["import"], responses=ERRORS)

ImportSource = Literal["chatgpt", "claude", "mem0", "jsonl"]  # soulpass.importers.FILE_SOURCES


class ImportIn(_In):
    source: ImportSource = Field(description="The tool the export comes from")
    content: str = Field(description="The export file's text: a conversations.json, a Mem0 get_all JSON or a "
                                     "JSONL of messages (docs/importers.md); within the server's body limit")
    dry_run: bool = False


class FailureOut(_Out):
    item: str
    reason: str


class ImportOut(_Out):
    source: str
    dry_run: bool
    imported: dict[str, int] = Field(description="Records stored, by kind")
    duplicates: dict[str, int] = Field(description="Items already in memory (or earlier in the file), by kind")
    failures: list[FailureOut]
    versions: list[int]


@router.post("/import", response_model=ImportOut,
             summary="Import another tool's memories from its export's text; what memory holds is skipped")
def import_memories(account: AccountName, body: ImportIn, pool: Pool) -> ImportOut:
    summary = import_text(pool.get(account), body.source, body.content, dry_run=body.dry_run)
    return ImportOut.model_validate(summary.to_json())
