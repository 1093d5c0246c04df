"""Keys with roles (issue 41 item 4): every REST route, every /ui action and every MCP tool walked
with an agent key, an owner key and the admin key of the account, on a home folder and on
PostgreSQL. An agent key reads, searches, writes to sandboxes and archives; rollback, edit, forget,
export, import, deleting the account and its keys are an owner's; making accounts and keys an
admin's. A refusal is 403 naming the role needed and changes nothing.

The routes and tools come from the app and the MCP server, so a new one is walked without anyone
remembering to add it; what each needs is written here apart from ``soulpass.server.roles`` so a
role changed there by mistake fails here.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from fastapi.testclient import TestClient

import soulpass
from server_world import World, app_routes, build_world, serving
from soulpass.server.app import app_endpoints
from soulpass.server.keyring import key_store
from soulpass.server.roles import ROUTES, TOOLS, RouteRoles
from test_server_isolation import QUERY, _body, _fill

_A = "/v1/accounts/{account}"
# What the issue names as the owner's; everything else under an account is an agent's.
OWNER = {("POST", f"{_A}/rollback"), ("PATCH", f"{_A}/records/{{record_id}}"),
         ("DELETE", f"{_A}/records/{{record_id}}"), ("POST", f"{_A}/forget"), ("GET", f"{_A}/export"),
         ("POST", f"{_A}/import"), ("DELETE", _A), ("GET", f"{_A}/keys"),
         ("POST", f"{_A}/sandboxes/{{sandbox_id}}/approve"), ("GET", f"{_A}/sandboxes/{{sandbox_id}}/history"),
         ("DELETE", f"{_A}/sandboxes/{{sandbox_id}}/history")}
ADMIN = {("POST", "/v1/accounts"), ("POST", f"{_A}/keys"), ("DELETE", f"{_A}/keys/{{key_id}}")}
PUBLIC = {("GET", "/openapi.json"), ("GET", "/docs")}
OWNER_TOOLS = {"rollback_memory", "edit_memory", "forget_memory", "delete_account", "export_account",
               "import_memories", "approve_archive"}
# Walked last, in this order: what changes the world the other requests read (archive ends the
# sandbox, rollback takes the record out of HEAD); (method, the path's ending).
LAST = (("POST", "/archive"), ("POST", "/approve"), ("PATCH", "/records/{record_id}"),
        ("DELETE", "/records/{record_id}"), ("POST", "/rollback"), ("DELETE", "/keys/{key_id}"))
# What an allowed request answers when it is not 2xx: deleting an account without its typed name.
NOT_2XX = {("DELETE", _A): 422}
# Query parameters the walk sends, by the path's ending (beside the isolation test's).
WALK_QUERY = {**QUERY, "/records": {"kind": "turn_user"}}


@pytest.fixture(params=["files", "postgres"])
def world(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[World]:
    if request.param == "files":
        yield build_world(tmp_path / "home")
        return
    from postgres_helpers import postgres_url

    for url in postgres_url(tmp_path):
        yield build_world(url)


def _auth(world: World, role: str) -> dict[str, str]:
    return {"agent": world.ann.agent_auth, "owner": world.ann.auth, "admin": world.admin}[role]


def _needs(method: str, path: str) -> str:
    if (method, path) in PUBLIC:
        return "public"
    if (method, path) in ADMIN:
        return "admin"
    return "owner" if (method, path) in OWNER else "agent"


def _may(role: str, needed: str) -> bool:
    order = ("public", "agent", "owner", "admin")
    return order.index(role) >= order.index(needed)


def _api_routes(app: Any) -> list[tuple[str, str]]:
    routes = sorted({r for r in app_routes(app) if not r[1].startswith("/ui")})
    assert len(routes) >= 40
    def rank(route: tuple[str, str]) -> int:
        return next((n for n, (m, end) in enumerate(LAST) if route[0] == m and route[1].endswith(end)), -1)

    return sorted(routes, key=lambda r: (rank(r), r))


def _app(home: Path) -> Any:
    from soulpass.server.app import create_app

    sp = soulpass.open(home, embedder="none")
    return create_app(sp, keys=key_store(sp))


def test_every_route_and_tool_has_a_declared_role(tmp_path: Path) -> None:
    """The table names every route the app answers and every MCP tool, and nothing else; what it
    says agrees with what this test expects of each."""
    from soulpass.mcp.server import TOOL_NAMES

    served = set(app_routes(_app(tmp_path)))
    assert served == set(ROUTES), served ^ set(ROUTES)
    for (method, path), needed in ROUTES.items():
        if not path.startswith("/ui"):
            assert needed == _needs(method, path), (method, path, needed)
    assert {p for (m, p), n in ROUTES.items() if p.startswith("/ui") and n == "owner"} == {
        "/ui/a/{account}/rollback", "/ui/a/{account}/forget", "/ui/a/{account}/sandboxes/{sandbox_id}",
        "/ui/a/{account}/sandboxes/{sandbox_id}/approve", "/ui/a/{account}/sandboxes/{sandbox_id}/discard"}
    assert set(TOOLS) == set(TOOL_NAMES)
    assert {t for t, n in TOOLS.items() if n == "owner"} == OWNER_TOOLS
    assert set(TOOLS.values()) == {"agent", "owner"}


def test_a_route_without_a_role_stops_the_app_from_being_built(tmp_path: Path) -> None:
    def fresh() -> None: ...

    endpoints = [*app_endpoints(_app(tmp_path)), ("POST", "/v1/accounts/{account}/brand-new", fresh)]
    with pytest.raises(LookupError, match=r"POST /v1/accounts/\{account\}/brand-new has no role"):
        RouteRoles.of(iter(endpoints))


@pytest.mark.parametrize("role", ["agent", "owner", "admin"])
def test_every_route_with_each_role(world: World, role: str) -> None:
    """Each REST route of ann's account with ann's agent key, ann's owner key, the admin key: what
    the role may do passes the gate (2xx), what it may not is 403 naming the role and changes nothing."""
    client = TestClient(world.app())
    ann = world.engine.account("ann")
    refused = allowed = 0
    for method, template in _api_routes(client.app):
        needed = _needs(method, template)
        if needed == "public":
            continue
        path = _fill(template, "ann", world.ann)
        if (method, template) == ("DELETE", f"{_A}/sandboxes/{{sandbox_id}}"):  # discard one of its own
            path = path.replace(world.ann.sandbox_id, ann.create_sandbox("to discard").id)
        if template.endswith("/sandboxes/{sandbox_id}/history"):  # read or delete a kept one's
            path = path.replace(world.ann.sandbox_id, _kept_sandbox(ann))
        body = {**_body(method, template), "ids": [world.ann.record_id], "dry_run": True} if template.endswith(
            "/forget") else _body(method, template)  # a forget that finds something (and erases nothing)
        head = ann.head()
        query = next((q for suffix, q in WALK_QUERY.items() if template.endswith(suffix)), None)
        r = client.request(method, path, headers=_auth(world, role), json=body, params=query)
        if _may(role, needed):
            expected = NOT_2XX.get((method, template))
            ok = r.status_code == expected if expected else 200 <= r.status_code < 300
            assert ok, f"{role}: {method} {template}: {r.status_code} {r.text[:300]}"
            allowed += 1
        else:
            assert r.status_code == 403, f"{role}: {method} {template}: {r.status_code} {r.text[:300]}"
            out = r.json()
            assert out["error"] == "Forbidden" and out["details"] == {"needed": needed, "role": role}, out
            assert f"needs an {needed} key" in out["message"] and f"is an {role} key" in out["message"], out
            assert ann.head() == head, f"{method} {template} refused, yet it committed"
            refused += 1
    assert refused == {"agent": len(OWNER) + len(ADMIN), "owner": len(ADMIN), "admin": 0}[role]
    assert allowed >= 40 - refused


def _kept_sandbox(acct: soulpass.Account) -> str:
    """A sandbox its archive kept for its history (a fact left out); its id."""
    sb = acct.create_sandbox("kept")
    sb.add_turn("user", "kept for its history")
    fact = sb.add_fact("Ann", "keeps", "a secret", confidence=0.95)
    left_out = [i.id for i in acct.preview(sb.id).items if fact in i.temp_ids]
    assert left_out and isinstance(acct.approve(sb.id, exclude=left_out, reason="walk"), soulpass.Committed)
    return sb.id


def test_a_kept_sandbox_is_read_by_an_owner_only(world: World) -> None:
    """The history holds what an owner left out of memory: an agent key gets 403 for it, and 409 for
    the sandbox's own reads (buffer, search), so no route shows it the excluded text."""
    client = TestClient(world.app())
    ann = world.engine.account("ann")
    sid = _kept_sandbox(ann)
    sb = f"/v1/accounts/ann/sandboxes/{sid}"
    assert client.get(f"{sb}/history", headers=world.ann.agent_auth).status_code == 403
    for method, url, body in (("GET", f"{sb}/buffer", None), ("POST", f"{sb}/search", {"query": "secret"}),
                              ("GET", f"{sb}/log", None), ("POST", f"{sb}/turns", {"text": "more"})):
        r = client.request(method, url, headers=world.ann.agent_auth, json=body)
        assert r.status_code == 409 and "a secret" not in r.text, (method, url, r.status_code, r.text)
    assert all(s["sandbox_id"] != sid for s in client.get("/v1/accounts/ann/sandboxes",
                                                           headers=world.ann.agent_auth).json())
    history = client.get(f"{sb}/history", headers=world.ann.auth)
    assert history.status_code == 200, history.text
    (left_out,) = [e for e in history.json()["events"] if e["outcome"] == "excluded"]
    assert left_out["text"] == "Ann keeps a secret" and history.json()["excluded_reason"] == "walk"
    assert client.delete(f"{sb}/history", headers=world.ann.agent_auth).status_code == 403
    assert client.delete(f"{sb}/history", headers=world.ann.auth).status_code == 204
    assert client.get(f"{sb}/history", headers=world.ann.auth).status_code == 404


