"""Isolation: for every endpoint the app has, no key is 401, and account A's keys (owner and agent)
asking for account B's data (or B's sandbox under A's name) get 403/404 with nothing of B's in the
body; on a home folder and on PostgreSQL. What each role may do in its own account:
tests/test_key_roles.py.

The endpoint list comes from the app's routes, so a new endpoint is tested without anyone
remembering to add it; an endpoint the test cannot classify fails the test.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient

from server_world import Tenant, World, app_routes, build_world
from soulpass.server.roles import ROUTES

PUBLIC = {("GET", "/openapi.json"), ("GET", "/docs")}  # the schema and its interactive page (no data)
# Routes without an account in the path: what each must do for a plain account key.
GLOBAL = {("GET", "/v1/accounts"), ("POST", "/v1/accounts")}

# A body each endpoint accepts (the isolation checks must get past validation to mean anything).
BODIES: dict[tuple[str, str], Any] = {
    ("POST", "/v1/accounts"): {"name": "carol"},
    ("POST", "/keys"): {"label": "x"},
    ("POST", "/sandboxes"): {"name": "x"},
    ("POST", "/turns"): {"text": "hello"},
    ("POST", "/episodes"): {"summary": {"action_taken": "a", "key_outcome": "b", "future_implication": "c"}},
    ("POST", "/facts"): {"content": "User likes tea", "confidence": 0.9},
    ("POST", "/states/{name}"): {"data": {"k": 1}},
    ("POST", "/profile"): {"data": {"k": 1}},
    ("POST", "/core"): {"section": "identity", "key": "name", "value": "x", "confidence": 0.9, "reason": "r"},
    ("POST", "/sensory"): {"content": "raw"},
    ("POST", "/archive"): {},
    ("POST", "/approve"): {},
    ("POST", "/search"): {"query": "locker"},
    ("POST", "/rollback"): {"version": 0},
    ("POST", "/clipboard/{agent}"): {"action": "add", "item": "x"},
    ("POST", "/context"): {"agent": "agent", "message": "what is my locker code?"},
    ("POST", "/rag_search"): {"agent": "agent", "query": "locker"},
    ("POST", "/ingest"): {"agent": "agent", "text": "a document", "title": "doc"},
    ("POST", "/journal"): {"title": "A day", "text": "wrote things"},
    ("POST", "/log"): {"agent": "agent", "text": "hello"},
    ("POST", "/import"): {"source": "jsonl", "content": "", "dry_run": True},
    ("PATCH", "/records/{record_id}"): {"fields": {"text_excerpt": "x"}},
    ("POST", "/forget"): {"ids": [], "subject": "x", "reason": "r"},
}
QUERY: dict[str, dict[str, Any]] = {"/diff": {"a": 0, "b": 1}, "/records/{record_id}": {"reason": "r"}}


@pytest.fixture(scope="module", params=["files", "postgres"])
def world(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    tmp = tmp_path_factory.mktemp("iso")
    if request.param == "files":
        yield build_world(tmp / "home")
        return
    from postgres_helpers import postgres_url

    for url in postgres_url(tmp):
        yield build_world(url)


@pytest.fixture(scope="module")
def client(world: World) -> TestClient:
    return TestClient(world.app())


def _body(method: str, path: str) -> Any:
    if (method, path) in BODIES:
        return BODIES[(method, path)]
    for (m, suffix), body in BODIES.items():
        if m == method and path.endswith(suffix):
            return body
    if method in ("POST", "PUT", "PATCH"):
        raise AssertionError(f"no sample body for {method} {path}: add one to BODIES")
    return None


def _fill(path: str, account: str, owner: Tenant) -> str:
    values = {"account": account, "sandbox_id": owner.sandbox_id, "ref": owner.record_id, "name": "ire",
              "key_id": owner.key_id, "agent": "agent", "record_id": owner.record_id,
              "entry_id": owner.journal_id, "version": "1"}
    unknown = set(re.findall(r"{(\w+)}", path)) - set(values)
    assert not unknown, f"{path}: the isolation test does not know how to fill {unknown}"
    return path.format(**values)


def _request(client: TestClient, method: str, path: str, headers: dict[str, str], template: str) -> Any:
    query = next((q for suffix, q in QUERY.items() if template.endswith(suffix)), None)
    return client.request(method, path, headers=headers, json=_body(method, template), params=query)


def _leaks(text: str, victim: Tenant) -> list[str]:
    return [s for s in (victim.marker, victim.sandbox_id, victim.key_id, victim.name) if s in text]


def _routes(client: TestClient) -> list[tuple[str, str]]:
    """The API's routes; the memory browser's (``/ui``, a cookie instead of a bearer key) are
    checked by ``test_every_browser_page_needs_the_accounts_key``."""
    routes = sorted(r for r in set(app_routes(client.app)) if not _browser(r[1]))  # type: ignore[arg-type]
    assert len(routes) >= 20
    return routes


def _browser(path: str) -> bool:
    return path == "/ui" or path.startswith("/ui/")


# A form each browser action accepts (the checks must get past validation to mean anything).
FORMS: dict[str, dict[str, str]] = {
    "/ui/login": {"key": "sp_00000000_" + "x" * 43},
    "/ui/a/{account}/rollback": {"version": "0", "confirm": "0"},
    "/ui/a/{account}/forget": {"record_id": "{record_id}", "reason": "r", "confirm": "{record_id}"},
    "/ui/a/{account}/sandboxes/{sandbox_id}/approve": {"action": "all"},
    "/ui/a/{account}/sandboxes/{sandbox_id}/discard": {"confirm": "yes"},
}


def test_every_browser_page_needs_the_accounts_key(client: TestClient, world: World) -> None:
    """Every /ui route: no key, a bad key, or another account's key gets the login page, nothing of
    bob's, and changes nothing."""
    from soulpass.server.ui.routes import COOKIE

    routes = sorted(r for r in set(app_routes(client.app)) if _browser(r[1]))  # type: ignore[arg-type]
    assert len(routes) >= 10
    bob = world.engine.account("bob")
    head = bob.head()
    checked = 0
    for method, template in routes:
        if template in ("/ui/logout",):
            continue
        path = _fill(template, "bob", world.bob)
        form = {k: v.replace("{record_id}", world.bob.record_id) for k, v in FORMS.get(template, {}).items()}
        others = (world.ann.key, world.ann.agent_key) if "{account}" in template else ()  # ann's open /ui as ann
        for cookie in (None, "sp_00000000_" + "x" * 43, *others):
            client.cookies.clear()
            if cookie is not None:
                client.cookies.set(COOKIE, cookie, path="/ui")
            r = client.request(method, path, data=form or None, follow_redirects=False)
            if cookie in others:  # a valid key for another account: refused, not asked to log in
                assert r.status_code == 403, f"{method} {path} {cookie}: {r.status_code}"
            else:
                assert r.headers.get("X-Soulpass-Login") == "required", f"{method} {path} {cookie}: {r.status_code}"
            assert not _leaks(r.text.replace('name="key"', ""), world.bob), f"{method} {path} leaks: {r.text}"
            checked += 1
    client.cookies.clear()
    assert checked >= 30
    assert bob.head() == head


