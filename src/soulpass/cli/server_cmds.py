"""``serve`` (REST), ``mcp`` (MCP server) and ``key create|list|revoke``."""

from __future__ import annotations

import json
import socket
from typing import Literal

import click

from soulpass.cli.output import console, emit_json, table
from soulpass.cli.state import State
from soulpass.engine import Soulpass
from soulpass.errors import BackendUnavailable
from soulpass.server.keyring import key_store
from soulpass.server.keys import KeyStore

__all__ = ["COMMANDS"]


def _engine(state: State, embedder: Literal["auto", "none"]) -> Soulpass:
    return state.engine(embedder=embedder)


def listening(host: str, port: int) -> socket.socket:
    """A socket bound to ``host:port`` for the server to listen on; an ``OSError`` naming both when
    the port is taken or the address is not this machine's (exit 1)."""
    sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # a server that just stopped: rebind at once
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        raise OSError(exc.errno, f"cannot listen on {host}:{port}: {exc.strerror}") from None
    return sock


def _need(extra: str, module: str) -> None:
    import importlib.util

    if importlib.util.find_spec(module) is None:
        raise BackendUnavailable(f"{module} is not installed: pip install 'soulpass[{extra}]'", extra=extra)


def _keys(state: State) -> KeyStore:
    """The home's API keys: keys.json in a folder, the api_keys table in a database."""
    return key_store(state.engine(embedder="none"))


embedder_option = click.option("--embedder", type=click.Choice(["auto", "none"]), default="auto", show_default=True,
                               help="'auto': MiniLM vectors if the 'embed' extra is installed; 'none': full text only.")


@click.command("serve")
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on.")
@click.option("--port", type=int, default=8765, show_default=True, help="Port to listen on.")
@click.option("--max-body", type=int, default=4 * 1024 * 1024, show_default=True,
              help="Largest request body in bytes (larger: 413).")
@click.option("--rate-limit", type=click.FloatRange(min=0), default=50.0, show_default=True,
              envvar="SOULPASS_RATE_LIMIT", help="Requests per second per API key (0: no limit).")
@click.option("--burst", type=click.IntRange(min=0), default=200, show_default=True, envvar="SOULPASS_RATE_BURST",
              help="Requests one key may send at once before the rate applies.")
@click.option("--failed-keys", type=click.IntRange(min=0), default=20, show_default=True,
              envvar="SOULPASS_FAILED_KEYS", help="Failed API key attempts per minute per client address "
                                                  "before it gets 429 (0: no limit).")
@click.option("--quota-bytes", type=click.IntRange(min=0), default=1 << 30, show_default=True,
              envvar="SOULPASS_QUOTA_BYTES", help="Bytes one account may store; writes beyond get 507 (0: none).")
@embedder_option
@click.option("--review-redis", default=None, envvar="SOULPASS_REVIEW_REDIS", metavar="URL",
              help="Publish each archive the review policy holds on this Redis, channel soulpass:reviews "
                   "(env SOULPASS_REVIEW_REDIS).")
@click.option("--openapi", "print_openapi", is_flag=True, help="Print the OpenAPI schema (JSON) and exit.")
@click.pass_obj
def serve(state: State, host: str, port: int, max_body: int, rate_limit: float, burst: int, failed_keys: int,
          quota_bytes: int, embedder: Literal["auto", "none"], review_redis: str | None, print_openapi: bool) -> None:
    """Run the REST API (extra 'server'); every request needs an API key (see 'soulpass key')."""
    _need("server", "fastapi")
    from soulpass.server.app import create_app
    from soulpass.server.limits import ServerLimits
    from soulpass.server.review_notice import RedisReviewNotice

    limits = ServerLimits(rate=rate_limit, burst=burst, failed_keys=failed_keys, quota_bytes=quota_bytes)
    notice = RedisReviewNotice.from_url(review_redis) if review_redis else None
    app = create_app(_engine(state, embedder), max_body=max_body, limits=limits, review_notice=notice)
    if print_openapi:
        click.echo(json.dumps(app.openapi(), indent=2, ensure_ascii=False))
        return
    sock = listening(host, port)  # before uvicorn: a busy port is one line and exit 1, not uvicorn's 3
    if not key_store(app.state.engine).list():
        console.print("[yellow]no API keys yet:[/] make one with 'soulpass key create ACCOUNT' or "
                      "'soulpass key create --admin'", soft_wrap=True)
    shown = "127.0.0.1" if host in ("0.0.0.0", "::", "") else host
    console.print(f"memory browser: http://{shown}:{port}/ui  (log in with an API key)  ·  API docs: "
                  f"http://{shown}:{port}/docs", soft_wrap=True, highlight=False)
    import uvicorn

    uvicorn.Server(uvicorn.Config(app, log_level="info")).run(sockets=[sock])


