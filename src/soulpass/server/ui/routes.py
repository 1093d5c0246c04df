"""The memory browser at ``/ui``: server-rendered pages over the same keys as the API.

A key typed into the login form is checked like a bearer key (the same store, the same guard
against guessing) and kept in an ``HttpOnly``, ``SameSite=Strict`` cookie; an account key sees its
account only, the admin key the list of accounts. A missing or wrong key gets the login page and no
data (status 200 with ``X-Soulpass-Login: required``). The actions, rollback and forget, are POSTs
that must repeat what they confirm, after the page showed what they will do; they need an owner
key (``roles.ROUTES``, as every page's role), and an agent key is refused with a 403 page that says so.
"""

from __future__ import annotations

from datetime import datetime
from pathlib import Path
from typing import Annotated, Any

from fastapi import APIRouter, Form, Query, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from fastapi.staticfiles import StaticFiles
from fastapi.templating import Jinja2Templates

from soulpass import __version__
from soulpass.consolidation.internals import people_kinds
from soulpass.errors import InvalidInput, NotFound, SoulpassError
from soulpass.server.keys import ApiKey, KeyStore
from soulpass.server.limits import Guards
from soulpass.server.roles import RoleMissing, RouteRoles, grants
from soulpass.server.ui import review_views, views

__all__ = ["COOKIE", "mount_ui", "role_missing_page"]

COOKIE = "soulpass_ui_key"
HERE = Path(__file__).resolve().parent
templates = Jinja2Templates(directory=str(HERE / "templates"))
templates.env.globals["version"] = __version__
templates.env.globals["may"] = grants  # {% if may(key, "owner") %}: show an action only to a key that may take it
router = APIRouter(prefix="/ui", include_in_schema=False)
KINDS = ("turn_user", "turn_llm", "episode", "fact", "sensory", "journal")


class _Login(Exception):
    """No valid key: the login page, with why."""

    def __init__(self, why: str = "") -> None:
        super().__init__(why)
        self.why = why


def mount_ui(app: Any) -> None:
    """Serve the browser at ``/ui`` and its packaged assets at ``/ui/static`` (no CDN)."""
    app.mount("/ui/static", StaticFiles(directory=str(HERE / "static")), name="ui-static")
    app.include_router(router)

    async def login_page(request: Request, exc: Exception) -> Response:
        # 200, not 401: for a browser the login page is a page (a 401 is logged as a console error);
        # the header tells a script that no data came back.
        page = _page(request, "login.html", {"why": exc.why if isinstance(exc, _Login) else ""})
        page.headers["X-Soulpass-Login"] = "required"
        return page

    async def not_shown(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, _NotShown)
        return _error(request, exc.key, "", exc.error)

    async def refused(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, _Refused)
        own = exc.key.account or ""
        return _page(request, "error.html", {"key": exc.key, "account": own, "title": "Refused",
                                             "message": "This key does not open that account."}, status=403)

    app.add_exception_handler(_Login, login_page)
    app.add_exception_handler(_NotShown, not_shown)
    app.add_exception_handler(_Refused, refused)


def invalid_request_page(request: Request, errors: list[dict[str, Any]]) -> HTMLResponse:
    """A page's query or form the server refused (``?a=abc`` on the diff): an HTML page saying
    which parameter and why, not the API's JSON (422)."""
    said = "; ".join(f"{'.'.join(str(p) for p in e.get('loc', ())[1:]) or 'request'}: {e.get('msg', '')}"
                     for e in errors[:3])
    account = str(request.path_params.get("account", ""))
    return _page(request, "error.html", {"key": None, "account": "", "back": f"/ui/a/{account}" if account else "/ui",
                                         "title": "Not understood", "message": f"This page's address has a value "
                                         f"it cannot use: {said}."}, status=422)


def role_missing_page(request: Request, exc: RoleMissing) -> HTMLResponse:
    """A key whose role does not allow the page's action (an agent key rolling back): 403, saying which role."""
    # Back to the key's own pages: the account in the path may not be the key's (it is named nowhere).
    return _page(request, "error.html", {
        "key": None, "account": "", "back": "/ui",
        "title": f"Needs the {exc.needed} role", "message": f"This changes memory: it needs a key with the "
        f"{exc.needed} role, and this key has the {exc.held} role. Log in with an {exc.needed} key to do it."},
        status=403)