def test_an_agent_key_is_refused_what_only_an_owner_may_do(world: World) -> None:
    """The issue's list, one by one: rollback, forget, edit, export and import are 403 for an agent
    key, and memory is as it was; the owner key of the same account does each."""
    client = TestClient(world.app())
    ann = world.engine.account("ann")
    head, records = ann.head(), [r.id for r in ann.records("turn_user")]
    api, rid = "/v1/accounts/ann", world.ann.record_id
    asks = [("POST", f"{api}/rollback", {"json": {"version": 0}}),
            ("POST", f"{api}/forget", {"json": {"ids": [rid], "reason": "agent tries"}}),
            ("DELETE", f"{api}/records/{rid}", {"params": {"reason": "agent tries"}}),
            ("PATCH", f"{api}/records/{rid}", {"json": {"fields": {"text_excerpt": "rewritten"}}}),
            ("GET", f"{api}/export", {}),
            ("POST", f"{api}/import", {"json": {"source": "jsonl", "content": '{"conversation_id": "c", "role": '
                                                  '"user", "text": "imported", "timestamp": "2024-01-01T00:00:00Z"}'}})]
    for method, url, kwargs in asks:
        r = client.request(method, url, headers=world.ann.agent_auth, **kwargs)
        assert r.status_code == 403 and "owner" in r.json()["message"], (method, url, r.text)
    assert ann.head() == head and [r.id for r in ann.records("turn_user")] == records
    for method, url, kwargs in reversed(asks):  # the owner: import, export, edit, forget, rollback
        r = client.request(method, url, headers=world.ann.auth, **kwargs)
        assert r.status_code == 200, (method, url, r.text)
    assert ann.head() > head


