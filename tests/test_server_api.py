"""The REST API end to end over the real engine: sessions, versions, search, errors, limits."""

from __future__ import annotations

import json
from pathlib import Path

from fastapi.testclient import TestClient

from server_world import World

OPENAPI = Path(__file__).resolve().parents[1] / "docs" / "openapi.json"


def test_served_openapi_matches_the_checked_in_file(client: TestClient) -> None:
    served = client.get("/openapi.json").json()
    assert OPENAPI.exists(), "docs/openapi.json is missing: soulpass serve --openapi > docs/openapi.json"
    assert served == json.loads(OPENAPI.read_text(encoding="utf-8")), (
        "docs/openapi.json is out of date: soulpass serve --openapi > docs/openapi.json")


def test_a_session_through_the_api(client: TestClient, world: World) -> None:
    h = world.ann.auth
    base = "/v1/accounts/ann"
    start = client.get(base, headers=h).json()["version"]
    sb = client.post(f"{base}/sandboxes", headers=h, json={"name": "chat", "sandbox_id": "chat-1"})
    assert sb.status_code == 201 and sb.json()["parent_version"] == start
    s = f"{base}/sandboxes/chat-1"
    tu = client.post(f"{s}/turns", headers=h, json={"text": "I adopted a parrot named Kiwi", "fields": {
        "intent": "share"}}).json()["id"]
    assert tu.startswith("tu_temp_")
    tl = client.post(f"{s}/turns", headers=h, json={"speaker": "eva", "text": "Kiwi is a lovely name"}).json()["id"]
    assert tl.startswith("tl_temp_")
    ep = client.post(f"{s}/episodes", headers=h, json={"turn_refs": [tu, tl], "summary": {
        "action_taken": "talked about pets", "key_outcome": "parrot Kiwi", "future_implication": "ask about Kiwi"}})
    assert ep.status_code == 201
    assert client.post(f"{s}/facts", headers=h, json={"subject": "Ann", "predicate": "owns",
                                                        "object": "a parrot", "confidence": 0.95}).status_code == 201
    assert client.post(f"{s}/states/ehm", headers=h, json={"data": {"calm": 0.7}}).status_code == 201
    assert client.post(f"{s}/profile", headers=h, json={"data": {"pets": ["Kiwi"]}}).status_code == 201
    assert client.post(f"{s}/core", headers=h, json={"section": "values", "value": "kindness",
                                                      "confidence": 0.95, "reason": "said so"}).status_code == 201
    assert client.post(f"{s}/sensory", headers=h, json={"content": "page text about parrots"}).status_code == 201
    buf = client.get(f"{s}/buffer", headers=h).json()
    assert len(buf["new_turns"]) == 2 and len(buf["semantic_candidates"]) == 1 and "ehm_state" in buf["state_deltas"]
    hits = client.post(f"{s}/search", headers=h, json={"query": "parrot Kiwi"}).json()["hits"]
    assert tu in [x["id"] for x in hits]
    plan = client.post(f"{s}/archive", headers=h, json={"dry_run": True}).json()
    assert plan["status"] == "planned" and plan["version"] == start + 1
    done = client.post(f"{s}/archive", headers=h, json={}).json()
    assert done["status"] == "committed" and done["version"] == start + 1
    again = client.post(f"{s}/archive", headers=h, json={}).json()
    assert again == {"status": "already_archived", "version": start + 1, "summary": None, "warning": None,
                     "items": None, "needs_review": None}
    assert client.post(f"{s}/turns", headers=h, json={"text": "late"}).status_code in (404, 409)

    log = client.get(f"{base}/versions", headers=h).json()
    assert log[-1]["version"] == start + 1 and log[-1]["source_sandbox"] == "chat-1"
    permanent = done["summary"]["id_map"][tu]
    shown = client.get(f"{base}/show/{permanent}", headers=h).json()
    assert "Kiwi" in json.dumps(shown)
    assert client.get(f"{base}/show/{permanent}", headers=h, params={"at": start}).status_code == 404
    assert client.get(f"{base}/show/state:ehm", headers=h).json()["data"] == {"calm": 0.7}
    diff = client.get(f"{base}/diff", headers=h, params={"a": start, "b": start + 1}).json()
    assert permanent in json.dumps(diff)
    hits = client.post(f"{base}/search", headers=h, json={"query": "parrot", "kinds": ["turn_user"]}).json()["hits"]
    assert [x["id"] for x in hits] == [permanent]
    assert client.post(f"{base}/search", headers=h, json={"query": "parrot", "at": start}).json()["hits"] == []

    rolled = client.post(f"{base}/rollback", headers=h, json={"version": start}).json()["version"]
    assert rolled == start + 2
    assert client.get(f"{base}/show/{permanent}", headers=h).status_code == 404
    assert client.get(f"{base}/show/{permanent}", headers=h, params={"at": start + 1}).status_code == 200


def test_discard_leaves_the_master_alone(client: TestClient, world: World) -> None:
    h, base = world.ann.auth, "/v1/accounts/ann"
    head = client.get(base, headers=h).json()["version"]
    sid = client.post(f"{base}/sandboxes", headers=h, json={"name": "throwaway"}).json()["sandbox_id"]
    client.post(f"{base}/sandboxes/{sid}/turns", headers=h, json={"text": "forget me"})
    assert client.delete(f"{base}/sandboxes/{sid}", headers=h).status_code == 204
    assert client.get(f"{base}/sandboxes/{sid}", headers=h).status_code == 404
    assert sid not in [x["sandbox_id"] for x in client.get(f"{base}/sandboxes", headers=h).json()]
    assert client.get(base, headers=h).json()["version"] == head


