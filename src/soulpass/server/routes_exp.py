"""``GET /v1/accounts/{account}/export``: the account as a passport file (docs/passport.md)."""

from __future__ import annotations

import os
import tempfile
from typing import Annotated

from fastapi import APIRouter, Query
from fastapi.responses import FileResponse
from starlette.background import BackgroundTask

from soulpass.passport import export_account
from soulpass.server.deps import AccountName, Pool
from soulpass.server.responses import ERRORS

__all__ = ["router"]

router = APIRouter(prefix="/v1/accounts/{account}", tags=["passport"], responses=ERRORS)


@router.get("/export", response_class=FileResponse,
            responses={200: {"content": {"application/zip": {}}, "description": "The passport (a zip)"}},
            summary="The account as one verified passport file (zip); the manifest digest is in a header")
def export(account: AccountName, pool: Pool,
           history: Annotated[bool, Query(description="Include every superseded copy")] = False,
           vectors: Annotated[bool, Query(description="Include the vectors (an import then embeds nothing "
                                                      "again)")] = False) -> FileResponse:
    fd, target = tempfile.mkstemp(prefix="soulpass-export-", suffix=".soulpass")
    os.close(fd)
    try:
        res = export_account(pool.engine, account, target, history=history, vectors=vectors)
    except BaseException:
        os.unlink(target)
        raise
    return FileResponse(target, media_type="application/zip", filename=f"{account}.soulpass",
                        headers={"X-Soulpass-Manifest-Sha256": res.manifest_sha256},
                        background=BackgroundTask(os.unlink, target))