def test_an_agent_key_runs_a_whole_session(world: World) -> None:
    """What an agent does all day: open a sandbox, write a turn, a fact and a profile change, search,
    archive; and discard a second one."""
    client = TestClient(world.app())
    h, api = world.ann.agent_auth, "/v1/accounts/ann"
    sid = client.post(f"{api}/sandboxes", headers=h, json={"name": "chat"}).json()["sandbox_id"]
    assert client.post(f"{api}/sandboxes/{sid}/turns", headers=h, json={"text": "I moved to Ghent"}).status_code == 201
    fact = {"subject": "User", "predicate": "lives_in", "object": "Ghent", "confidence": 0.95}
    assert client.post(f"{api}/sandboxes/{sid}/facts", headers=h, json=fact).status_code == 201
    assert client.post(f"{api}/sandboxes/{sid}/profile", headers=h, json={"data": {"city": "Ghent"}}).status_code == 201
    found = client.post(f"{api}/sandboxes/{sid}/search", headers=h, json={"query": "Ghent"}).json()["hits"]
    assert found
    done = client.post(f"{api}/sandboxes/{sid}/archive", headers=h, json={}).json()
    assert done["status"] == "committed"
    assert world.engine.account("ann").show("profile").model_dump(mode="json")["fields"]["city"] == "Ghent"
    other = client.post(f"{api}/sandboxes", headers=h, json={"name": "scratch"}).json()["sandbox_id"]
    assert client.delete(f"{api}/sandboxes/{other}", headers=h).status_code == 204