def test_every_route_is_classified(client: TestClient) -> None:
    for method, path in _routes(client):
        assert (method, path) in PUBLIC | GLOBAL or path.startswith("/v1/accounts/{account}"), (
            f"{method} {path}: neither public, global nor under /v1/accounts/{{account}}; classify it here")


def test_no_key_or_a_bad_key_is_401_everywhere(client: TestClient, world: World) -> None:
    checked = 0
    for method, template in _routes(client):
        if (method, template) in PUBLIC:
            continue
        path = _fill(template, "bob", world.bob)
        for headers in ({}, {"Authorization": "Bearer sp_00000000_" + "x" * 43}, {"Authorization": "Basic Ym9i"},
                        {"Authorization": world.bob.key}):  # no "Bearer"
            r = _request(client, method, path, headers, template)
            assert r.status_code == 401, f"{method} {path} {headers}: {r.status_code} {r.text}"
            assert r.json()["error"] == "Unauthorized"
            assert world.bob.marker not in r.text
            checked += 1
    assert checked > 60


def test_a_key_never_reaches_another_account(client: TestClient, world: World) -> None:
    bob = world.engine.account("bob")
    head, buffer = bob.head(), bob.sandbox(world.bob.sandbox_id).buffer().model_dump_json()
    checked = 0
    for method, template in _routes(client):
        if "{account}" not in template:
            continue
        path = _fill(template, "bob", world.bob)
        for auth in (world.ann.auth, world.ann.agent_auth):  # ann's owner key, ann's agent key
            r = _request(client, method, path, auth, template)
            assert r.status_code in (403, 404), f"{method} {path}: {r.status_code} {r.text}"
            assert not _leaks(r.text, world.bob), f"{method} {path} leaks {_leaks(r.text, world.bob)}: {r.text}"
            checked += 1
    assert checked >= 40
    assert bob.head() == head
    assert bob.sandbox(world.bob.sandbox_id).buffer().model_dump_json() == buffer
    app = client.app
    assert isinstance(app, FastAPI)
    assert [k.account for k in app.state.keys.list()].count("bob") == 2