def _page(request: Request, name: str, context: dict[str, Any], status: int = 200) -> HTMLResponse:
    if context.get("key") is not None and context.get("account") and "awaiting_review" not in context:
        # the header's badge: how many sandboxes await review
        context = {**context, "awaiting_review": _awaiting(request, str(context["account"]))}
    return templates.TemplateResponse(request, name, context, status_code=status)


def _awaiting(request: Request, account: str) -> int:
    """How many of the account's open sandboxes await a person's review (0 where it cannot be read)."""
    try:
        return len(review_views.awaiting_review(request.app.state.pool.get(account)))
    except SoulpassError:
        return 0


def _client(request: Request) -> str:
    return request.client.host if request.client is not None else "unknown"


def _key(request: Request) -> ApiKey:
    """The caller's key from the cookie, or the login page."""
    typed = request.cookies.get(COOKIE)
    if not typed:
        raise _Login()
    guards: Guards = request.app.state.guards
    guards.before_key_check(_client(request))
    keys: KeyStore = request.app.state.keys
    key = keys.verify(typed)
    if key is None:
        guards.key_failed(_client(request))
        raise _Login("That key is not valid (unknown, revoked or mistyped).")
    roles: RouteRoles = request.app.state.roles
    roles.check(key, request.scope["endpoint"])  # RoleMissing: the 403 page (role_missing_page)
    return key


class _Refused(Exception):
    """A valid key asking for another account: a refusal (403) that names nothing of it."""

    def __init__(self, key: ApiKey) -> None:
        super().__init__("this key does not open that account")
        self.key = key


class _NotShown(Exception):
    """An error page (an admin key naming an account that does not exist, say)."""

    def __init__(self, key: ApiKey, account: str, error: SoulpassError) -> None:
        super().__init__(error.message)
        self.key, self.account, self.error = key, account, error


def _account(request: Request, account: str) -> tuple[ApiKey, Any]:
    """The account the key may see, opened through the server's pool."""
    key = _key(request)
    if not key.admin and key.account != account:
        raise _Refused(key)
    try:
        return key, request.app.state.pool.get(account)
    except SoulpassError as exc:
        raise _NotShown(key, account, exc) from exc


def _error(request: Request, key: ApiKey, account: str, exc: SoulpassError) -> HTMLResponse:
    return _page(request, "error.html", {"key": key, "account": account, "message": exc.message},
                 status=exc.http_status)


@router.get("", response_class=HTMLResponse)
@router.get("/", response_class=HTMLResponse)
def home(request: Request) -> Response:
    key = _key(request)
    if not key.admin:
        return RedirectResponse(f"/ui/a/{key.account}", status_code=303)
    engine = request.app.state.engine
    rows = []
    for name in engine.accounts():
        acct = request.app.state.pool.get(name)
        rows.append({"name": name, "head": acct.head()})
    return _page(request, "accounts.html", {"key": key, "accounts": rows})


@router.post("/login")
def login(request: Request, key: Annotated[str, Form(max_length=500)] = "") -> Response:
    guards: Guards = request.app.state.guards
    guards.before_key_check(_client(request))
    found = request.app.state.keys.verify(key.strip()) if key.strip() else None
    if found is None:
        guards.key_failed(_client(request))
        raise _Login("That key is not valid (unknown, revoked or mistyped)." if key.strip() else "Type a key.")
    out = RedirectResponse("/ui", status_code=303)
    # Secure when the page came over HTTPS (behind a proxy: run uvicorn with --proxy-headers).
    out.set_cookie(COOKIE, key.strip(), httponly=True, samesite="strict", path="/ui",
                   secure=request.url.scheme == "https")
    return out


@router.post("/logout")
def logout() -> Response:
    out = RedirectResponse("/ui", status_code=303)
    out.delete_cookie(COOKIE, path="/ui")
    return out


@router.get("/a/{account}", response_class=HTMLResponse)
def timeline(request: Request, account: str,
             before: Annotated[int | None, Query(ge=1)] = None) -> Response:
    key, acct = _account(request, account)
    return _page(request, "timeline.html", {"key": key, "account": account, "t": views.timeline(acct, before)})


@router.get("/a/{account}/v/{version}", response_class=HTMLResponse)
def version(request: Request, account: str, version: int) -> Response:
    key, acct = _account(request, account)
    try:
        v = views.version_view(acct, version)
    except SoulpassError as exc:
        return _error(request, key, account, exc)
    return _page(request, "version.html", {"key": key, "account": account, "v": v})


