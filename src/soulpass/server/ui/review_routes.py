"""The Sandboxes page and a sandbox's review page: what agents are about to remember, before it is
archived. Approve and discard are POSTs guarded like the other actions (the ``SameSite=Strict`` key
cookie, a form on our own page) and go through :func:`_act`, the one place that acts on a sandbox
for a person, so who may approve is decided there."""

from __future__ import annotations

from typing import Annotated, Literal

from fastapi import APIRouter, Form, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response

from soulpass.consolidation.outcomes import AlreadyArchived, AwaitingReview, Committed, Planned, Unchanged
from soulpass.engine import Account
from soulpass.errors import InvalidInput, SoulpassError
from soulpass.server import access
from soulpass.server.keys import ApiKey
from soulpass.server.ui import review_views
from soulpass.server.ui.routes import _account, _error, _page

__all__ = ["router"]

router = APIRouter(prefix="/ui", include_in_schema=False)
Act = Literal["all", "ticked", "discard"]


@router.get("/a/{account}/sandboxes", response_class=HTMLResponse)
def sandboxes(request: Request, account: str) -> Response:
    key, acct = _account(request, account)
    awaiting = review_views.awaiting_review(acct)
    return _page(request, "sandboxes.html", {"key": key, "account": account, "head": acct.head(),
                                             "rows": review_views.sandbox_rows(acct, awaiting),
                                             "kept": review_views.kept_rows(acct),
                                             "awaiting_review": len(awaiting)})


def _review_page(request: Request, key: ApiKey, account: str, acct: Account, sandbox_id: str,
                 notice: str = "") -> Response:
    try:
        r = review_views.review_view(acct, sandbox_id)
    except SoulpassError as exc:
        return _error(request, key, account, exc)
    return _page(request, "review.html", {"key": key, "account": account, "r": r, "notice": notice})


@router.get("/a/{account}/sandboxes/{sandbox_id}", response_class=HTMLResponse)
def review(request: Request, account: str, sandbox_id: str) -> Response:
    """An open sandbox's review page; a kept one's history (an owner's: it shows what was left out)."""
    key, acct = _account(request, account)
    if review_views.is_kept(acct, sandbox_id):
        try:
            h = review_views.history_view(acct, sandbox_id)
        except SoulpassError as exc:
            return _error(request, key, account, exc)
        return _page(request, "history.html", {"key": key, "account": account, "h": h})
    return _review_page(request, key, account, acct, sandbox_id)


def _act(request: Request, key: ApiKey, account: str, acct: Account, sandbox_id: str, act: Act,
         exclude: list[str], reason: str) -> Response:
    """Approve (all, or all but ``exclude``) or discard a sandbox for the person holding ``key``:
    the one place the browser changes a sandbox, and where it asks who may (``access.may_approve``,
    the REST API's own check)."""
    if not access.may_approve(key):
        return _page(request, "error.html", {"key": key, "account": account, "title": "Refused",
                                             "message": "Approving or discarding a sandbox needs a key that may "
                                             "approve (the owner's)."}, status=403)
    try:
        if act == "discard":
            acct.discard(sandbox_id)
            return RedirectResponse(f"/ui/a/{account}/sandboxes", status_code=303)
        result = acct.approve(sandbox_id, exclude=exclude, by=access.approver(key), reason=reason or None)
    except SoulpassError as exc:
        return _error(request, key, account, exc)
    match result:
        case Committed(version=version) | AlreadyArchived(version=version):
            return RedirectResponse(f"/ui/a/{account}/v/{version}", status_code=303)
        case Unchanged():
            return RedirectResponse(f"/ui/a/{account}/sandboxes", status_code=303)
        case AwaitingReview() | Planned():
            return _review_page(request, key, account, acct, sandbox_id,
                                notice="This key may not approve what the review policy holds back.")


@router.post("/a/{account}/sandboxes/{sandbox_id}/approve")
def approve(request: Request, account: str, sandbox_id: str, action: Annotated[Literal["all", "ticked"], Form()],
            items: Annotated[str, Form(max_length=200_000)] = "", events: Annotated[int, Form(ge=0)] = 0,
            keep: Annotated[list[str], Form()] = [],  # noqa: B006
            reason: Annotated[str, Form(max_length=500)] = "") -> Response:
    """Approve what the page showed: ``items`` are the ids it offered and ``events`` the buffer's
    length then; a sandbox written to since is shown again, never archived unseen."""
    key, acct = _account(request, account)
    try:
        written = review_views.event_count(acct, sandbox_id)
    except SoulpassError as exc:
        return _error(request, key, account, exc)
    if written != events:
        return _review_page(request, key, account, acct, sandbox_id, notice="The sandbox changed since this page "
                            "was shown: nothing was archived. Review it again.")
    shown = items.split()
    exclude = [] if action == "all" else [i for i in shown if i not in set(keep)]
    return _act(request, key, account, acct, sandbox_id, action, exclude, reason)


@router.post("/a/{account}/sandboxes/{sandbox_id}/discard")
def discard(request: Request, account: str, sandbox_id: str,
            confirm: Annotated[str, Form(max_length=10)] = "") -> Response:
    key, acct = _account(request, account)
    if confirm != "yes":
        return _error(request, key, account, InvalidInput("to discard, tick the box that says its writes are "
                                                          "deleted", field="confirm"))
    return _act(request, key, account, acct, sandbox_id, "discard", [], "")