def test_keys_carry_their_role_through_the_api(world: World) -> None:
    client = TestClient(world.app())
    made = client.post("/v1/accounts/ann/keys", headers=world.admin, json={"label": "bot", "role": "agent"})
    assert made.status_code == 201 and made.json()["role"] == "agent", made.text
    bot = {"Authorization": f"Bearer {made.json()['key']}"}
    assert client.get("/v1/accounts/ann/versions", headers=bot).status_code == 200
    assert client.post("/v1/accounts/ann/rollback", headers=bot, json={"version": 0}).status_code == 403
    listed = {k["key_id"]: k["role"] for k in client.get("/v1/accounts/ann/keys", headers=world.ann.auth).json()}
    assert listed[made.json()["key_id"]] == "agent" and listed[world.ann.key_id] == "owner"
    bad = client.post("/v1/accounts/ann/keys", headers=world.admin, json={"role": "superuser"})
    assert bad.status_code == 422 and "role" in bad.text
    default = client.post("/v1/accounts/ann/keys", headers=world.admin, json={}).json()
    assert default["role"] == "owner"  # what every key could do before roles


# --- the memory browser ---------------------------------------------------------------------

def _ui_client(world: World, key: str) -> TestClient:
    from soulpass.server.ui.routes import COOKIE

    client = TestClient(world.app())
    client.cookies.set(COOKIE, key, path="/ui")
    return client