def test_another_accounts_sandbox_under_my_name_is_404(client: TestClient, world: World) -> None:
    checked = 0
    for method, template in _routes(client):
        if "{sandbox_id}" not in template:
            continue
        path = _fill(template, "ann", world.bob)  # ann's account, bob's sandbox id
        for auth in (world.ann.auth, world.ann.agent_auth):
            r = _request(client, method, path, auth, template)
            # the role is checked before anything is looked up: an agent asking an owner's route is 403
            refused = auth == world.ann.agent_auth and ROUTES[(method, template)] == "owner"
            assert r.status_code == (403 if refused else 404), f"{method} {path}: {r.status_code} {r.text}"
            assert world.bob.marker not in r.text and "bob" not in r.text
            checked += 1
    assert checked >= 20
    assert world.bob.sandbox_id in {s.sandbox_id for s in world.engine.account("bob").sandboxes()}


def test_account_routes_without_an_account_in_the_path(client: TestClient, world: World) -> None:
    r = client.get("/v1/accounts", headers=world.ann.auth)
    assert r.status_code == 200 and [a["account"] for a in r.json()] == ["ann"]
    assert "bob" not in r.text
    r = client.post("/v1/accounts", headers=world.ann.auth, json={"name": "mallory"})
    assert r.status_code == 403 and "mallory" not in world.engine.accounts()
    assert {a["account"] for a in client.get("/v1/accounts", headers=world.admin).json()} == {"ann", "bob"}


def test_search_results_stay_in_their_account(client: TestClient, world: World) -> None:
    for who, other in ((world.ann, world.bob), (world.bob, world.ann)):
        for query in (who.marker, other.marker, "locker code"):
            r = client.post(f"/v1/accounts/{who.name}/search", headers=who.auth, json={"query": query})
            assert r.status_code == 200
            assert other.marker not in r.text
            r = client.post(f"/v1/accounts/{who.name}/sandboxes/{who.sandbox_id}/search", headers=who.auth,
                            json={"query": query})
            assert r.status_code == 200 and other.marker not in r.text
    hits = client.post("/v1/accounts/ann/search", headers=world.ann.auth,
                       json={"query": world.ann.marker}).json()["hits"]
    assert hits and world.ann.marker in hits[0]["text"]


def test_admin_key_reaches_every_account(client: TestClient, world: World, tmp_path: Path) -> None:
    r = client.get(f"/v1/accounts/bob/show/{world.bob.record_id}", headers=world.admin)
    assert r.status_code == 200 and world.bob.marker in r.text
