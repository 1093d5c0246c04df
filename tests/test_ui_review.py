"""The Sandboxes and review pages without a browser: what ``review_views`` makes of an account's open
sandboxes and of one sandbox's archive preview, and what the pages say through the ASGI app. The
browser drives them in tests/test_ui_browser.py."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

import soulpass
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
    rows = review_views.sandbox_rows(acct, now=datetime.now(UTC) + timedelta(hours=2))
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
