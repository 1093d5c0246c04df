"""The REST API: a thin FastAPI adapter over the library (``soulpass.open(...)``).

Endpoints are plain ``def`` functions, so FastAPI runs the synchronous engine in its threadpool.
Errors from ``soulpass.errors`` become JSON bodies (``ErrorOut``) with their class's ``http_status``;
no endpoint takes a file system path from the client (names and ids are validated by the engine
before they become path components), and request bodies are capped (``max_body`` bytes).
"""

from __future__ import annotations

import errno
import json
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager
from typing import Any, Protocol, runtime_checkable

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from fastapi.routing import APIRoute
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.routing import Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from soulpass import __version__
from soulpass.engine import Soulpass
from soulpass.errors import BackendUnavailable, SoulpassError
from soulpass.pool import AccountPool
from soulpass.server.deps import Forbidden, Unauthorized
from soulpass.server.docs import add_docs
from soulpass.server.keyring import key_store
from soulpass.server.keys import KeyStore
from soulpass.server.limits import Guards, RateLimited, ServerLimits
from soulpass.server.models import ErrorOut
from soulpass.server.review_notice import ReviewNotice
from soulpass.server.roles import RoleMissing, RouteRoles

__all__ = ["DEFAULT_MAX_BODY", "app_endpoints", "create_app"]

DEFAULT_MAX_BODY = 4 * 1024 * 1024


def create_app(engine: Soulpass, *, keys: KeyStore | None = None, max_body: int = DEFAULT_MAX_BODY,
               limits: ServerLimits | None = None,
               review_notice: ReviewNotice | None = None) -> FastAPI:
    """The API over ``engine``'s home; keys are read from that home unless ``keys`` is given;
    ``limits``: request rates, failed key attempts and the storage quota (``server.limits``);
    ``review_notice``: told of each archive the review policy holds (``server.review_notice``)."""
    from soulpass.server import (
        routes_accounts,
        routes_agent,
        routes_journal,
        routes_records,
        routes_reviews,
        routes_sandboxes,
        routes_versions,
    )

    pool = AccountPool(engine)

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        yield
        pool.close()  # release the indexes (their vector files are locked while open)

    app = FastAPI(
        lifespan=lifespan,
        title="Soulpass",
        version=__version__,
        description="Versioned long-term memory for AI agents. Every endpoint but the schema needs "
                    "`Authorization: Bearer <key>`; an account key reaches its own account only, an admin "
                    "key every account.",
        docs_url=None, redoc_url=None,  # FastAPI's pages load scripts from a CDN: /docs is served below
    )
    app.state.engine = engine
    app.state.pool = pool
    app.state.keys = keys or key_store(engine)
    app.state.review_notice = review_notice
    app.state.home = str(engine.home)
    app.state.guards = Guards(limits or ServerLimits(), lambda account: pool.get(account).store.stored_bytes())
    for module in (routes_accounts, routes_sandboxes, routes_reviews, routes_versions, routes_journal, routes_agent,
                   routes_records):
        app.include_router(module.router)
    from soulpass.server import routes_imp  # importers (issue 15)

    app.include_router(routes_imp.router)
    from soulpass.server import routes_exp  # the passport export

    app.include_router(routes_exp.router)
    from soulpass.server.ui import mount_ui  # the memory browser at /ui

    mount_ui(app)
    _add_error_handlers(app)
    add_docs(app)
    app.state.roles = RouteRoles.of(app_endpoints(app))  # a route without a declared role: LookupError now
    app.add_middleware(BodyLimit, max_body=max_body)
    return app


@runtime_checkable
class _IncludedRoutes(Protocol):
    """What FastAPI's included router (a private class) offers: the routes it holds."""

    def effective_route_contexts(self) -> Iterator[Any]: ...


def app_endpoints(app: FastAPI) -> Iterator[tuple[str, str, Callable[..., Any]]]:
    """(method, path template, endpoint) of every route ``app`` answers, those of included routers
    too (FastAPI keeps them behind an included router's ``effective_route_contexts``)."""
    for route in app.routes:
        if isinstance(route, APIRoute | Route):
            contexts: Any = [route]
        elif isinstance(route, _IncludedRoutes):  # an included router (FastAPI's own private class)
            contexts = route.effective_route_contexts()
        else:  # a mount of static files: no endpoint
            contexts = []
        for ctx in contexts:
            for method in sorted(ctx.methods or ()):
                if method != "HEAD":  # answered by GET
                    yield method, ctx.path, ctx.endpoint


# --- errors ------------------------------------------------------------------------------

def _scrub(value: Any, home: str) -> Any:
    """JSON-safe detail values with the server's home folder taken out of any text."""
    if isinstance(value, str):
        return value.replace(home, "<home>")
    if value is None or isinstance(value, bool | int | float):
        return value
    if isinstance(value, list | tuple):
        return [_scrub(v, home) for v in value]
    if isinstance(value, dict):
        return {str(k): _scrub(v, home) for k, v in value.items()}
    return _scrub(str(value), home)


