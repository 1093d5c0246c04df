"""The sandboxes awaiting review: what the review policy (``rules: review``) holds for a person."""

from __future__ import annotations

from fastapi import APIRouter

from soulpass.consolidation.preview import ArchivePreview
from soulpass.server.deps import AccountName, Pool
from soulpass.server.responses import ERRORS

__all__ = ["router"]

router = APIRouter(prefix="/v1/accounts/{account}", tags=["sandboxes"], responses=ERRORS)


@router.get("/reviews", response_model=list[ArchivePreview],
            summary="Open sandboxes holding items the review policy leaves to a person, each as its preview")
def awaiting_review(account: AccountName, pool: Pool) -> list[ArchivePreview]:
    return pool.get(account).awaiting_review()
