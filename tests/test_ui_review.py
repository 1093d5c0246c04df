"""The Sandboxes and review pages without a browser: what ``review_views`` makes of an account's open
sandboxes and of one sandbox's archive preview, and what the pages say through the ASGI app. The
browser drives them in tests/test_ui_browser.py."""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

import soulpass
from soulpass.consolidation.rules import ReviewRule, Rules
from soulpass.engine import Committed
from soulpass.server.app import create_app
from soulpass.server.keyring import key_store
from soulpass.server.limits import ServerLimits
from soulpass.server.ui import review_views
from soulpass.server.ui.routes import COOKIE

UNLIMITED = ServerLimits(rate=0, burst=0, failed_keys=0, quota_bytes=0)


def test_age_says_the_largest_whole_unit() -> None:
    now = datetime(2026, 11, 27, 12, 0, tzinfo=UTC)
    assert review_views.age(now - timedelta(seconds=42), now) == "42 s"
    assert review_views.age(now - timedelta(minutes=3, seconds=59), now) == "3 min"
    assert review_views.age(now - timedelta(hours=5, minutes=1), now) == "5 h"
    assert review_views.age(now - timedelta(days=2, hours=23), now) == "2 d"
    assert review_views.age(now + timedelta(seconds=5), now) == "0 s"  # a clock a little ahead: not negative


def test_sandbox_rows_list_open_sandboxes_with_their_agents_and_events(tmp_path: Path) -> None:
    acct = soulpass.open(tmp_path / "h", embedder="none").account("ann", create=True)
    done = acct.create_sandbox("archived")
    done.add_turn("user", "hello")
    done.archive()
    first = acct.create_sandbox("first")
    first.add_turn("user", "I moved to Porto")
    first.add_turn("eva", "Porto is lovely")
    first.add_turn("otto", "Noted")
    second = acct.create_sandbox("second")
    rows = review_views.sandbox_rows(acct, {}, now=datetime.now(UTC) + timedelta(hours=2))
    assert [r["id"] for r in rows] == [first.id, second.id]  # oldest first, the archived one gone
    assert rows[0]["agents"] == ["eva", "otto"] and rows[0]["events"] == 3 and rows[0]["parent"] == 1
    assert rows[0]["age"] == "2 h" and rows[0]["last"] == "2 h"
    assert rows[1]["events"] == 0 and rows[1]["agents"] == [] and rows[1]["last"] == ""


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[TestClient, soulpass.Soulpass, str]]:
    sp = soulpass.open(tmp_path / "home", embedder="none")
    sp.create_account("ann")
    secret = key_store(sp).create("ann").secret
    with TestClient(create_app(soulpass.open(tmp_path / "home", embedder="none"), limits=UNLIMITED)) as client:
        client.post("/ui/login", data={"key": secret}, follow_redirects=False)
        assert client.cookies.get(COOKIE)
        yield client, sp, secret


def test_the_sandboxes_page_lists_open_sandboxes_and_escapes_their_names(
        served: tuple[TestClient, soulpass.Soulpass, str]) -> None:
    client, sp, _ = served
    empty = client.get("/ui/a/ann/sandboxes")
    assert empty.status_code == 200 and "No open sandboxes" in empty.text
    assert 'href="/ui/a/ann/sandboxes" data-nav="sandboxes"' in client.get("/ui/a/ann").text  # in the nav
    sb = sp.account("ann").create_sandbox("<b>chat</b>")
    sb.add_turn("eva", "hi")
    r = client.get("/ui/a/ann/sandboxes")
    assert f'<tr data-sandbox="{sb.id}">' in r.text and f'href="/ui/a/ann/sandboxes/{sb.id}"' in r.text
    assert "&lt;b&gt;chat&lt;/b&gt;" in r.text and "<b>chat</b>" not in r.text
    assert "<td>eva</td>" in r.text


@dataclass
class Review:
    """An account "ann" under the policy "the profile needs review", seen through the app: Oslo
    committed; an open sandbox holding a turn (with markup in its text), a fact that supersedes
    Oslo, a profile change, a fact too unsure to store and a fact memory already holds."""

    client: TestClient
    sp: soulpass.Soulpass
    sandbox: str
    oslo: str
    ids: dict[str, str]  # item ids (buffer event ids) by what they are: turn, bergen, profile, unsure, chess