def error_response(request: Request, status: int, error: str, message: str, details: dict[str, Any] | None = None,
                   headers: dict[str, str] | None = None) -> JSONResponse:
    home = getattr(request.app.state, "home", "\0")
    body = ErrorOut(error=error, message=_scrub(message, home), details=_scrub(details or {}, home))
    return JSONResponse(body.model_dump(mode="json"), status_code=status, headers=headers)


def _add_error_handlers(app: FastAPI) -> None:
    @app.exception_handler(SoulpassError)
    async def soulpass_error(request: Request, exc: SoulpassError) -> JSONResponse:
        if isinstance(exc, BackendUnavailable) and isinstance(exc.__cause__, OSError):  # the library's storage error
            return await io_error(request, exc.__cause__)
        headers = {"Retry-After": str(exc.retry_after)} if isinstance(exc, RateLimited) else None
        return error_response(request, exc.http_status, type(exc).__name__, exc.message, exc.details, headers)

    @app.exception_handler(OSError)
    async def io_error(request: Request, exc: OSError) -> JSONResponse:
        """A disk or file system fault (full disk, I/O error, read-only): JSON like every error, never
        a plain-text 500; nothing half-written stays (the store's writes are whole or not at all)."""
        full = exc.errno in (errno.ENOSPC, errno.EDQUOT)
        status, error = (507, "InsufficientStorage") if full else (503, "StorageUnavailable")
        what = "the server's disk is full" if full else "the server could not read or write its storage"
        return error_response(request, status, error, f"{what}: {exc.strerror or exc}; nothing was half-written, "
                              "try again later", {"errno": errno.errorcode.get(exc.errno or 0, str(exc.errno))})

    @app.exception_handler(Unauthorized)
    async def unauthorized(request: Request, exc: Unauthorized) -> JSONResponse:
        return error_response(request, 401, "Unauthorized", str(exc), headers={"WWW-Authenticate": "Bearer"})

    @app.exception_handler(Forbidden)
    async def forbidden(request: Request, exc: Forbidden) -> JSONResponse:
        return error_response(request, 403, "Forbidden", str(exc))

    @app.exception_handler(RoleMissing)
    async def role_missing(request: Request, exc: RoleMissing) -> Response:
        if request.url.path.startswith("/ui/"):  # a browser page: an HTML page, not the API's JSON
            from soulpass.server.ui.routes import role_missing_page

            return role_missing_page(request, exc)
        return error_response(request, 403, "Forbidden", str(exc), {"needed": exc.needed, "role": exc.held})

    @app.exception_handler(RequestValidationError)
    async def invalid_request(request: Request, exc: RequestValidationError) -> Response:
        if request.url.path.startswith("/ui/"):  # a browser page: an HTML page, not the API's JSON
            from soulpass.server.ui.routes import invalid_request_page

            return invalid_request_page(request, list(exc.errors()))
        errors = [{"loc": [str(p) for p in e.get("loc", ())], "msg": str(e.get("msg", "")), "type": str(e.get("type"))}
                  for e in exc.errors()]
        status = 400 if any(e["type"] == "json_invalid" for e in errors) else 422
        first = "; ".join(f"{'.'.join(e['loc'][1:]) or e['loc'][0] if e['loc'] else '(body)'}: {e['msg']}"
                          for e in errors[:3])
        error = "BadRequest" if status == 400 else "InvalidInput"
        return error_response(request, status, error, f"request rejected: {first}", {"errors": errors[:20]})

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        names = {404: "NotFound", 405: "MethodNotAllowed", 413: "TooLarge"}
        return error_response(request, exc.status_code, names.get(exc.status_code, "HTTPError"), str(exc.detail),
                              headers=dict(exc.headers or {}))


# --- request size ------------------------------------------------------------------------------

class BodyLimit:
    """Refuse bodies over ``max_body`` bytes with 413 before the endpoint sees any of them.

    The body is read here (it is small by definition) and handed on whole, so a chunked upload
    that grows past the limit is refused just like one whose Content-Length says so.
    """

    def __init__(self, app: ASGIApp, max_body: int) -> None:
        self.app, self.max_body = app, max_body

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        length = dict(scope.get("headers", ())).get(b"content-length")
        if length is not None and length.isdigit() and int(length) > self.max_body:
            await self._too_large(send)
            return
        chunks: list[bytes] = []
        size = 0
        more = True
        while more:
            message = await receive()
            if message["type"] != "http.request":
                break  # the client went away: nothing to answer
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.max_body:
                await self._too_large(send)
                return
            chunks.append(chunk)
            more = message.get("more_body", False)
        body = b"".join(chunks)
        sent = False

        async def replay() -> Message:
            nonlocal sent
            if not sent:
                sent = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        await self.app(scope, replay, send)

    async def _too_large(self, send: Send) -> None:
        body = ErrorOut(error="TooLarge", message=f"request body is over the limit of {self.max_body} bytes",
                        details={"max_body": self.max_body}).model_dump(mode="json")
        data = json.dumps(body).encode("utf-8")
        await send({"type": "http.response.start", "status": 413,
                    "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(data)).encode()),
                                (b"connection", b"close")]})
        await send({"type": "http.response.body", "body": data})
