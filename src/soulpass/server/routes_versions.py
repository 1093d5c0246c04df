"""Versions (log, diff, show at a version, rollback) and search over the committed master."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Path, Query, Response

from soulpass.engine.listing import MAX_LIMIT, log_page
from soulpass.server.deps import AccountName, Pool
from soulpass.server.models import RollbackIn, SearchIn, SearchOut, VersionOut
from soulpass.server.responses import ERRORS
from soulpass.server.routes_sandboxes import search_kwargs

__all__ = ["router"]

router = APIRouter(prefix="/v1/accounts/{account}", tags=["versions"], responses=ERRORS)

REF_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._:-]*$"


@router.get("/versions", response_model=list[dict[str, Any]],
            summary="The version log, a page at a time: the entries after `since`, oldest first")
def log(account: AccountName, pool: Pool, response: Response,
        since: Annotated[int, Query(ge=0, description="Entries of the versions after this one")] = 0,
        limit: Annotated[int, Query(ge=1, le=MAX_LIMIT, description="Most entries in the page")] = 100,
        ) -> list[dict[str, Any]]:
    """One entry per version (what it added, replaced, retired). When more follow, the response
    carries ``X-Next-Since`` (pass it as ``since``) and a ``Link: <…>; rel="next"`` header."""
    entries, next_since = log_page(pool.get(account), since, limit)
    if next_since is not None:
        response.headers["X-Next-Since"] = str(next_since)
        response.headers["Link"] = f'</v1/accounts/{account}/versions?since={next_since}&limit={limit}>; rel="next"'
    return [e.to_json() for e in entries]


@router.get("/diff", response_model=dict[str, Any], summary="What changed between versions a and b")
def diff(account: AccountName, pool: Pool, a: Annotated[int, Query(ge=0)],
         b: Annotated[int, Query(ge=0)]) -> dict[str, Any]:
    return pool.get(account).diff(a, b).to_json()


@router.get("/show/{ref}", response_model=dict[str, Any],
            summary="A record (by id) or a document (core, profile, gks, state:<name>) at a version")
def show(account: AccountName, pool: Pool, ref: Annotated[str, Path(pattern=REF_PATTERN, max_length=200)],
         at: Annotated[int | None, Query(ge=0, description="Version (default HEAD)")] = None) -> dict[str, Any]:
    return pool.get(account).show(ref, at).model_dump(mode="json")


@router.post("/rollback", response_model=VersionOut,
             summary="Commit a new version equal to an earlier one (history is kept)")
def rollback(account: AccountName, body: RollbackIn, pool: Pool) -> VersionOut:
    return VersionOut(version=pool.get(account).rollback(body.version))


@router.post("/search", response_model=SearchOut, tags=["search"],
             summary="Hybrid search (full text + vectors) over the committed master, as of HEAD or `at`")
def search(account: AccountName, body: SearchIn, pool: Pool) -> SearchOut:
    with pool.indexed(account) as acct:
        hits = acct.search(body.query, body.k, at=body.at, **search_kwargs(body))
    return SearchOut.of(hits, body.query)
