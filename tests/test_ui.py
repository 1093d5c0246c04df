"""The memory browser's pages through the ASGI app (no browser): what each page says about the
seeded account, who may see it, and that the one action asks for confirmation. The browser
itself is driven in tests/test_ui_browser.py."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

import soulpass
from soulpass.server.app import create_app
from soulpass.server.limits import ServerLimits
from soulpass.server.ui import views
from soulpass.server.ui.routes import COOKIE
from soulpass.store.files.master import FilesMasterStore
from ui_world import UiWorld, seed

UNLIMITED = ServerLimits(rate=0, burst=0, failed_keys=0, quota_bytes=0)


@pytest.fixture(params=["files", "postgres"])
def world(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[UiWorld]:
    """The seeded account in a home folder, and in PostgreSQL (the browser runs on either backend)."""
    if request.param == "files":
        yield seed(tmp_path / "home")
        return
    from postgres_helpers import postgres_url

    for url in postgres_url(tmp_path):
        yield seed(url)


@pytest.fixture
def client(world: UiWorld) -> Iterator[TestClient]:
    with TestClient(create_app(soulpass.open(world.home, embedder="none"), limits=UNLIMITED)) as c:
        yield c


def login(client: TestClient, key: str) -> None:
    r = client.post("/ui/login", data={"key": key}, follow_redirects=False)
    assert r.status_code == 303, r.text
    cookie = r.headers["set-cookie"]
    assert cookie.startswith(f"{COOKIE}=") and "HttpOnly" in cookie and "SameSite=strict" in cookie
    assert "Path=/ui" in cookie and "Secure" not in cookie  # plain HTTP here


def test_without_a_key_every_page_is_the_login_page(client: TestClient, world: UiWorld) -> None:
    for path in ("/ui", "/ui/a/maya", f"/ui/a/maya/r/{world.turn_id}", "/ui/a/maya/search?q=Pixel",
                 "/ui/a/maya/graph", "/ui/a/maya/health", "/ui/a/maya/diff?a=0&b=3", "/ui/a/maya/v/1"):
        r = client.get(path)
        assert r.headers["X-Soulpass-Login"] == "required" and 'name="key"' in r.text, path
        assert "Pixel" not in r.text and "Lisbon" not in r.text, path


def test_a_wrong_key_gets_the_login_page_and_no_data(client: TestClient, world: UiWorld) -> None:
    r = client.post("/ui/login", data={"key": "sp_00000000_not-a-real-key"}, follow_redirects=False)
    assert r.headers["X-Soulpass-Login"] == "required" and "not valid" in r.text and "Pixel" not in r.text
    client.cookies.set(COOKIE, "sp_00000000_forged", path="/ui")
    r = client.get("/ui/a/maya")
    assert r.headers["X-Soulpass-Login"] == "required" and "not valid" in r.text and "Pixel" not in r.text
    assert "v1" not in r.text


def test_an_account_key_sees_its_account_only(client: TestClient, world: UiWorld) -> None:
    login(client, world.other_key)
    assert client.get("/ui", follow_redirects=False).headers["location"] == "/ui/a/noor"
    r = client.get("/ui/a/maya")  # a refusal, not the login page: the key is valid, the account not its
    assert r.status_code == 403 and "does not open" in r.text and "monday chat" not in r.text
    assert "X-Soulpass-Login" not in r.headers and 'href="/ui/a/noor"' in r.text
    r = client.get(f"/ui/a/maya/r/{world.turn_id}")
    assert r.status_code == 403 and "grey cat" not in r.text
    assert "heliotrope" in client.get("/ui/a/noor/search?q=heliotrope").text


def test_the_admin_key_lists_the_accounts(client: TestClient, world: UiWorld) -> None:
    login(client, world.admin_key)
    r = client.get("/ui")
    assert r.status_code == 200
    assert re.search(r'href="/ui/a/maya">maya</a></td><td>3<', r.text)
    assert 'href="/ui/a/noor"' in r.text
    r = client.get("/ui/a/nobody")  # an account that does not exist: a page that says so
    assert r.status_code == 404 and "does not exist" in r.text and r.headers["content-type"].startswith("text/html")


def test_timeline_shows_every_version_with_its_changes(client: TestClient, world: UiWorld) -> None:
    login(client, world.key)
    r = client.get("/ui/a/maya")
    assert r.status_code == 200
    rows = re.findall(r'<tr data-version="(\d+)">', r.text)
    assert rows == ["3", "2", "1"]  # newest first
    assert "monday chat" in r.text and "tuesday chat" in r.text
    assert r.text.count('<rect class="added"') == 3  # one bar per version
    assert r.text.count('<rect class="superseded"') == 1  # version 2 superseded a fact


def test_timeline_pages_through_many_versions(tmp_path: Path) -> None:
    acct = soulpass.open(tmp_path / "h", embedder="none").account("many", create=True)
    for n in range(7):
        sb = acct.create_sandbox(f"s{n}")
        sb.add_turn("user", f"note number {n}")
        sb.archive()
    first = views.timeline(acct, page=3)
    assert [r["version"] for r in first["rows"]] == [7, 6, 5] and first["newer"] is None
    older = views.timeline(acct, before=first["older"] + 1, page=3)
    assert [r["version"] for r in older["rows"]] == [4, 3, 2]
    last = views.timeline(acct, before=older["older"] + 1, page=3)
    assert [r["version"] for r in last["rows"]] == [1] and last["older"] is None
    assert views.timeline(acct, before=last["newer"], page=3)["rows"] == older["rows"]


def test_version_page_shows_the_seeded_change_and_a_guarded_rollback(client: TestClient, world: UiWorld) -> None:
    login(client, world.key)
    r = client.get("/ui/a/maya/v/2")
    assert r.status_code == 200
    assert "Facts superseded: 1" in r.text
    assert re.search(r"<del>.*User lives in Lisbon.*</del>\s*→\s*<ins>.*User lives in Porto", r.text, re.S)
    assert "We moved from Lisbon to Porto" in r.text
    # Without the confirmation nothing happens.
    r = client.post("/ui/a/maya/rollback", data={"version": "1", "confirm": ""}, follow_redirects=False)
    assert r.status_code == 422 and "type the version number 1" in r.text
    assert soulpass.open(world.home, embedder="none").account("maya").head() == world.head
    r = client.post("/ui/a/maya/rollback", data={"version": "1", "confirm": "1"}, follow_redirects=False)
    assert r.status_code == 303 and r.headers["location"] == f"/ui/a/maya/v/{world.head + 1}"
    acct = soulpass.open(world.home, embedder="none").account("maya")
    assert acct.head() == world.head + 1 and acct.log()[-1].kind == "rollback"


def test_diff_between_any_two_versions(client: TestClient, world: UiWorld) -> None:
    login(client, world.key)
    r = client.get("/ui/a/maya/diff?a=0&b=3")
    assert r.status_code == 200
    assert "I adopted a grey cat called Pixel" in r.text and "The shelter said Pixel was shy" in r.text
    assert "Added: 1 episode" in r.text
    r = client.get("/ui/a/maya/diff?a=2&b=2")
    assert "Nothing changed between version 2 and version 2" in r.text
    r = client.get("/ui/a/maya/diff?a=3&b=1")
    assert r.status_code == 422 and "Not shown" in r.text


def test_record_reader(client: TestClient, world: UiWorld) -> None:
    login(client, world.key)
    r = client.get(f"/ui/a/maya/r/{world.journal_id}")
    assert "<h1>Pixel arrives</h1>" in r.text and "<strong>Pixel</strong>" in r.text
    assert "<b>bold?</b>" not in r.text and "&lt;b&gt;bold?&lt;/b&gt;" in r.text  # raw HTML shown as text
    r = client.get(f"/ui/a/maya/r/{world.old_fact}")
    assert "superseded by" in r.text and world.new_fact in r.text
    r = client.get(f"/ui/a/maya/r/{world.old_fact}?at=1")
    assert "as of version 1" in r.text and "superseded by" not in r.text  # not yet, as of version 1
    r = client.get(f"/ui/a/maya/r/{world.episode_id}")
    assert "Turns of this episode" in r.text and "Shy cats often warm up in a week" in r.text
    r = client.get(f"/ui/a/maya/r/{world.turn_id}?at=1")
    assert "I adopted a grey cat called Pixel" in r.text and 'href="/ui/a/maya/v/1"' in r.text
    r = client.get("/ui/a/maya/r/TU_20990101_999")
    assert r.status_code == 404 and "Not shown" in r.text


def test_search_with_filters_and_score_parts(client: TestClient, world: UiWorld) -> None:
    login(client, world.key)
    r = client.get("/ui/a/maya/search?q=grey+cat")
    assert r.status_code == 200 and world.turn_id in r.text and 'class="parts"' in r.text
    only_facts = client.get("/ui/a/maya/search?q=Porto&kind=fact")
    assert world.new_fact in only_facts.text and world.porto_turn_id not in only_facts.text
    assert world.porto_turn_id in client.get("/ui/a/maya/search?q=Porto").text
    as_of_1 = client.get("/ui/a/maya/search?q=Lisbon&kind=fact&at=1")
    assert world.old_fact in as_of_1.text and world.new_fact not in as_of_1.text
    bad = client.get("/ui/a/maya/search?q=cat&since=yesterday")
    assert bad.status_code == 422 and "since must be a date" in bad.text


def test_fact_graph_marks_superseded_facts(client: TestClient, world: UiWorld) -> None:
    login(client, world.key)
    acct = soulpass.open(world.home, embedder="none").account("maya")
    g = views.fact_graph(acct, None)
    labels = {(e["data"]["label"], e["data"]["superseded"]) for e in g["elements"] if "source" in e["data"]}
    assert ("lives in", True) in labels and ("lives in", False) in labels
    then = views.fact_graph(acct, 1)
    assert then["superseded"] == 0 and then["edges"] == 1
    assert views.fact_graph(acct, None, subject="nobody")["edges"] == 0
    r = client.get("/ui/a/maya/graph")
    assert r.status_code == 200 and "/ui/static/vendor/cytoscape.min.js" in r.text and '"superseded": true' in r.text
    assert client.get("/ui/static/vendor/cytoscape.min.js").status_code == 200


def test_agent_view_and_health(client: TestClient, world: UiWorld) -> None:
    login(client, world.key)
    r = client.get(f"/ui/a/maya/agents?sandbox={world.sandbox_id}&agent=eva&message=how+is+Pixel")
    assert r.status_code == 200
    assert "Ask how Pixel is settling in" in r.text and "checking on the cat" in r.text
    assert 'id="context"' in r.text and "[ACTIVE_CLIPBOARD]" in r.text
    r = client.get("/ui/a/maya/health")
    assert r.status_code == 200 and re.search(r"<th>Store</th><td>\w+ at version 3</td>", r.text)
    assert 'id="run-audit"' in r.text and "none (full text only)" in r.text
    assert 'id="audit-ok"' in client.get("/ui/a/maya/health?audit=1").text
    if not isinstance(world.home, Path):
        return  # a damaged file is the home folder's case; PostgreSQL's own checks are its tests'
    # A damaged copy is a finding on the page.
    acct = soulpass.open(world.home, embedder="none").account("maya")
    store = acct.store
    assert isinstance(store, FilesMasterStore)  # the home folder's store: its files are at hand
    damaged = next(p for p in store.path.rglob(f"{world.turn_id}.json"))
    damaged.write_text("{ not json", encoding="utf-8")
    r = client.get("/ui/a/maya/health?audit=1")
    assert 'id="findings"' in r.text and world.turn_id in r.text


def test_forget_shows_a_dry_run_and_needs_the_id_typed(client: TestClient, world: UiWorld) -> None:
    login(client, world.key)
    assert 'id="forget-start"' in client.get(f"/ui/a/maya/r/{world.turn_id}").text
    r = client.post("/ui/a/maya/forget", data={"record_id": world.turn_id, "reason": ""})
    assert r.status_code == 422 and "say why" in r.text
    r = client.post("/ui/a/maya/forget", data={"record_id": world.turn_id, "reason": "asked to"})
    assert r.status_code == 200 and 'id="forget-preview"' in r.text and world.turn_id in r.text
    r = client.post("/ui/a/maya/forget", data={"record_id": world.turn_id, "reason": "asked to", "confirm": "TU_x"})
    assert "did not match" in r.text
    acct = soulpass.open(world.home, embedder="none").account("maya")
    assert acct.head() == world.head and acct.show(world.turn_id).text == "I adopted a grey cat called Pixel"
    r = client.post("/ui/a/maya/forget", data={"record_id": world.turn_id, "reason": "asked to",
                                              "confirm": world.turn_id}, follow_redirects=False)
    assert r.status_code == 303 and r.headers["location"] == f"/ui/a/maya/v/{world.head + 1}"
    acct = soulpass.open(world.home, embedder="none").account("maya")
    then = acct.show(world.turn_id, 1)  # erased from history too: a redacted copy remains
    assert then.text_excerpt == "[forgotten]" and "Pixel" not in then.text
    assert "grey cat called Pixel" not in client.get("/ui/a/maya/search?q=grey+cat").text


def test_ui_pages_benchmark_smoke(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``benchmarks/ui_pages.py`` at 2,000 turns (the 100k run is the benchmark's)."""
    import json

    from bench_helpers import benchmark_module

    out = tmp_path / "ui_pages.json"
    with benchmark_module("ui_pages") as bench:
        assert bench.main(["--n", "2000", "--chunk", "1000", "--repeats", "1", "--workdir", str(tmp_path / "w"),
                           "--out", str(out)]) == 0
    result = json.loads(out.read_text("utf-8"))
    assert set(result["pages"]) >= {"timeline", "diff 0..HEAD", "search", "graph", "health + audit"}
    assert all(0 < page["p50_ms"] <= page["max_ms"] for page in result["pages"].values())
    assert result["pass"] == (result["worst_p50_ms"] <= result["target_p50_ms"])
    assert "slowest page" in capsys.readouterr().out