def test_the_browser_refuses_an_agent_what_changes_memory(world: World) -> None:
    """Every /ui page but a sandbox's review page opens for ann's agent key; the review page and the
    actions (rollback, forget, approve, discard) are 403 pages that name the role, and change
    nothing; the owner key's go through. The version page offers the
    rollback form to the owner only."""
    ann = world.engine.account("ann")
    more = ann.create_sandbox("more")
    more.add_turn("user", "another day")
    more.archive()  # version 2: version 1's page offers a rollback
    head = ann.head()
    agent = _ui_client(world, world.ann.agent_key)
    pages = sorted(p for m, p in app_routes(agent.app) if m == "GET" and p.startswith("/ui/a/"))  # type: ignore[arg-type]
    assert len(pages) >= 8
    owner = _ui_client(world, world.ann.key)
    for template in pages:  # the review page of a sandbox is the owner's: it approves and discards
        params = {"a": 0, "b": 1} if template.endswith("diff") else None
        r = agent.get(_fill(template, "ann", world.ann), params=params)
        want = 403 if ROUTES[("GET", template)] == "owner" else 200
        assert r.status_code == want, (template, r.status_code)
        assert owner.get(_fill(template, "ann", world.ann), params=params).status_code == 200, template
    assert ROUTES[("GET", "/ui/a/{account}/sandboxes/{sandbox_id}")] == "owner"
    page = agent.get("/ui/a/ann/v/1").text
    assert 'id="rollback-form"' not in page and 'id="needs-owner"' in page
    assert 'id="forget-start"' not in agent.get(f"/ui/a/ann/r/{world.ann.record_id}").text
    forms = {"rollback": {"version": "1", "confirm": "1"},
             "forget": {"record_id": world.ann.record_id, "reason": "r", "confirm": world.ann.record_id}}
    for action, form in forms.items():
        r = agent.post(f"/ui/a/ann/{action}", data=form, follow_redirects=False)
        assert r.status_code == 403 and "owner role" in r.text and "agent role" in r.text, (action, r.text)
    for action, form in {"approve": {"action": "all"}, "discard": {"confirm": "yes"}}.items():  # the review page's
        r = agent.post(f"/ui/a/ann/sandboxes/{world.ann.sandbox_id}/{action}", data=form, follow_redirects=False)
        assert r.status_code == 403 and "owner role" in r.text, (action, r.text)
    assert world.ann.sandbox_id in {s.sandbox_id for s in ann.sandboxes()}
    assert ann.head() == head and world.ann.marker in ann.show(world.ann.record_id).model_dump_json()
    assert 'id="rollback-form"' in owner.get("/ui/a/ann/v/1").text
    assert 'id="forget-start"' in owner.get(f"/ui/a/ann/r/{world.ann.record_id}").text
    for action, form in forms.items():
        r = owner.post(f"/ui/a/ann/{action}", data=form, follow_redirects=False)
        assert r.status_code == 303, (action, r.text)
    assert ann.head() == head + 2


# --- MCP over HTTP --------------------------------------------------------------------------

MCP_ARGS: dict[str, dict[str, Any]] = {
    "rag_search": {"query": "locker"}, "remember": {"what": "turn", "text": "x"},
    "manage_clipboard": {"action": "show"}, "get_context": {"message": "locker"},
    "create_sandbox": {}, "archive_session": {"dry_run": True}, "preview_archive": {}, "discard_session": {},
    "approve_archive": {"sandbox_id": "{to_approve}", "reason": "walk"},
    "memory_log": {},
    "import_memories": {"source": "jsonl", "content": "", "dry_run": True},
    "edit_memory": {"record_id": "{record_id}", "fields": {"text_excerpt": "x"}},
    "memory_history": {"record_id": "{record_id}"},
    "forget_memory": {"reason": "asked", "ids": ["{record_id}"], "dry_run": True},
    "export_account": {}, "delete_account": {"confirm": "not-the-name"},  # refused by its confirmation
    "get_memory": {"ref": "core"}, "list_memories": {"kind": "turn_user"}, "search_memory": {"query": "locker"},
    "memory_diff": {"a": 0, "b": 1}, "rollback_memory": {"version": 1},
    "add_journal_entry": {"text": "an entry"}, "read_identity": {},
    "propose_core": {"section": "values", "value": "curiosity", "reason": "said so"},
    "update_profile": {"data": {"city": "Ghent"}},
}
# Allowed calls that still fail, and why (the gate let them through).
MCP_EXPECTED_ERRORS = {"delete_account": "InvalidInput"}