@router.get("/a/{account}/diff", response_class=HTMLResponse)
def diff(request: Request, account: str, a: Annotated[int, Query(ge=0)] = 0,
         b: Annotated[int | None, Query(ge=0)] = None, internal: bool = False) -> Response:
    key, acct = _account(request, account)
    try:
        d = views.diff_view(acct, a, acct.head() if b is None else b, internal)
    except SoulpassError as exc:
        return _error(request, key, account, exc)
    return _page(request, "diff.html", {"key": key, "account": account, "d": d, "head": acct.head()})


@router.get("/a/{account}/r/{record_id}", response_class=HTMLResponse)
def record(request: Request, account: str, record_id: str,
           at: Annotated[int | None, Query(ge=0)] = None) -> Response:
    key, acct = _account(request, account)
    try:
        r = views.record_view(acct, record_id, at)
    except NotFound as exc:
        gone = views.forgotten(acct, record_id, at)
        if gone is None:
            return _error(request, key, account, exc)
        why = f"reason: {gone['reason']}" + (f", by {gone['by']}" if gone["by"] else "")
        return _page(request, "error.html", {
            "key": key, "account": account, "title": f"{record_id} was forgotten", "back": f"/ui/a/{account}/v/"
            f"{gone['version']}", "message": f"{record_id} was forgotten at version {gone['version']} ({why}) on "
            f"{gone['timestamp']} UTC: its text is erased from every version."}, status=410)
    except SoulpassError as exc:
        return _error(request, key, account, exc)
    return _page(request, "record.html", {"key": key, "account": account, "r": r})


def _when(value: str, field: str) -> datetime | None:
    if not value:
        return None
    try:
        return datetime.fromisoformat(value)
    except ValueError as exc:
        raise InvalidInput(f"{field} must be a date or date-time (YYYY-MM-DD[THH:MM]), not {value!r}",
                           field=field) from exc


def _number(value: str, field: str, low: int, high: int | None) -> int | None:
    """A form's number field: empty is None (an empty number input is sent as ``at=``)."""
    if not value.strip():
        return None
    try:
        n = int(value)
    except ValueError:
        raise InvalidInput(f"{field} must be a whole number, not {value!r}", field=field) from None
    if n < low or (high is not None and n > high):
        raise InvalidInput(f"{field} must be between {low} and {high if high is not None else 'HEAD'}, not {n}",
                           field=field)
    return n


@router.get("/a/{account}/search", response_class=HTMLResponse)
def search(request: Request, account: str, q: Annotated[str, Query(max_length=2000)] = "",
           kind: Annotated[list[str], Query()] = [],  # noqa: B006
           agent: str = "", tags: str = "", since: str = "", until: str = "", session: str = "",
           at: str = "", k: str = "20") -> Response:
    key, _ = _account(request, account)
    form: dict[str, Any] = {"q": q, "kind": kind, "agent": agent, "tags": tags, "since": since, "until": until,
            "session": session, "at": at.strip(), "k": k.strip() or "20"}
    hits: list[Any] = []
    if q.strip():
        try:
            at_version = _number(at, "at", 0, None)
            form["at"] = "" if at_version is None else at_version
            count = _number(k, "k", 1, 100) or 20
            with request.app.state.pool.indexed(account) as acct:
                hits = list(acct.search(q, count, kinds=[x for x in kind if x], agent=agent or None,
                                        tags=[t.strip() for t in tags.split(",") if t.strip()],
                                        since=_when(since, "since"), until=_when(until, "until"),
                                        session_id=session or None, at=at_version))
        except SoulpassError as exc:
            return _error(request, key, account, exc)
    return _page(request, "search.html", {"key": key, "account": account, "form": form, "hits": hits,
                                          "kinds": KINDS, "searched": bool(q.strip())})


@router.get("/a/{account}/graph", response_class=HTMLResponse)
def graph(request: Request, account: str, subject: str = "",
          at: Annotated[int | None, Query(ge=0)] = None) -> Response:
    key, acct = _account(request, account)
    try:
        g = views.fact_graph(acct, at, subject or None)
    except SoulpassError as exc:
        return _error(request, key, account, exc)
    return _page(request, "graph.html", {"key": key, "account": account, "g": g})


