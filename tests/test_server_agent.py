"""The agent tiers, journal and audit through the REST API (real engine, real files)."""

from __future__ import annotations

from fastapi.testclient import TestClient

from server_world import World


def test_log_clipboard_context_and_inbox(client: TestClient, world: World) -> None:
    h = world.ann.auth
    s = f"/v1/accounts/ann/sandboxes/{world.ann.sandbox_id}"
    entry = client.post(f"{s}/log", headers=h, json={"agent": "pro", "text": "Move the backups to the NAS",
                                                      "speaker": "user"})
    assert entry.status_code == 201 and entry.json()["speaker"] == "user"
    client.post(f"{s}/log", headers=h, json={"agent": "pro", "text": "rsync finished: 12 GB", "kind": "outcome"})
    hot = client.get(f"{s}/log", headers=h, params={"agent": "pro"}).json()
    assert [e["text"] for e in hot][-2:] == ["Move the backups to the NAS", "rsync finished: 12 GB"]

    assert client.get(f"{s}/clipboard/pro", headers=h).json()["items"] == []
    before = client.post(f"{s}/context", headers=h, json={"agent": "pro", "message": "status?"}).json()
    assert "target is the NAS, not /srv" not in before["text"]
    view = client.post(f"{s}/clipboard/pro", headers=h, json={"action": "add", "item": "target is the NAS, not /srv"})
    assert view.json()["items"] == ["target is the NAS, not /srv"]
    client.post(f"{s}/clipboard/pro", headers=h, json={"action": "add", "item": "second"})
    after = client.post(f"{s}/context", headers=h, json={"agent": "pro", "message": "status?"}).json()
    assert "target is the NAS, not /srv" in after["text"] and after["tokens"] <= after["budget_tokens"] + 200
    assert client.post(f"{s}/clipboard/pro", headers=h, json={"action": "remove", "item": "1"}).json()["items"] == [
        "second"]
    r = client.post(f"{s}/clipboard/pro", headers=h, json={"action": "remove", "item": "not pinned"})
    assert r.status_code == 404
    assert client.post(f"{s}/clipboard/pro", headers=h, json={"action": "add"}).status_code == 422
    assert client.post(f"{s}/clipboard/pro", headers=h, json={"action": "clear"}).json()["items"] == []

    none = client.post(f"{s}/rag_search", headers=h, json={"agent": "pro", "query": "submarine periscope"})
    assert none.status_code == 200 and none.json()["episode_ids"] == []
    assert client.get(f"{s}/inbox/pro", headers=h).json() == []  # nothing found: nothing delivered
    client.post(f"{s}/episodes", headers=h, json={"summary": {"action_taken": "moved the backups",
                                                              "key_outcome": "backups on the NAS"}})
    rag = client.post(f"{s}/rag_search", headers=h, json={"agent": "pro", "query": "backups NAS"})
    assert rag.status_code == 200 and rag.json()["episode_ids"]
    inbox = client.get(f"{s}/inbox/pro", headers=h, params={"pop": True}).json()
    assert [m["id"] for m in inbox] == [rag.json()["message_id"]]
    assert client.get(f"{s}/inbox/pro", headers=h).json() == []


def test_ingest_text_only(client: TestClient, world: World) -> None:
    h = world.ann.auth
    s = f"/v1/accounts/ann/sandboxes/{world.ann.sandbox_id}"
    doc = "Kettles. " + "A blue kettle boils water quickly on a gas stove. " * 40
    r = client.post(f"{s}/ingest", headers=h, json={"agent": "pro", "text": doc, "title": "Kettles"})
    assert r.status_code == 201, r.text
    out = r.json()
    assert out["raw_id"].startswith("sr_temp_") and out["chunk_ids"] and out["chars"] == len(doc)
    # no file system path or URL is read on the client's behalf: the field is text and stays text
    r = client.post(f"{s}/ingest", headers=h, json={"agent": "pro", "text": "/etc/passwd"})
    assert r.status_code == 201
    raw = client.get(f"{s}/buffer", headers=h).json()["sensory"]
    assert any(x.get("content") == "/etc/passwd" for x in raw)
    assert not any("root:" in str(x.get("content")) for x in raw)
    assert client.post(f"{s}/ingest", headers=h, json={"agent": "pro", "path": "/etc/passwd"}).status_code == 422


def test_journal_and_audit(client: TestClient, world: World) -> None:
    h, base = world.ann.auth, "/v1/accounts/ann"
    found = client.get(f"{base}/journal", headers=h, params={"tag": "secret"}).json()
    assert [i["id"] for i in found] == [world.ann.journal_id]
    entry = client.get(f"{base}/journal/{world.ann.journal_id}", headers=h).json()
    assert world.ann.marker in entry["text"] and entry["path"].endswith(".md")
    assert client.get(f"{base}/show/{world.ann.journal_id}", headers=h).status_code == 200

    sid = client.post(f"{base}/sandboxes", headers=h, json={"name": "j"}).json()["sandbox_id"]
    r = client.post(f"{base}/sandboxes/{sid}/journal", headers=h, json={
        "text": "Tried cold brew; it was better than expected.", "type": "experiment", "tags": ["coffee"]})
    assert r.status_code == 201 and r.json()["id"].startswith("je_temp_")
    assert client.post(f"{base}/sandboxes/{sid}/journal", headers=h, json={"text": "  "}).status_code == 422
    client.post(f"{base}/sandboxes/{sid}/archive", headers=h, json={})
    found = client.get(f"{base}/journal", headers=h, params={"type": "experiment"}).json()
    assert [i["tags"] for i in found] == [["coffee"]]

    report = client.get(f"{base}/audit", headers=h).json()
    assert report["ok"], report
    assert report["store_version"] == client.get(base, headers=h).json()["version"]
    # the index keeps working after the audit
    hits = client.post(f"{base}/search", headers=h, json={"query": "cold brew"}).json()["hits"]
    assert hits and "cold brew" in hits[0]["text"]
