"""REST at the level of the best peers (issue 16 item 2; issue 18 item 6): record routes and pages,
/docs from packaged assets, JSON errors for disk faults, a rate per key, failed key attempts per
address, a storage quota per account."""

from __future__ import annotations

import errno
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from server_world import World, build_world
from soulpass.server.limits import ServerLimits, TokenBuckets


@pytest.fixture
def world(tmp_path: Path) -> World:
    return build_world(tmp_path / "home")


def _client(world: World, **limits: Any) -> Iterator[TestClient]:
    with TestClient(world.app(limits=ServerLimits(**limits))) as client:
        yield client


@pytest.fixture
def client(world: World) -> Iterator[TestClient]:
    yield from _client(world, rate=0, burst=0, failed_keys=0, quota_bytes=0)


def test_record_routes_and_pages(client: TestClient, world: World) -> None:
    h, base = world.ann.auth, "/v1/accounts/ann"
    for n in range(4):
        sb = client.post(f"{base}/sandboxes", headers=h, json={"name": f"s{n}"}).json()["sandbox_id"]
        client.post(f"{base}/sandboxes/{sb}/turns", headers=h, json={"text": f"turn {n}"})
        client.post(f"{base}/sandboxes/{sb}/archive", headers=h, json={})
    one = client.get(f"{base}/records/{world.ann.record_id}", headers=h)
    assert one.status_code == 200 and world.ann.marker in one.json()["text_excerpt"]
    assert client.get(f"{base}/records/TU_20200101_001", headers=h).status_code == 404
    page = client.get(f"{base}/records", headers=h, params={"kind": "turn_user", "limit": 2}).json()
    assert [r["text_excerpt"] for r in page["items"]] == ["turn 3", "turn 2"] and page["total"] == 5
    last = client.get(f"{base}/records", headers=h, params={"kind": "turn_user", "limit": 2, "offset": 4}).json()
    assert len(last["items"]) == 1 and last["next_offset"] is None
    past = client.get(f"{base}/records", headers=h, params={"kind": "turn_user", "offset": 2**63})  # the fuzzer's
    assert past.status_code == 200 and past.json()["items"] == [] and past.json()["total"] == 5
    old = client.get(f"{base}/records", headers=h, params={"kind": "turn_user", "at": 1}).json()
    assert old["total"] == 1
    assert client.get(f"{base}/records", headers=h, params={"kind": "bogus"}).status_code == 422
    assert client.get(f"{base}/records", headers=h, params={"kind": "fact", "limit": 5000}).status_code == 422

    first = client.get(f"{base}/versions", headers=h, params={"limit": 2})
    assert [e["version"] for e in first.json()] == [1, 2] and first.headers["X-Next-Since"] == "2"
    assert 'rel="next"' in first.headers["Link"]
    rest = client.get(f"{base}/versions", headers=h, params={"since": 2, "limit": 10})
    assert [e["version"] for e in rest.json()] == [3, 4, 5] and "X-Next-Since" not in rest.headers


def test_docs_are_served_from_packaged_assets(client: TestClient) -> None:
    pytest.importorskip("swagger_ui_bundle", reason="the 'server' extra's swagger-ui-bundle is not installed")
    page = client.get("/docs")
    assert page.status_code == 200 and "swagger-ui" in page.text
    urls = re.findall(r"""(?:src|href|url)\s*[:=]\s*['"]([^'"]+)['"]""", page.text)
    assert urls and not [u for u in urls if re.match(r"^(https?:)?//", u)], urls  # nothing from a CDN
    for url in (u for u in urls if u.startswith("/docs/assets/")):
        asset = client.get(url)
        assert asset.status_code == 200 and len(asset.content) > 500, url
    assert client.get("/openapi.json").status_code == 200


@pytest.mark.parametrize(("code", "status", "error"), [(errno.ENOSPC, 507, "InsufficientStorage"),
                                                       (errno.EIO, 503, "StorageUnavailable"),
                                                       (errno.EROFS, 503, "StorageUnavailable")])
def test_disk_faults_are_json_errors(client: TestClient, world: World, monkeypatch: pytest.MonkeyPatch,
                                     code: int, status: int, error: str) -> None:
    import soulpass.sessions.buffer as buffer

    def fail(*_args: Any, **_kwargs: Any) -> None:
        raise OSError(code, f"{errno.errorcode[code]} while writing {world.home}/accounts/ann/x")

    monkeypatch.setattr(buffer.SandboxBuffer, "append_many", fail)
    r = client.post(f"/v1/accounts/ann/sandboxes/{world.ann.sandbox_id}/turns", headers=world.ann.auth,
                    json={"text": "hello"})
    assert r.status_code == status and r.headers["content-type"] == "application/json"
    body = r.json()
    assert body["error"] == error and body["details"]["errno"] == errno.errorcode[code]
    assert str(world.home) not in r.text


def test_a_key_sending_too_fast_gets_429_with_retry_after(world: World) -> None:
    for client in _client(world, rate=1, burst=3, failed_keys=0, quota_bytes=0):
        codes = [client.get("/v1/accounts/ann/versions", headers=world.ann.auth).status_code for _ in range(5)]
        assert codes[:3] == [200, 200, 200] and codes[3:] == [429, 429]
        r = client.get("/v1/accounts/ann/versions", headers=world.ann.auth)
        assert r.json()["error"] == "RateLimited" and int(r.headers["Retry-After"]) >= 1
        assert client.get("/v1/accounts/bob/versions", headers=world.bob.auth).status_code == 200  # per key


def test_failed_key_attempts_are_limited_per_address(world: World) -> None:
    for client in _client(world, rate=0, burst=0, failed_keys=5, quota_bytes=0):
        bad = {"Authorization": "Bearer sp_00000000_" + "x" * 43}
        codes = [client.get("/v1/accounts/ann/versions", headers=bad).status_code for _ in range(7)]
        assert codes == [401] * 5 + [429] * 2
        r = client.get("/v1/accounts/ann/versions", headers=world.ann.auth)  # even a good key, for a while
        assert r.status_code == 429 and "failed API key attempts" in r.json()["message"]


def test_token_buckets_refill() -> None:
    now = [0.0]
    buckets = TokenBuckets(rate=2, capacity=2, clock=lambda: now[0])
    assert [buckets.wait("k") for _ in range(2)] == [0, 0] and buckets.wait("k") == pytest.approx(0.5)
    now[0] = 1.0
    assert buckets.wait("k") == 0 and buckets.wait("other") == 0


def test_an_account_over_its_quota_cannot_grow(world: World) -> None:
    stored = world.engine.account("ann").store.stored_bytes()
    assert stored > 0
    for client in _client(world, rate=0, burst=0, failed_keys=0, quota_bytes=stored + 2000):
        h, s = world.ann.auth, f"/v1/accounts/ann/sandboxes/{world.ann.sandbox_id}"
        assert client.post(f"{s}/turns", headers=h, json={"text": "small"}).status_code == 201
        big = client.post(f"{s}/turns", headers=h, json={"text": "x" * 5000})
        assert big.status_code == 507 and big.json()["error"] == "QuotaExceeded"
        assert big.json()["details"]["quota_bytes"] == stored + 2000
        assert client.post(f"{s}/search", headers=h, json={"query": "small"}).status_code == 200  # reads pass
        assert client.post(f"{s}/archive", headers=h, json={}).status_code == 200
        assert client.post("/v1/accounts/bob/sandboxes", headers=world.bob.auth,
                           json={"name": "x"}).status_code == 201  # another account's quota is its own