@pytest.fixture
def review(tmp_path: Path) -> Iterator[Review]:
    rules = Rules(review=ReviewRule(profile=True))
    sp = soulpass.open(tmp_path / "home", embedder="none", rules=rules)
    acct = sp.create_account("ann")
    first = acct.create_sandbox("monday")
    first.add_fact(content="Ann lives in Oslo", confidence=0.95)
    first.add_fact(content="Ann plays chess", confidence=0.95)
    committed = first.archive()
    assert isinstance(committed, Committed)
    oslo = committed.plan.added["fact"][0]
    sb = acct.create_sandbox("tuesday")
    sb.add_turn("user", "We moved to Bergen <script>alert(1)</script>")
    sb.add_fact(content="Ann lives in Bergen", confidence=0.95)
    sb.update_profile({"city": "Bergen"})
    sb.add_fact(content="Ann maybe likes jazz", confidence=0.3)
    sb.add_fact(content="Ann plays chess", confidence=0.95)
    events = [e.event_id for e in sb.info.buffer().events()]
    secret = key_store(sp).create("ann").secret
    with TestClient(create_app(soulpass.open(tmp_path / "home", embedder="none", rules=rules),
                               limits=UNLIMITED)) as client:
        client.post("/ui/login", data={"key": secret}, follow_redirects=False)
        yield Review(client, sp, sb.id, oslo, dict(zip(("turn", "bergen", "profile", "unsure", "chess"), events,
                                                       strict=True)))


def test_review_view_groups_each_item_of_the_preview(review: Review) -> None:
    r = review_views.review_view(review.sp.account("ann"), review.sandbox)
    g = r["groups"]
    assert [i["id"] for i in g["records"]] == [review.ids["turn"]] and g["records"][0]["kind"] == "turn_user"
    assert g["records"][0]["temp_ids"] and g["records"][0]["record_id"].startswith("TU_")
    (bergen,) = g["facts"]
    assert bergen["id"] == review.ids["bergen"] and bergen["supersedes"] == [{"id": review.oslo,
                                                                              "text": "Ann lives in Oslo"}]
    (profile,) = g["documents"]
    assert profile["id"] == review.ids["profile"] and profile["review"]
    assert {"key": "city", "after": "Bergen"}.items() <= profile["changes"][0].items()
    (unsure,) = g["rejected"]
    assert unsure["id"] == review.ids["unsure"] and unsure["rule"] and "0.3" in unsure["reason"]
    assert [i["id"] for i in g["duplicates"]] == [review.ids["chess"]]
    assert r["offered"] == [review.ids[k] for k in ("turn", "bergen", "profile")]  # what may be unticked
    assert [i["id"] for i in r["needs_review"]] == [review.ids["profile"]] and r["sandbox"]["awaiting"] == 1


def test_the_review_page_shows_each_item_escaped_and_the_badge_counts_it(review: Review) -> None:
    page = review.client.get(f"/ui/a/ann/sandboxes/{review.sandbox}")
    assert page.status_code == 200
    for item in review.ids.values():
        assert f'data-item="{item}"' in page.text
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page.text and "<script>alert" not in page.text
    assert re.search(r"<del>.*Ann lives in Oslo</del>", page.text) and "Ann lives in Bergen" in page.text
    assert 'id="review-badge"' in page.text and 'id="needs-review"' in page.text
    listing = review.client.get("/ui/a/ann/sandboxes").text
    assert re.search(rf'<tr data-sandbox="{review.sandbox}" class="awaiting">', listing)
    assert re.search(r'id="review-badge"[^>]*>1</span>', review.client.get("/ui/a/ann").text)


def _approve(review: Review, action: str, keep: list[str], events: int = 5) -> Any:
    items = " ".join(review.ids[k] for k in ("turn", "bergen", "profile"))
    return review.client.post(f"/ui/a/ann/sandboxes/{review.sandbox}/approve", follow_redirects=False, data={
        "action": action, "items": items, "events": str(events), "keep": keep, "reason": "not sure about Bergen"})