@pytest.mark.parametrize("role", ["agent", "owner", "admin", "other"])
def test_every_mcp_tool_with_each_role(world: World, role: str) -> None:
    """Each MCP tool over HTTP for ann with her agent key, her owner key and the admin key (naming
    ann): an agent key's owner-only calls are tool errors ``Forbidden: …`` naming the role, and
    change nothing. Bob's owner key naming ann (``other``) acts for bob: nothing of ann's is read
    or changed."""
    from soulpass.mcp.server import http_app
    from test_mcp_http import _client

    keys = key_store(world.engine)
    secret = {"agent": world.ann.agent_key, "owner": world.ann.key, "admin": world.admin_key,
              "other": world.bob.key}[role]
    headers = {"Authorization": f"Bearer {secret}", "X-Soulpass-Account": "ann"}  # heeded for the admin key only
    ann = world.engine.account("ann")
    to_approve = ann.create_sandbox("to approve")
    to_approve.add_turn("user", "approve me")
    head = ann.head()
    refused: list[str] = []

    async def walk(url: str) -> None:
        async with _client(url, headers) as client:
            listed = {t.name for t in (await client.list_tools()).tools}
            # a key is offered only what its role may call; every tool is called all the same
            assert listed == (set(MCP_ARGS) - OWNER_TOOLS if role == "agent" else set(MCP_ARGS)), listed
            names = sorted(MCP_ARGS)
            # the session first (the tools that act on it need one), what ends or rewinds it last
            for name in sorted(names, key=lambda n: (n != "create_sandbox", n in ("rollback_memory", "discard_session"),
                                                     n)):
                args = json.loads(json.dumps(MCP_ARGS[name]).replace("{record_id}", world.ann.record_id)
                                  .replace("{to_approve}", to_approve.id))
                result = await client.call_tool(name, args)
                text = " ".join(getattr(c, "text", "") for c in result.content)
                if role == "other":
                    assert world.ann.marker not in json.dumps(result.model_dump(mode="json")), (name, text)
                elif role == "agent" and name in OWNER_TOOLS:
                    assert result.is_error and text.startswith("Forbidden: "), (name, text)
                    assert f"the tool {name} needs an owner key" in text and "is an agent key" in text, text
                    refused.append(name)
                elif name in MCP_EXPECTED_ERRORS:
                    assert result.is_error and MCP_EXPECTED_ERRORS[name] in text, (name, text)
                else:
                    assert not result.is_error, (role, name, text)

    with serving(http_app(world.engine, keys)) as base:  # type: ignore[arg-type]  # an ASGI app, not FastAPI
        anyio.run(walk, f"{base}/mcp")
    assert sorted(refused) == (sorted(OWNER_TOOLS) if role == "agent" else [])
    if role in ("agent", "other"):
        assert not any(e.kind == "rollback" for e in ann.log()), "a rollback by a key without the right"
        kept = ann.show(world.ann.record_id).model_dump_json()
        assert world.ann.marker in kept, "an edit or forget without the right"
    if role == "other":
        assert ann.head() == head
    else:
        assert any(e.kind == "rollback" for e in ann.log()) == (role != "agent")


def test_a_key_file_from_before_roles_reads_as_owner_keys(tmp_path: Path) -> None:
    """A keys.json written before roles (format /1, no role) keeps working: each key is an owner
    key (an admin key stays admin); the next write adds the roles and keeps those keys."""
    from soulpass.server.keys import FileKeyStore, key_hash

    secret = "sp_0a0b0c0d_" + "s" * 43
    rows = [{"key_id": "0a0b0c0d", "account": "ann", "created_at": "2025-01-01T00:00:00+00:00", "label": "",
             "sha256": key_hash(secret)},
            {"key_id": "0e0f0a0b", "account": None, "created_at": "2025-01-01T00:00:00+00:00", "label": "",
             "sha256": key_hash("x")}]
    (tmp_path / "keys.json").write_text(json.dumps({"format": "soulpass-keys/1", "keys": rows}), encoding="utf-8")
    keys = FileKeyStore(tmp_path)
    old = keys.verify(secret)
    assert old is not None and old.role == "owner" and old.public()["role"] == "owner"
    assert [k.public()["role"] for k in keys.list()] == ["admin", "owner"]
    keys.create("ann", role="agent")
    saved = json.loads((tmp_path / "keys.json").read_text(encoding="utf-8"))
    assert saved["format"] == "soulpass-keys/2"
    assert sorted(k["role"] for k in saved["keys"]) == ["agent", "owner", "owner"]
    assert FileKeyStore(tmp_path).verify(secret) == old


