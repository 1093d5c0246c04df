"""Two accounts with data, an owner and an agent key for each and an admin key: the world the
server tests run in, in a home folder or a PostgreSQL database."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fastapi import FastAPI

import soulpass
from soulpass.server.app import create_app
from soulpass.server.keyring import key_store
from soulpass.server.keys import KeyStore
from soulpass.server.limits import ServerLimits

UNLIMITED = ServerLimits(rate=0, burst=0, failed_keys=0, quota_bytes=0)

@dataclass
class Tenant:
    name: str
    key: str  # an owner key
    key_id: str
    agent_key: str  # an agent key (issue 41)
    marker: str  # text only this account holds
    sandbox_id: str  # a live sandbox with the marker in its buffer
    record_id: str  # a committed record with the marker
    journal_id: str  # a committed journal entry with the marker

    @property
    def auth(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.key}"}

    @property
    def agent_auth(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.agent_key}"}


@dataclass
class World:
    home: Path | str  # a folder, or a postgresql:// URL
    engine: soulpass.Soulpass
    ann: Tenant
    bob: Tenant
    admin_key: str

    @property
    def admin(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.admin_key}"}

    def app(self, **kwargs: Any) -> FastAPI:
        """The API over the world; no rate limits or quota unless asked (the isolation checks send
        hundreds of bad keys from one address on purpose; tests/test_server_limits.py checks them)."""
        kwargs.setdefault("limits", UNLIMITED)
        return create_app(self.engine, **kwargs)


def _tenant(sp: soulpass.Soulpass, keys: KeyStore, name: str, marker: str) -> Tenant:
    acct = sp.create_account(name)
    sb = acct.create_sandbox("first")
    sb.add_turn("user", f"{marker} my locker code is {marker}")
    sb.add_fact(content=f"User keeps {marker}", confidence=0.95)
    sb.update_state("ire", {"mood": marker})
    sb.add_journal(f"Today I hid the {marker} under the stairs.", title="hiding", tags=("secret",))
    result = sb.archive()
    record_id = next(r.id for r in acct.records("turn_user"))
    journal_id = result.plan.journal[0]["id"]  # type: ignore[union-attr]
    live = acct.create_sandbox("second")
    live.add_turn("user", f"still {marker}")
    new = keys.create(name)
    agent = keys.create(name, role="agent")
    return Tenant(name=name, key=new.secret, key_id=new.key.key_id, agent_key=agent.secret, marker=marker,
                  sandbox_id=live.id, record_id=record_id, journal_id=journal_id)


def build_world(home: Path | str) -> World:
    """The world in ``home``: a folder, or a ``postgresql://`` URL (keys in its ``api_keys`` table)."""
    sp = soulpass.open(home, embedder="none")
    keys = key_store(sp)
    ann = _tenant(sp, keys, "ann", "annmarker7731")
    bob = _tenant(sp, keys, "bob", "bobmarker4409")
    return World(home=home, engine=sp, ann=ann, bob=bob, admin_key=keys.create(None).secret)


def app_routes(app: FastAPI) -> Iterator[tuple[str, str]]:
    """(method, path template) of every route the app answers, included routers too."""
    for route in app.routes:
        contexts = getattr(route, "effective_route_contexts", None)
        if contexts is not None:
            for ctx in contexts():
                for method in sorted(getattr(ctx.original_route, "methods", None) or ()):
                    yield method, ctx.path
        else:
            for method in sorted(getattr(route, "methods", None) or ()):
                if method != "HEAD":
                    yield method, getattr(route, "path", "")


@contextmanager
def serving(app: FastAPI, stop_within: float = 30.0) -> Iterator[str]:
    """``app`` served by uvicorn on a thread of this process (what the test injects there, the
    server sees); its base URL. Leaving fails the test when the server does not stop within
    ``stop_within`` seconds (a request that hangs on a lock), instead of hanging it."""
    import uvicorn

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = int(s.getsockname()[1])
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        assert time.monotonic() < deadline, "the server did not start"
        time.sleep(0.02)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(stop_within)
        assert not thread.is_alive(), "the server did not shut down: a request still waits (a lock held twice?)"
