"""Review before it is remembered (issue 41), end to end over the REST API, checking every answer.

    python examples/review_flow.py [--home /tmp/review]

On a fresh home whose rules say "the user profile needs review", it sends HTTP requests to the
REST app (in process: routing, keys, status codes as served) and, as an agent key: opens a
sandbox, writes a turn, a fact and a profile change, and asks to archive (HTTP 202, awaiting
review, nothing committed); then as the owner's key: previews the three items, approves all but
the fact, and checks the turn and the profile are committed, the fact is nowhere (records,
search, the home's files) but the sandbox kept for its history, and the version entry names the
exclusion; last it reads that history (the excluded fact's text, who, why: an owner's, 403 for the
agent) and deletes it. Prints one line per step; exits 1 at the first wrong answer.

The two keys differ by role only: the agent's is made with role ``agent`` (reads, writes to
sandboxes, archives what needs no review), the owner's with role ``owner`` (also approves and
excludes, reads and deletes a kept sandbox's history).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

from fastapi.testclient import TestClient

import soulpass
from soulpass.consolidation.rules import ReviewRule, Rules
from soulpass.server.app import create_app
from soulpass.server.keys import FileKeyStore

MARKER = "flowerpot7731"  # only the fact holds it


class Wrong(Exception):
    """An answer that is not what the step expects."""


def check(ok: bool, step: str, got: Any) -> None:
    if not ok:
        raise Wrong(f"{step}: unexpected answer {json.dumps(got, default=str)[:600]}")
    print(f"ok  {step}")


def flow(http: TestClient, agent: dict[str, str], owner: dict[str, str], home: Path) -> None:
    base = "/v1/accounts/ann"
    sid = http.post(f"{base}/sandboxes", headers=agent, json={"name": "chat"}).json()["sandbox_id"]
    sb = f"{base}/sandboxes/{sid}"
    wrote = [http.post(f"{sb}/turns", headers=agent, json={"speaker": "user", "text": "I moved to Lyon in May"}),
             http.post(f"{sb}/facts", headers=agent, json={"subject": "Ann", "predicate": "hides a key under",
                                                           "object": MARKER, "confidence": 0.95}),
             http.post(f"{sb}/profile", headers=agent, json={"data": {"city": "Lyon"}})]
    check([r.status_code for r in wrote] == [201, 201, 201], "agent writes a turn, a fact, a profile change",
          [r.text for r in wrote])

    held = http.post(f"{sb}/archive", headers=agent, json={})
    body = held.json()
    check(held.status_code == 202 and body["status"] == "awaiting_review" and len(body["needs_review"]) == 1,
          "agent's archive: 202 awaiting review (the profile change)", body)
    head = http.get(base, headers=owner).json()["version"]
    turns = http.get(f"{base}/records", headers=owner, params={"kind": "turn_user"}).json()["items"]
    check(head == 0 and turns == [], "nothing committed yet: HEAD 0, no turn", {"head": head, "turns": turns})
    refused = http.post(f"{sb}/approve", headers=agent, json={})
    check(refused.status_code == 403, "agent may not approve: 403", refused.text)

    preview = http.get(f"{sb}/preview", headers=owner).json()
    items = {i["kind"]: i for i in preview["items"]}
    for kind in ("turn_user", "fact", "profile"):
        it = items.get(kind, {})
        print(f"    {it.get('id')}  {kind:9}  {it.get('action'):6}  {it.get('text')}  {it.get('review') or ''}")
    check(sorted(items) == ["fact", "profile", "turn_user"], "owner's preview lists the three items", preview)

    done = http.post(f"{sb}/approve", headers=owner, json={"exclude": [items["fact"]["id"]],
                                                            "reason": "not confirmed"}).json()
    check(done["status"] == "committed" and done["version"] == 1, "owner approves all but the fact: version 1", done)
    turns = http.get(f"{base}/records", headers=owner, params={"kind": "turn_user"}).json()["items"]
    profile = http.get(f"{base}/show/profile", headers=owner).json()["fields"]
    check(len(turns) == 1 and profile == {"city": "Lyon"}, "the turn and the profile change are committed",
          {"turns": turns, "profile": profile})
    facts = http.get(f"{base}/records", headers=owner, params={"kind": "fact"}).json()["items"]
    hits = http.post(f"{base}/search", headers=owner, json={"query": f"where is the key {MARKER}"}).json()["hits"]
    files = [p.relative_to(home).as_posix() for p in home.rglob("*")
             if p.is_file() and MARKER.encode() in p.read_bytes()]
    kept = [f"accounts/ann/sandboxes/{sid}/session_buffer.jsonl"]
    check(facts == [] and all(MARKER not in h["text"] for h in hits) and files == kept,
          "the fact is nowhere (records, search: full text and vectors) but the kept sandbox's history",
          {"facts": facts, "hits": hits, "files": files})
    entry = http.get(f"{base}/versions", headers=owner).json()[-1]
    check(entry.get("excluded", {}).get("items") == [{"id": items["fact"]["id"], "kind": "fact"}]
          and entry["excluded"]["reason"] == "not confirmed", "the version entry names the exclusion",
          entry.get("excluded"))

    check(http.get(f"{sb}/history", headers=agent).status_code == 403, "agent may not read the history: 403", "")
    history = http.get(f"{sb}/history", headers=owner).json()
    for e in history["events"]:
        print(f"    {e['event_id']}  {e['kind']:9}  {e['outcome']:8}  {e['record_id'] or '':16}  {e['text']}")
    left_out = [e for e in history["events"] if e["outcome"] == "excluded"]
    check(len(left_out) == 1 and MARKER in left_out[0]["text"] and history["excluded_reason"] == "not confirmed",
          "the owner reads the excluded fact in the sandbox's history (who, why)", history)
    gone = http.delete(f"{sb}/history", headers=owner)
    files = [p for p in home.rglob("*") if p.is_file() and MARKER.encode() in p.read_bytes()]
    check(gone.status_code == 204 and files == [], "deleting the history leaves the fact nowhere", files)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--home", type=Path, default=None, help="A fresh folder (default: a temporary one)")
    args = parser.parse_args()
    home = args.home or Path(tempfile.mkdtemp(prefix="soulpass-review-"))
    sp = soulpass.open(home, rules=Rules(review=ReviewRule(profile=True)))
    sp.create_account("ann")
    keys = FileKeyStore(home)
    agent, owner = keys.create("ann", label="agent", role="agent"), keys.create("ann", label="owner", role="owner")
    app = create_app(sp)
    try:
        with TestClient(app) as http:  # every request through the app's HTTP stack: routes, keys, statuses
            flow(http, {"Authorization": f"Bearer {agent.secret}"}, {"Authorization": f"Bearer {owner.secret}"},
                 home)
    except Wrong as exc:
        print(f"FAIL {exc}")
        return 1
    print("review flow: all steps ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
