"""The Sandboxes page and a sandbox's review page: what agents are about to remember, before it is
archived. Approve and discard are POSTs guarded like the other actions (the ``SameSite=Strict`` key
cookie) and go through :func:`_act`, the one place that decides who may act on a sandbox."""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, Response

from soulpass.server.ui import review_views
from soulpass.server.ui.routes import _account, _page

__all__ = ["router"]

router = APIRouter(prefix="/ui", include_in_schema=False)


@router.get("/a/{account}/sandboxes", response_class=HTMLResponse)
def sandboxes(request: Request, account: str) -> Response:
    key, acct = _account(request, account)
    return _page(request, "sandboxes.html", {"key": key, "account": account, "rows": review_views.sandbox_rows(acct),
                                             "head": acct.head()})