@router.get("/a/{account}/agents", response_class=HTMLResponse)
def agents(request: Request, account: str, sandbox: str = "", agent: str = "",
           message: Annotated[str, Query(max_length=2000)] = "") -> Response:
    key, acct = _account(request, account)
    live = [{"id": i.sandbox_id, "name": i.name, "parent": i.parent_version} for i in acct.sandboxes()]
    committed = views.committed_clipboards(acct)
    view: dict[str, Any] = {}
    if sandbox:
        from soulpass.agent import AgentMemory

        try:
            with request.app.state.pool.indexed(account) as indexed:
                mem = AgentMemory(indexed.sandbox(sandbox))
                hot = [e.to_dict() for e in mem.hot(agent=agent or None)]
                agents_seen = sorted({e["agent"] for e in hot if e.get("agent")} | ({agent} if agent else set()))
                view = {"hot": hot, "agents": agents_seen,
                        "clipboards": {a: mem.clipboard_show(a) for a in agents_seen}}
                if agent:
                    view["context"] = mem.context(agent, message or "(what the agent would see now)").to_dict()
        except SoulpassError as exc:
            return _error(request, key, account, exc)
    return _page(request, "agents.html", {"key": key, "account": account, "sandboxes": live, "sandbox": sandbox,
                                          "agent": agent, "message": message, "view": view, "committed": committed,
                                          "head": acct.head()})


@router.get("/a/{account}/health", response_class=HTMLResponse)
def health(request: Request, account: str, audit: bool = False, internal: bool = False) -> Response:
    """The store, the index and its backlog, the embedder; the audit (which reads every stored copy:
    seconds at 100k records) when asked."""
    from soulpass.integrity import audit as run_audit

    key, _ = _account(request, account)
    pool = request.app.state.pool
    engine = request.app.state.engine
    report = None
    with pool.indexed(account) as acct:
        status = acct.index().status()
        backend = type(acct.store).__name__
        head = acct.head()
        if audit:
            acct.close()  # the audit opens the index itself, without catching it up
            report = run_audit(engine, account)
    embedder = engine.embedder()
    in_force = dict(status.in_force) if internal else people_kinds(status.in_force)
    return _page(request, "health.html", {
        "key": key, "account": account, "status": status, "backend": backend, "head": head,
        "in_force": in_force, "internal": internal, "hidden": len(status.in_force) - len(in_force),
        "embedder": embedder.model_id if embedder is not None else "none (full text only)", "report": report})


@router.post("/a/{account}/rollback")
def rollback(request: Request, account: str, version: Annotated[int, Form(ge=0)],
             confirm: Annotated[str, Form(max_length=20)] = "") -> Response:
    key, acct = _account(request, account)
    if confirm.strip() != str(version):
        return _error(request, key, account, InvalidInput(
            f"to roll back, type the version number {version} in the confirmation box", field="confirm"))
    try:
        made = acct.rollback(version)
    except (SoulpassError, NotFound) as exc:
        return _error(request, key, account, exc)
    return RedirectResponse(f"/ui/a/{account}/v/{made}", status_code=303)


@router.post("/a/{account}/forget")
def forget(request: Request, account: str, record_id: Annotated[str, Form(max_length=200)],
           reason: Annotated[str, Form(max_length=2000)] = "", confirm: Annotated[str, Form(max_length=200)] = "",
           ) -> Response:
    """Forget one record (erased from HEAD, every history copy and the index; a tombstone says who
    and why): the page first shows what a dry run would erase; typing the id confirms."""
    key, _ = _account(request, account)
    try:
        if not reason.strip():
            raise InvalidInput("say why this record is forgotten (the reason is kept in the tombstone)",
                               field="reason")
        with request.app.state.pool.indexed(account) as acct:
            if confirm.strip() != record_id:
                preview = acct.forget([record_id], reason=reason, by=key.key_id, dry_run=True)
                return _page(request, "forget.html", {"key": key, "account": account, "record_id": record_id,
                                                      "reason": reason, "preview": preview,
                                                      "mistyped": bool(confirm.strip())})
            done = acct.forget([record_id], reason=reason, by=key.key_id)
    except SoulpassError as exc:
        return _error(request, key, account, exc)
    return RedirectResponse(f"/ui/a/{account}/v/{done.version}", status_code=303)