def test_errors_name_the_problem(client: TestClient, world: World) -> None:
    h, base = world.ann.auth, "/v1/accounts/ann"
    r = client.get(f"{base}/sandboxes/nope/buffer", headers=h)
    assert r.status_code == 404 and r.json()["error"] == "NotFound" and "nope" in r.json()["message"]
    r = client.post(f"{base}/sandboxes", headers=h, json={"name": "x", "sandbox_id": world.ann.sandbox_id})
    assert r.status_code == 409 and "already exists" in r.json()["message"]
    r = client.post(f"{base}/sandboxes", headers=h, json={"name": "x", "sandbox_id": "../etc"})
    assert r.status_code == 422 and r.json()["error"] == "InvalidInput"
    r = client.post(f"{base}/sandboxes/{world.ann.sandbox_id}/facts", headers=h, json={"confidence": 3})
    assert r.status_code == 422 and "confidence" in r.text
    r = client.post(f"{base}/sandboxes/{world.ann.sandbox_id}/turns", headers={
        **h, "content-type": "application/json"}, content=b'{"text": ')
    assert r.status_code == 400 and r.json()["error"] == "BadRequest"
    r = client.post(f"{base}/sandboxes/{world.ann.sandbox_id}/turns", headers=h, json={"text": "x", "bogus": 1})
    assert r.status_code == 422 and "bogus" in r.text
    r = client.post(f"{base}/sandboxes/{world.ann.sandbox_id}/turns", headers=h,
                    json={"text": "x", "fields": {"confidence": "very"}})
    assert r.status_code == 422
    assert client.get(f"{base}/show/TU_20000101_001", headers=h).status_code == 404
    assert client.get(f"{base}/diff", headers=h, params={"a": 0, "b": 999}).status_code == 404
    assert client.post(f"{base}/rollback", headers=h, json={"version": 999}).status_code == 404
    r = client.post("/v1/accounts", headers=world.admin, json={"name": "ann"})
    assert r.status_code == 409 and r.json()["error"] == "Conflict"
    for body in (r.json(), client.get(f"{base}/sandboxes/nope", headers=h).json()):
        assert str(world.home) not in json.dumps(body)  # the server's folders stay private
    r = client.get("/v1/nowhere", headers=h)
    assert r.status_code == 404 and r.json()["error"] == "NotFound"


def test_an_archived_sandbox_is_gone(client: TestClient, world: World) -> None:
    """docs/rest.md said 409 where the server answers 404 (issue 40 item 21): 404 it is, and the docs agree."""
    h, base = world.ann.auth, "/v1/accounts/ann"
    sid = client.post(f"{base}/sandboxes", headers=h, json={"name": "a"}).json()["sandbox_id"]
    assert client.post(f"{base}/sandboxes/{sid}/archive", headers=h, json={}).status_code == 200
    for r in (client.delete(f"{base}/sandboxes/{sid}", headers=h),
              client.post(f"{base}/sandboxes/{sid}/turns", headers=h, json={"text": "late"}),
              client.post(f"{base}/sandboxes/{sid}/archive", headers=h, json={})):
        assert r.status_code == 404 and r.json()["error"] == "NotFound", r.text
    rest = (Path(__file__).resolve().parents[1] / "docs" / "rest.md").read_text(encoding="utf-8")
    row = next(line for line in rest.splitlines() if line.startswith("| 409 |"))
    assert "archived" not in row and "archived or discarded no longer exists" in rest


def test_request_size_limit(world: World) -> None:
    client = TestClient(world.app(max_body=2048))
    url = f"/v1/accounts/ann/sandboxes/{world.ann.sandbox_id}/turns"
    r = client.post(url, headers=world.ann.auth, json={"text": "x" * 4096})
    assert r.status_code == 413 and r.json()["error"] == "TooLarge"

    def chunks():  # type: ignore[no-untyped-def]
        yield b'{"text": "'
        for _ in range(10):
            yield b"y" * 512
        yield b'"}'

    r = client.post(url, headers={**world.ann.auth, "content-type": "application/json"}, content=chunks())
    assert r.status_code == 413
    assert "y" * 100 not in world.engine.account("ann").sandbox(world.ann.sandbox_id).buffer().model_dump_json()
    assert client.post(url, headers=world.ann.auth, json={"text": "small"}).status_code == 201


def test_admin_manages_accounts_and_keys(client: TestClient, world: World) -> None:
    r = client.post("/v1/accounts", headers=world.admin, json={"name": "carol"})
    assert r.status_code == 201 and r.json() == {"account": "carol", "version": 0, "sandboxes": 0}
    new = client.post("/v1/accounts/carol/keys", headers=world.admin, json={"label": "bot"}).json()
    carol = {"Authorization": f"Bearer {new['key']}"}
    assert client.get("/v1/accounts/carol", headers=carol).status_code == 200
    assert client.get("/v1/accounts/ann", headers=carol).status_code == 403
    assert client.post("/v1/accounts/carol/keys", headers=carol, json={}).status_code == 403
    listed = client.get("/v1/accounts/carol/keys", headers=carol).json()
    assert [k["key_id"] for k in listed] == [new["key_id"]] and new["key"] not in json.dumps(listed)
    assert client.delete(f"/v1/accounts/carol/keys/{new['key_id']}", headers=world.admin).status_code == 204
    assert client.get("/v1/accounts/carol", headers=carol).status_code == 401
    assert client.delete(f"/v1/accounts/ann/keys/{world.bob.key_id}", headers=world.admin).status_code == 404
    assert client.get("/v1/accounts/bob", headers=world.bob.auth).status_code == 200