@click.command("mcp")
@click.option("--account", "-a", "account", envvar="SOULPASS_ACCOUNT", default=None,
              help="The account the stdio server acts for (env SOULPASS_ACCOUNT).")
@click.option("--transport", type=click.Choice(["stdio", "http"]), default="stdio", show_default=True,
              help="stdio (one account, for a local client) or streamable HTTP (API key per request).")
@click.option("--host", default="127.0.0.1", show_default=True, help="HTTP: address to listen on.")
@click.option("--port", type=int, default=8766, show_default=True, help="HTTP: port to listen on.")
@click.option("--failed-keys", type=click.IntRange(min=0), default=20, show_default=True,
              envvar="SOULPASS_FAILED_KEYS", help="HTTP: failed API key attempts per minute per client address "
                                                  "before it gets 429, as `serve` (0: no limit).")
@click.option("--archive-every", type=click.IntRange(min=0), default=0, show_default=True,
              envvar="SOULPASS_MCP_ARCHIVE_EVERY", help="Archive a session after this many writes (0: never).")
@click.option("--archive-idle", type=click.FloatRange(min=0), default=600.0, show_default=True,
              envvar="SOULPASS_MCP_ARCHIVE_IDLE", help="Archive a session idle this many seconds (0: never).")
@click.option("--archive-on-close/--no-archive-on-close", default=True, show_default=True,
              envvar="SOULPASS_MCP_ARCHIVE_ON_CLOSE", help="Archive the sessions written to when the server stops.")
@embedder_option
@click.pass_obj
def mcp(state: State, account: str | None, transport: str, host: str, port: int, failed_keys: int,
        archive_every: int, archive_idle: float, archive_on_close: bool, embedder: Literal["auto", "none"]) -> None:
    """Run the MCP server (extra 'server'): memory tools for an agent, over stdio or HTTP. Sessions
    are archived by themselves (--archive-every, --archive-idle, --archive-on-close)."""
    _need("server", "mcp")
    from soulpass.mcp.server import run_http, run_stdio
    from soulpass.mcp.sessions import AutoArchive

    engine = _engine(state, embedder)
    policy = AutoArchive(every=archive_every or None, idle=archive_idle or None, on_close=archive_on_close)
    if transport == "stdio":
        if account is None:
            raise click.UsageError("--account (or SOULPASS_ACCOUNT) is required with --transport stdio")
        run_stdio(engine, account, policy)
    else:
        run_http(engine, key_store(engine), sock=listening(host, port), policy=policy, failed_keys=failed_keys)


@click.group()
def key() -> None:
    """API keys for the REST and MCP servers (only their hashes are stored)."""


@key.command("create")
@click.argument("account", required=False)
@click.option("--admin", is_flag=True, help="An admin key: manages accounts and reaches every account.")
@click.option("--label", default="", help="A note to tell keys apart.")
@click.pass_obj
def key_create(state: State, account: str | None, admin: bool, label: str) -> None:
    """Make a key for ACCOUNT (or --admin) and print it; it is shown this once."""
    if admin == (account is not None):
        raise click.UsageError("give either ACCOUNT or --admin")
    if account is not None:
        state.engine().account(account)  # NotFound when it does not exist
    new = _keys(state).create(account, label)
    click.echo(new.secret)
    click.echo(f"key {new.key.key_id} for {account or 'admin'}: store it now, it cannot be shown again", err=True)


@key.command("list")
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")
@click.pass_obj
def key_list(state: State, as_json: bool) -> None:
    """List keys (ids, accounts, labels; never the keys themselves)."""
    keys = _keys(state).list()
    if as_json:
        emit_json([k.public() for k in keys])
    else:
        table("API keys", ["key_id", "account", "created", "label"],
              [(k.key_id, k.account or "(admin)", k.created_at, k.label) for k in keys])


@key.command("revoke")
@click.argument("key_id")
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")
@click.pass_obj
def key_revoke(state: State, key_id: str, as_json: bool) -> None:
    """Revoke the key KEY_ID; it stops working at the next request."""
    gone = _keys(state).revoke(key_id)
    if as_json:
        emit_json({"key_id": gone.key_id, "account": gone.account, "status": "revoked"})
    else:
        console.print(f"revoked {gone.key_id} ({gone.account or 'admin'})")


COMMANDS = [serve, mcp, key]