def test_the_key_cookie_is_secure_over_https(world: UiWorld) -> None:
    app = create_app(soulpass.open(world.home, embedder="none"), limits=UNLIMITED)
    with TestClient(app, base_url="https://testserver") as c:
        r = c.post("/ui/login", data={"key": world.key}, follow_redirects=False)
        assert r.status_code == 303 and "Secure" in r.headers["set-cookie"]
        assert "grey cat" in c.get(f"/ui/a/maya/r/{world.turn_id}").text


def test_diffs_and_counts_show_what_a_person_changed(client: TestClient, world: UiWorld) -> None:
    """The knowledge graph's own files (``edges.N_…|lives in|N_….fact_refs``) and internal kinds
    (gks, gks_shard, gks_functional) stay one link away in the diff and the health page."""
    login(client, world.key)
    r = client.get("/ui/a/maya/diff?a=1&b=2")
    assert "User lives in Porto" in r.text and "Facts superseded: 1" in r.text
    assert "fact_refs" not in r.text and "Genesis_Knowledge_System" not in r.text
    assert 'id="show-internal"' in r.text and "internal change" in r.text
    everything = client.get("/ui/a/maya/diff?a=1&b=2&internal=1")
    assert "fact_refs" in everything.text and 'id="hide-internal"' in everything.text
    in_force = re.search(r'<td id="in-force">(.*?)</td>', client.get("/ui/a/maya/health").text, re.S)
    assert in_force and "turn_user" in in_force.group(1) and "gks" not in in_force.group(1)
    assert 'id="show-internal"' in in_force.group(1)
    shown = re.search(r'<td id="in-force">(.*?)</td>', client.get("/ui/a/maya/health?internal=1").text, re.S)
    assert shown and "gks" in shown.group(1)