def test_approve_all_but_the_unticked_commits_the_rest(review: Review) -> None:
    stale = _approve(review, "ticked", [review.ids["turn"]], events=4)  # the page saw fewer writes
    assert stale.status_code == 200 and 'id="review-notice"' in stale.text and "changed since" in stale.text
    acct = review.sp.account("ann")
    assert acct.head() == 1
    done = _approve(review, "ticked", [review.ids["turn"], review.ids["profile"]])
    assert done.status_code == 303 and done.headers["location"] == "/ui/a/ann/v/2"
    acct = review.sp.account("ann")
    entry = acct.log()[-1].to_json()
    assert entry["excluded"]["items"] == [{"id": review.ids["bergen"], "kind": "fact"}]
    assert entry["excluded"]["reason"] == "not sure about Bergen" and entry["excluded"]["by"]
    assert acct.show(review.oslo).model_dump(mode="json")["superseded_by"] is None  # Bergen never reached memory
    facts = [r.text for r in acct.records("fact")]
    assert "Ann lives in Bergen" not in facts and "Ann lives in Oslo" in facts
    found = [(h.kind, h.text) for h in acct.search("Bergen", 10)]  # the index: the turn, never the fact
    assert ("turn_user", "We moved to Bergen <script>alert(1)</script>") in found and all(k != "fact" for k, _ in found)
    assert acct.user_profile().fields["city"] == "Bergen"  # the profile change and the turn are in
    assert [r.text for r in acct.records("turn_user")] == ["We moved to Bergen <script>alert(1)</script>"]
    page = review.client.get("/ui/a/ann/v/2").text
    assert 'id="excluded"' in page and "not sure about Bergen" in page
    assert f'href="/ui/a/ann/sandboxes/{review.sandbox}" id="excluded-history"' in page
    listing = review.client.get("/ui/a/ann/sandboxes").text
    assert 'id="review-badge"' not in listing and "No open sandboxes" in listing
    assert f'<tr data-kept="{review.sandbox}">' in listing  # kept for its history, linked, never open
    history = review.client.get(f"/ui/a/ann/sandboxes/{review.sandbox}")
    assert history.status_code == 200 and 'id="history"' in history.text and "not sure about Bergen" in history.text
    row = re.search(rf'<tr data-event="{review.ids["bergen"]}" class="awaiting">.*?</tr>', history.text, re.S)
    assert row and "<del>Ann lives in Bergen</del>" in row.group(0) and "excluded" in row.group(0)
    turn = re.search(rf'<tr data-event="{review.ids["turn"]}">.*?</tr>', history.text, re.S)
    assert turn and "&lt;script&gt;" in turn.group(0) and "<script>alert" not in history.text
    assert "archived" in turn.group(0) and 'href="/ui/a/ann/r/TU_' in turn.group(0)


def test_discard_needs_its_box_ticked(review: Review) -> None:
    refused = review.client.post(f"/ui/a/ann/sandboxes/{review.sandbox}/discard", data={})
    assert refused.status_code == 422 and "tick the box" in refused.text
    assert [i.sandbox_id for i in review.sp.account("ann").sandboxes()] == [review.sandbox]
    done = review.client.post(f"/ui/a/ann/sandboxes/{review.sandbox}/discard", data={"confirm": "yes"},
                              follow_redirects=False)
    assert done.status_code == 303 and done.headers["location"] == "/ui/a/ann/sandboxes"
    assert review.sp.account("ann").sandboxes() == [] and review.sp.account("ann").head() == 1


def test_approve_all_commits_every_item_and_an_unknown_sandbox_is_a_page(review: Review) -> None:
    done = _approve(review, "all", [])  # no box ticked: "Approve all" does not read them
    assert done.status_code == 303 and done.headers["location"] == "/ui/a/ann/v/2"
    acct = review.sp.account("ann")
    assert "excluded" not in acct.log()[-1].to_json()
    assert acct.show(review.oslo).model_dump(mode="json")["superseded_by"]  # Bergen is in
    assert acct.user_profile().fields["city"] == "Bergen"
    gone = review.client.get(f"/ui/a/ann/sandboxes/{review.sandbox}")  # archived: it is no longer open
    assert gone.status_code == 404 and gone.headers["content-type"].startswith("text/html")
    again = _approve(review, "all", [])
    assert again.status_code == 404 and "Bergen" not in again.text


def test_review_badge_benchmark_smoke(tmp_path: Path) -> None:
    """``benchmarks/review_badge.py`` at 2,000 turns: the open sandbox awaits review only under the policy."""
    import json

    from bench_helpers import benchmark_module

    out = tmp_path / "review_badge.json"
    with benchmark_module("review_badge") as bench:
        assert bench.main(["--n", "2000", "--chunk", "1000", "--repeats", "2", "--rounds", "1", "--out", str(out)]) == 0
    rounds = json.loads(out.read_text("utf-8"))["rounds"]
    assert [(r["policy"], r["awaiting"]) for r in rounds] == [("none", 0), ("profile", 1)]
    assert all(0 <= r["p50_ms"] <= r["max_ms"] for r in rounds)


def test_a_long_sandbox_lists_the_first_items_of_each_group_and_counts_the_rest(tmp_path: Path) -> None:
    acct = soulpass.open(tmp_path / "h", embedder="none").account("ann", create=True)
    sb = acct.create_sandbox("long")
    for n in range(5):
        sb.add_turn("user", f"note {n}")
    sb.add_fact(content="Ann maybe likes jazz", confidence=0.3)
    r = review_views.review_view(acct, sb.id, shown=2)
    assert r["totals"] == {"records": 5, "facts": 0, "documents": 0, "rejected": 1, "duplicates": 0}
    assert [i["text"] for i in r["groups"]["records"]] == ["note 0", "note 1"]
    assert len(r["offered"]) == 2  # a box each for the listed ones; the three past them go with the rest