def test_a_key_file_of_an_unknown_format_is_refused(tmp_path: Path) -> None:
    from soulpass.errors import Corrupted
    from soulpass.server.keys import FileKeyStore

    (tmp_path / "keys.json").write_text(json.dumps({"format": "soulpass-keys/9", "keys": []}), encoding="utf-8")
    with pytest.raises(Corrupted, match="soulpass-keys/9"):
        FileKeyStore(tmp_path).list()
    bad = {"format": "soulpass-keys/2", "keys": [{"key_id": "0a0b0c0d", "account": "ann", "created_at": "x",
                                                  "sha256": "y", "role": "root"}]}
    (tmp_path / "keys.json").write_text(json.dumps(bad), encoding="utf-8")
    with pytest.raises(Corrupted, match="root"):
        FileKeyStore(tmp_path).list()


def test_postgres_keys_made_before_roles_become_owner_keys(tmp_path: Path) -> None:
    """Migration 0006_api_key_roles: the rows of 0002_api_keys gain a role, owner; the database
    refuses an unknown role and an admin key (no account) with role agent."""
    from postgres_helpers import postgres_url

    psycopg = pytest.importorskip("psycopg")
    from soulpass.server.keys import key_hash
    from soulpass.server.pg_keys import KEY_TABLES, PostgresKeyStore
    from soulpass.store.postgres.connections import database

    for url in postgres_url(tmp_path):
        sp = soulpass.open(url, embedder="none")
        db = database(url)
        assert db.migrate(KEY_TABLES[:1]) == ["0002_api_keys"]
        secret = "sp_0a0b0c0d_" + "s" * 43
        with db.connection() as conn:
            conn.execute("INSERT INTO api_keys (key_id, account, created_at, label, sha256) VALUES "
                         "('0a0b0c0d', 'ann', '2025-01-01', '', %s), ('0e0f0a0b', NULL, '2025-01-01', '', 'h')",
                         (key_hash(secret),))
        keys = key_store(sp)
        assert isinstance(keys, PostgresKeyStore)
        old = keys.verify(secret)
        assert old is not None and old.role == "owner"
        assert [k.public()["role"] for k in keys.list()] == ["admin", "owner"]
        agent = keys.create("ann", role="agent")
        assert keys.verify(agent.secret) == agent.key and agent.key.role == "agent"
        for account, role in (("ann", "root"), (None, "agent")):
            with pytest.raises(psycopg.errors.CheckViolation), db.connection() as conn:
                conn.execute("INSERT INTO api_keys (key_id, account, created_at, label, sha256, role) "
                             "VALUES ('0c0c0c0c', %s, 'x', '', 'h', %s)", (account, role))


def test_roles_travel_with_keys_between_stores(tmp_path: Path) -> None:
    """``soulpass migrate`` carries keys with their hashes: an agent key stays an agent key."""
    from postgres_helpers import postgres_url
    from soulpass.server.keys import FileKeyStore, carry_keys

    files = FileKeyStore(tmp_path / "home")
    agent, owner = files.create("ann", role="agent"), files.create("ann")
    for url in postgres_url(tmp_path):
        sp = soulpass.open(url, embedder="none")
        into = key_store(sp)
        carry_keys(files, into, ["ann"])
        got = {k.key_id: k.role for k in into.list()}
        assert got == {agent.key.key_id: "agent", owner.key.key_id: "owner"}