def test_timeline_counts_journal_entries_and_edits(tmp_path: Path) -> None:
    world = seed(tmp_path / "home")
    acct = soulpass.open(world.home, embedder="none").account("maya")
    journal = acct.journal().add("Fay prefers morning meetings.", title="Notes")["version"]
    edit = acct.edit(world.turn_id, text_excerpt="I adopted a grey cat named Pixel", reason="typo")
    rows = {r["version"]: r for r in views.timeline(acct)["rows"]}
    assert rows[journal]["counts"]["added"] == 1 and rows[journal]["added_kinds"] == {"journal": 1}
    assert rows[edit]["counts"]["changed"] == 1 and rows[edit]["edited"] == world.turn_id
    assert rows[1]["counts"]["added"] == 4  # two turns, a fact, a journal entry
    d = views.diff_view(acct, journal, edit)
    assert [r["id"] for r in d["edited"]] == [world.turn_id] and "named Pixel" in d["edited"][0]["text"]
    assert not d["empty"]


def test_a_fact_restored_by_rollback_is_drawn_once_in_force(tmp_path: Path) -> None:
    world = seed(tmp_path / "home")
    acct = soulpass.open(world.home, embedder="none").account("maya")

    def edges() -> list[tuple[str, bool]]:
        g = views.fact_graph(acct, None)
        return sorted((e["data"]["facts"][0], e["data"]["superseded"]) for e in g["elements"] if "source" in e["data"])

    acct.rollback(1)  # Lisbon again, Porto retired
    assert edges() == [(world.old_fact, False)] and views.fact_graph(acct, None)["superseded"] == 0
    sb = acct.create_sandbox("again")
    sb.add_fact(content="User lives in Porto", confidence=0.95)
    (porto,) = sb.archive().plan.added["fact"]
    assert edges() == [(world.old_fact, True), (porto, False)]  # superseded twice in the log, drawn once
    assert views.fact_graph(acct, None)["superseded"] == 1


