"""Issue 41 "Done when", over REST: an agent's archive that touches what the review policy holds
waits (202, nothing committed); the owner previews every item, approves all but the fact, and the
fact is nowhere (master, log text, catalog, full text, vectors) but the kept sandbox's history (an
owner's, until deleted) while the version entry names the exclusion. Real parts: the files backend,
the FastAPI app, the real embedding model.

Until keys carry roles (issue 41 item 4), which key is the agent's is said to ``create_app`` through
``may_approve`` (the one seam, ``server.access.may_approve``); with roles the agent key is made with
``role="agent"`` and the argument goes.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

import soulpass
from server_world import UNLIMITED
from soulpass.consolidation.rules import ReviewRule, Rules
from soulpass.server.app import create_app
from soulpass.server.keys import FileKeyStore

MARKER = "flowerpot7731"  # only the excluded fact holds it
BASE = "/v1/accounts/ann"


def _holders(root: Path, needle: str) -> list[str]:
    """Files under ``root`` whose bytes or name hold ``needle``."""
    return sorted(str(p.relative_to(root)) for p in root.rglob("*")
                  if needle in p.name or (p.is_file() and needle.encode() in p.read_bytes()))


@pytest.fixture
def flow(tmp_path: Path) -> Any:
    home = tmp_path / "home"
    sp = soulpass.open(home, rules=Rules(review=ReviewRule(profile=True)))  # the real model
    sp.create_account("ann")
    keys = FileKeyStore(home)
    agent, owner = keys.create("ann", label="agent", role="agent"), keys.create("ann", label="owner", role="owner")
    app = create_app(sp, limits=UNLIMITED)
    with TestClient(app) as client:
        yield (client, {"Authorization": f"Bearer {agent.secret}"}, {"Authorization": f"Bearer {owner.secret}"},
               sp, home, owner.key.key_id)


def test_the_review_flow_over_rest(flow: Any) -> None:
    client, agent, owner, sp, home, owner_id = flow
    sid = client.post(f"{BASE}/sandboxes", headers=agent, json={"name": "chat"}).json()["sandbox_id"]
    sb = f"{BASE}/sandboxes/{sid}"
    assert client.post(f"{sb}/turns", headers=agent, json={"speaker": "user", "text": "I moved to Lyon in May"}
                       ).status_code == 201
    assert client.post(f"{sb}/facts", headers=agent, json={
        "subject": "Ann", "predicate": "hides a key under", "object": MARKER, "confidence": 0.95}).status_code == 201
    assert client.post(f"{sb}/profile", headers=agent, json={"data": {"city": "Lyon"}}).status_code == 201

    held = client.post(f"{sb}/archive", headers=agent, json={})
    assert held.status_code == 202, held.text
    body = held.json()
    assert body["status"] == "awaiting_review" and body["version"] == 0
    (profile_item,) = [i for i in body["items"] if i["kind"] == "profile"]
    assert body["needs_review"] == [profile_item["id"]] and "review.profile" in profile_item["review"]
    assert client.get(BASE, headers=owner).json()["version"] == 0  # nothing committed
    assert client.get(f"{BASE}/records", headers=owner, params={"kind": "turn_user"}).json()["items"] == []
    assert client.get(sb, headers=agent).status_code == 200  # the sandbox waits, all it holds kept
    assert [p["sandbox_id"] for p in client.get(f"{BASE}/reviews", headers=owner).json()] == [sid]

    assert client.post(f"{sb}/approve", headers=agent, json={}).status_code == 403  # the agent may not
    assert client.post(f"{sb}/archive", headers=agent, json={"exclude": [profile_item["id"]]}).status_code == 403

    preview = client.get(f"{sb}/preview", headers=owner).json()
    items = {i["kind"]: i for i in preview["items"]}
    assert sorted(items) == ["fact", "profile", "turn_user"]
    assert [items[k]["action"] for k in ("turn_user", "fact", "profile")] == ["add", "add", "change"]
    assert items["turn_user"]["text"] == "I moved to Lyon in May" and items["turn_user"]["temp_ids"]
    assert items["profile"]["changes"] == [{"document": "profile", "key": "city", "before": None, "after": "Lyon"}]
    assert MARKER in items["fact"]["text"] and items["fact"]["confidence"] == 0.95

    fact = items["fact"]["id"]
    done = client.post(f"{sb}/approve", headers=owner, json={"exclude": [fact], "reason": "not confirmed"})
    assert done.status_code == 200, done.text
    assert done.json()["status"] == "committed" and done.json()["version"] == 1
    turns = client.get(f"{BASE}/records", headers=owner, params={"kind": "turn_user"}).json()["items"]
    assert [t["id"] for t in turns] == [items["turn_user"]["record_id"]]
    assert client.get(f"{BASE}/show/profile", headers=owner).json()["fields"] == {"city": "Lyon"}

    entry = client.get(f"{BASE}/versions", headers=owner).json()[-1]
    assert entry["excluded"] == {"items": [{"id": fact, "kind": "fact"}], "by": f"owner ({owner_id})",
                                 "reason": "not confirmed", "events": 3}
    assert client.get(f"{BASE}/records", headers=owner, params={"kind": "fact"}).json()["items"] == []
    hits = client.post(f"{BASE}/search", headers=owner, json={"query": f"where does Ann hide a key {MARKER}"}).json()
    assert hits["hits"] and all(MARKER not in h["text"] and h["kind"] != "fact" for h in hits["hits"])
    status = sp.account("ann").index().status()
    assert status.embedder is not None and status.pending_embeddings == 0 and "fact" not in status.in_force
    assert status.vectors >= 1  # the turn is embedded; the fact never was
    # files, history, log, catalog, full text, vectors: the fact is only in the sandbox kept for its history
    assert _holders(home, MARKER) == [f"accounts/ann/sandboxes/{sid}/session_buffer.jsonl"]
    assert client.get(sb, headers=agent).status_code == 409  # closed: no sandbox read shows it an agent
    assert client.get(f"{sb}/history", headers=agent).status_code == 403
    history = client.get(f"{sb}/history", headers=owner).json()
    (left_out,) = [e for e in history["events"] if e["outcome"] == "excluded"]
    assert left_out["event_id"] == fact and MARKER in left_out["text"]
    assert (history["excluded_by"], history["excluded_reason"]) == (f"owner ({owner_id})", "not confirmed")
    assert client.delete(f"{sb}/history", headers=owner).status_code == 204
    assert _holders(home, MARKER) == []


def test_an_owner_archive_commits_at_once_and_no_policy_never_waits(tmp_path: Path) -> None:
    sp = soulpass.open(tmp_path / "home", embedder="none", rules=Rules(review=ReviewRule(profile=True)))
    acct = sp.create_account("ann")
    sb = acct.create_sandbox("s")
    sb.update_profile({"city": "Oslo"})
    assert isinstance(acct.archive(sb.id), soulpass.AwaitingReview)
    assert isinstance(acct.archive(sb.id, may_approve=True), soulpass.Committed)
    plain = soulpass.open(tmp_path / "other", embedder="none").create_account("bob")
    sb2 = plain.create_sandbox("s")
    sb2.update_profile({"city": "Oslo"})
    assert plain.awaiting_review() == []
    assert isinstance(plain.archive(sb2.id), soulpass.Committed)  # default policy: today's behaviour


def test_a_held_archive_is_published_on_redis(tmp_path: Path, redis_url: str) -> None:
    """Issue 41 item 6: each archive the policy holds is a message on the review channel (real Redis)."""
    import json
    import time
    import uuid

    import redis

    from soulpass.server.review_notice import RedisReviewNotice

    channel = f"soulpass:reviews:test-{uuid.uuid4().hex[:8]}"  # the shared Redis: a channel of its own
    sp = soulpass.open(tmp_path / "home", embedder="none", rules=Rules(review=ReviewRule(profile=True)))
    sp.create_account("ann")
    agent = FileKeyStore(tmp_path / "home").create("ann", label="agent", role="agent")
    app = create_app(sp, limits=UNLIMITED,
                     review_notice=RedisReviewNotice.from_url(redis_url, channel))
    listener = redis.Redis.from_url(redis_url).pubsub(ignore_subscribe_messages=True)
    listener.subscribe(channel)
    h = {"Authorization": f"Bearer {agent.secret}"}
    with TestClient(app) as client:
        sid = client.post(f"{BASE}/sandboxes", headers=h, json={"name": "chat"}).json()["sandbox_id"]
        client.post(f"{BASE}/sandboxes/{sid}/profile", headers=h, json={"data": {"city": "Lyon"}})
        client.post(f"{BASE}/sandboxes/{sid}/turns", headers=h, json={"text": "hello"})
        assert client.post(f"{BASE}/sandboxes/{sid}/archive", headers=h, json={}).status_code == 202
    deadline, got = time.monotonic() + 10, None
    while got is None and time.monotonic() < deadline:
        got = listener.get_message(timeout=1)
    listener.close()
    assert got is not None, "no message on the review channel"
    message = json.loads(got["data"])
    assert message["account"] == "ann" and message["sandbox_id"] == sid and message["version"] == 0
    assert [(i["kind"], i["action"]) for i in message["items"]] == [("profile", "change")]
    assert "review.profile" in message["items"][0]["review"]


def test_an_unreachable_redis_never_changes_the_archive_answer(tmp_path: Path, caplog: pytest.LogCaptureFixture
                                                               ) -> None:
    from soulpass.server.review_notice import RedisReviewNotice

    sp = soulpass.open(tmp_path / "home", embedder="none", rules=Rules(review=ReviewRule(profile=True)))
    sp.create_account("ann")
    agent = FileKeyStore(tmp_path / "home").create("ann", label="agent", role="agent")
    notice = RedisReviewNotice.from_url("redis://127.0.0.1:1/0")  # nothing listens on port 1
    h = {"Authorization": f"Bearer {agent.secret}"}
    with TestClient(create_app(sp, limits=UNLIMITED, review_notice=notice)) as client:
        sid = client.post(f"{BASE}/sandboxes", headers=h, json={"name": "chat"}).json()["sandbox_id"]
        client.post(f"{BASE}/sandboxes/{sid}/profile", headers=h, json={"data": {"city": "Lyon"}})
        held = client.post(f"{BASE}/sandboxes/{sid}/archive", headers=h, json={})
    assert held.status_code == 202 and held.json()["status"] == "awaiting_review"
    assert f"could not publish that sandbox {sid} awaits review" in caplog.text