def test_pages_say_what_went_wrong_and_what_was_kept(client: TestClient, world: UiWorld) -> None:
    """A bad parameter is an HTML page; a forgotten record says when and why; refused items are a
    table; the Agents page shows the committed clipboards."""
    login(client, world.key)
    bad = client.get("/ui/a/maya/diff?a=abc&b=2")
    assert bad.status_code == 422 and bad.headers["content-type"].startswith("text/html")
    assert "a: Input should be a valid integer" in bad.text and '"detail"' not in bad.text
    assert client.get("/v1/accounts/maya/versions?since=abc", headers={"Authorization": f"Bearer {world.key}"}
                      ).headers["content-type"].startswith("application/json")  # the API still answers JSON
    v3 = client.get("/ui/a/maya/v/3").text
    assert re.search(r'<table id="rejected">.*fact: Pixel maybe likes jazz \(confidence 0.4\).*not above 0.7', v3, re.S)
    assert '"candidate"' not in v3.split('id="entry"')[0]  # no raw JSON before the log entry's details
    agents = client.get("/ui/a/maya/agents").text
    committed = re.search(r'<section id="committed-clipboards">(.*?)</section>', agents, re.S)
    assert committed and "eva" in committed.group(1) and "Pixel&#39;s vet is Dr. Sousa" in committed.group(1)
    client.post("/ui/a/maya/forget", data={"record_id": world.turn_id, "reason": "asked to",
                                          "confirm": world.turn_id}, follow_redirects=False)
    gone = client.get(f"/ui/a/maya/r/{world.turn_id}")
    assert gone.status_code == 410 and f"forgotten at version {world.head + 1} (reason: asked to" in gone.text
    assert "does not exist" not in gone.text and "grey cat" not in gone.text
    assert client.get("/ui/a/maya/r/TU_20990101_999").status_code == 404  # never there: not found
