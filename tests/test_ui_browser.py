"""The memory browser in a real browser: Debian's Chromium driven by Playwright against a real
``soulpass serve`` on 127.0.0.1 over a seeded account (tests/ui_world.py).

Each page must load without a console error or an uncaught exception. ``make test`` installs
Chromium where it can (``make browser``); these tests skip, saying why, only where no Chromium
is there. ``SOULPASS_UI_SCREENSHOTS=docs/ui`` writes the screenshots of docs/ui.md.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from ui_world import UiWorld, seed

playwright_api = pytest.importorskip("playwright.sync_api", reason="playwright is not installed (the dev extra)")

CHROMIUM = next((p for p in (os.environ.get("SOULPASS_CHROMIUM"), shutil.which("chromium"),
                             shutil.which("chromium-browser"), shutil.which("google-chrome")) if p), None)
pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="no Chromium on this machine: `make browser` installs "
                                                         "Debian's chromium (needs apt and root)")


REVIEW_RULES = "review:\n  profile: true   # a change to the user profile waits for a person\n"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, UiWorld]]:
    work = tmp_path_factory.mktemp("ui")
    world = seed(work / "home")
    assert isinstance(world.home, Path)
    (world.home / "rules.yaml").write_text(REVIEW_RULES, encoding="utf-8")  # what `serve` reads from the home
    port = _free_port()
    log = (work / "serve.log").open("w")
    cli = Path(sys.executable).with_name("soulpass")
    proc = subprocess.Popen([str(cli), "--home", str(world.home), "serve", "--port", str(port), "--embedder", "none"],
                            stdout=log, stderr=subprocess.STDOUT, text=True)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                if httpx.get(f"{base}/ui", timeout=2).headers.get("X-Soulpass-Login") == "required":
                    break
            except httpx.HTTPError:
                pass
            if proc.poll() is not None or time.monotonic() > deadline:
                raise AssertionError(f"soulpass serve did not start:\n{(work / 'serve.log').read_text()}")
            time.sleep(0.2)
        yield base, world
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
        log.close()


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    with playwright_api.sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox", "--disable-gpu"])
        yield b
        b.close()


class Page:
    """A browser tab that records console errors and uncaught exceptions."""

    def __init__(self, browser: Any, base: str, shots: Path) -> None:
        self.page = browser.new_page(viewport={"width": 1280, "height": 860})
        self.base, self.shots = base, shots
        self.errors: list[str] = []
        self.page.on("console", lambda m: self.errors.append(f"console: {m.text}") if m.type == "error" else None)
        self.page.on("pageerror", lambda e: self.errors.append(f"exception: {e}"))

    def open(self, path: str, shot: str | None = None) -> Any:
        response = self.page.goto(self.base + path)
        self.page.wait_for_load_state("networkidle")
        if shot:
            self.snap(shot)
        return response

    def snap(self, name: str, full: bool = False) -> None:
        self.shots.mkdir(parents=True, exist_ok=True)
        self.page.screenshot(path=str(self.shots / f"{name}.png"), full_page=full)

    def login(self, key: str) -> None:
        self.open("/ui")
        self.page.fill("#key", key)
        self.page.click("#login")
        self.page.wait_for_load_state("networkidle")


@pytest.fixture
def tab(browser: Any, served: tuple[str, UiWorld], tmp_path: Path) -> Iterator[Page]:
    shots = Path(os.environ.get("SOULPASS_UI_SCREENSHOTS") or tmp_path / "shots")
    page = Page(browser, served[0], shots)
    yield page
    page.page.close()


def test_each_view_loads_without_console_errors(tab: Page, served: tuple[str, UiWorld]) -> None:
    _, world = served
    tab.open("/ui", shot="login")
    tab.login(world.key)
    assert tab.page.url.endswith("/ui/a/maya")
    pages = {
        "timeline": "/ui/a/maya",
        "version": "/ui/a/maya/v/2",
        "diff": "/ui/a/maya/diff?a=0&b=3",
        "record": f"/ui/a/maya/r/{world.journal_id}",
        "fact": f"/ui/a/maya/r/{world.old_fact}",
        "search": "/ui/a/maya/search?q=grey+cat",
        "graph": "/ui/a/maya/graph",
        "agents": f"/ui/a/maya/agents?sandbox={world.sandbox_id}&agent=eva&message=how+is+Pixel",
        "health": "/ui/a/maya/health?audit=1",
    }
    for name, path in pages.items():
        response = tab.open(path)
        assert response is not None and response.status == 200, (name, response and response.status)
        if name == "graph":
            tab.page.wait_for_selector("#graph[data-rendered]")
        tab.snap(name)
        assert tab.errors == [], (name, tab.errors)


def test_timeline_diff_and_search_show_the_seeded_memory(tab: Page, served: tuple[str, UiWorld]) -> None:
    _, world = served
    tab.login(world.key)
    rows = tab.page.locator("#timeline tbody tr").evaluate_all("rows => rows.map(r => r.dataset.version)")
    assert rows[-3:] == ["3", "2", "1"] or rows == ["3", "2", "1"]
    tab.page.click('#timeline a[href="/ui/a/maya/v/2"]')
    tab.page.wait_for_load_state("networkidle")
    diff = tab.page.inner_text("#diff")
    assert "User lives in Lisbon" in diff and "User lives in Porto" in diff and "Facts superseded: 1" in diff
    tab.open("/ui/a/maya/search")
    tab.page.fill("#q", "grey cat Pixel")
    tab.page.click("#search")
    tab.page.wait_for_load_state("networkidle")
    hits = tab.page.inner_text("#hits")
    assert "I adopted a grey cat called Pixel" in hits
    assert not tab.page.locator("table.parts").first.is_visible()
    tab.page.check("#show-parts")  # score parts on demand
    assert tab.page.locator("table.parts").first.is_visible()
    assert "fts" in tab.page.locator("table.parts").first.inner_text()
    assert tab.errors == []


def test_graph_renders_the_seeded_facts(tab: Page, served: tuple[str, UiWorld]) -> None:
    _, world = served
    tab.login(world.key)
    tab.open("/ui/a/maya/graph")
    tab.page.wait_for_selector("#graph[data-rendered]")
    assert int(tab.page.get_attribute("#graph", "data-rendered") or 0) >= 3  # User, Lisbon, Porto
    assert tab.page.locator("#graph canvas").count() >= 1
    edges = tab.page.evaluate("JSON.parse(document.getElementById('graph-data').textContent)"
                              ".filter(e => e.data.source).map(e => [e.data.label, e.data.superseded])")
    assert ["lives in", True] in edges and ["lives in", False] in edges
    assert "1 superseded" in tab.page.inner_text("#graph-summary")
    assert tab.errors == []


def test_a_wrong_key_gets_the_login_page_and_no_data(tab: Page, served: tuple[str, UiWorld]) -> None:
    _, world = served
    tab.login("sp_00000000_definitely-not-a-key")
    assert "not valid" in tab.page.inner_text("#login-error")
    body = tab.page.inner_text("body")
    assert "Pixel" not in body and "Lisbon" not in body and "maya" not in body
    tab.open("/ui/a/maya")
    assert "Pixel" not in tab.page.inner_text("body") and tab.page.locator("#key").count() == 1
    tab.login(world.other_key)  # another account's key: its own account, never maya's
    assert tab.page.url.endswith("/ui/a/noor")
    tab.open("/ui/a/maya/search?q=Pixel")
    assert "Pixel" not in tab.page.inner_text("main") or "does not open" in tab.page.inner_text("main")
    assert tab.page.locator("#hits").count() == 0


def test_rollback_shows_the_diff_first_and_needs_confirmation(tab: Page, served: tuple[str, UiWorld]) -> None:
    _, world = served
    tab.login(world.key)
    head = int(httpx.get(f"{served[0]}/v1/accounts/maya/versions?since=0&limit=1000",
                         headers={"Authorization": f"Bearer {world.key}"}).json()[-1]["version"])
    tab.open("/ui/a/maya/v/1")
    tab.page.click("#rollback-diff")
    tab.page.wait_for_load_state("networkidle")
    assert "User lives in Porto" in tab.page.inner_text("#diff")  # what the rollback would undo
    tab.open("/ui/a/maya/v/1")
    tab.page.click("#rollback")  # no confirmation typed
    tab.page.wait_for_load_state("networkidle")
    assert "type the version number 1" in tab.page.inner_text("main")
    tab.open("/ui/a/maya/v/1")
    tab.page.fill("#confirm", "1")
    tab.page.click("#rollback")
    tab.page.wait_for_load_state("networkidle")
    assert tab.page.url.endswith(f"/ui/a/maya/v/{head + 1}")
    assert "rollback" in tab.page.inner_text("h1")


def test_the_api_docs_page_renders_every_operation(tab: Page) -> None:
    """/docs reads the OpenAPI 3.1 schema FastAPI serves: its operations are drawn, no error box."""
    pytest.importorskip("swagger_ui_bundle", reason="the 'server' extra's swagger-ui-bundle is not installed")
    paths = httpx.get(f"{tab.base}/openapi.json").json()["paths"]
    tab.open("/docs")
    tab.page.wait_for_selector(".swagger-ui .opblock, .swagger-ui .errors-wrapper", timeout=20_000)
    body = tab.page.inner_text("body")
    assert "Unable to render" not in body and "Errors" not in body, body[:500]
    drawn = tab.page.locator(".swagger-ui .opblock .opblock-summary-path").evaluate_all(
        "els => els.map(e => e.getAttribute('data-path'))")
    assert set(drawn) == set(paths), set(paths) ^ set(drawn)  # an operation in two tags is drawn twice
    tab.snap("docs")
    assert tab.errors == []


LABEL_OVERLAPS = """() => {
  const cy = window.soulpassGraph;
  const box = e => e.renderedBoundingBox({includeNodes: e.isNode(), includeEdges: false, includeLabels: true});
  const boxes = cy.elements().filter(e => !!e.data("label")).map(e => [e.data("label"), box(e)]);
  const hits = [];
  for (let i = 0; i < boxes.length; i++) for (let j = i + 1; j < boxes.length; j++) {
    const a = boxes[i][1], c = boxes[j][1];
    if (a.x1 < c.x2 && c.x1 < a.x2 && a.y1 < c.y2 && c.y1 < a.y2) hits.push([boxes[i][0], boxes[j][0]]);
  }
  return {labels: boxes.length, overlaps: hits, fontPx: cy.zoom() * 13};
}"""


def test_the_graph_of_thirty_entities_has_no_overlapping_labels(tab: Page, served: tuple[str, UiWorld]) -> None:
    """Every entity (its dot and name) and every fact's label in its own box, at a readable size."""
    _, world = served
    tab.login(world.graph_key)
    tab.open("/ui/a/ravi/graph")
    tab.page.wait_for_selector("#graph[data-rendered]")
    assert tab.page.get_attribute("#graph", "data-rendered") == "30"
    layout = tab.page.evaluate(LABEL_OVERLAPS)
    assert layout["labels"] == 30 + 38 and layout["overlaps"] == [], layout
    assert layout["fontPx"] >= 8, layout  # entity names no smaller than 8 px on screen
    tab.snap("graph-30")
    assert tab.errors == []


def test_every_page_fits_a_phone(browser: Any, served: tuple[str, UiWorld], tmp_path: Path) -> None:
    """At 390 px wide: nothing scrolls sideways, and the nav stays on its dark bar, wrapped."""
    base, world = served
    phone = Page(browser, base, Path(os.environ.get("SOULPASS_UI_SCREENSHOTS") or tmp_path / "shots"))
    phone.page.set_viewport_size({"width": 390, "height": 844})
    try:
        phone.login(world.key)
        for path in ("/ui/a/maya", "/ui/a/maya/v/2", "/ui/a/maya/v/3", "/ui/a/maya/diff?a=0&b=3",
                     f"/ui/a/maya/r/{world.journal_id}", "/ui/a/maya/search?q=grey+cat", "/ui/a/maya/graph",
                     f"/ui/a/maya/agents?sandbox={world.sandbox_id}&agent=eva&message=how+is+Pixel",
                     "/ui/a/maya/health", "/ui/a/maya/sandboxes", f"/ui/a/maya/sandboxes/{world.sandbox_id}"):
            phone.open(path)
            width = phone.page.evaluate("document.documentElement.scrollWidth")
            assert width <= 390, (path, width)
            outside = phone.page.evaluate("""() => {
              const bar = document.querySelector('header.top').getBoundingClientRect();
              return [...document.querySelectorAll('header.top a, header.top button')].filter(a => {
                const r = a.getBoundingClientRect();
                return r.left < bar.left || r.right > bar.right || r.top < bar.top || r.bottom > bar.bottom;
              }).map(a => a.textContent);
            }""")
            assert outside == [], (path, outside)
        phone.open("/ui/a/maya", shot="phone-timeline")
        assert phone.errors == [], phone.errors
    finally:
        phone.page.close()


def test_errors_are_pages_and_refusals_refuse(tab: Page, served: tuple[str, UiWorld]) -> None:
    _, world = served
    tab.login(world.key)
    response = tab.open("/ui/a/maya/diff?a=abc&b=2", shot="bad-parameter")
    assert response is not None and response.status == 422
    assert "a: Input should be a valid integer" in tab.page.inner_text("#error-message")
    tab.page.context.clear_cookies()
    tab.login(world.other_key)
    response = tab.open("/ui/a/maya")
    assert response is not None and response.status == 403
    assert "does not open" in tab.page.inner_text("main") and tab.page.locator("#key").count() == 0
    assert "Pixel" not in tab.page.inner_text("body")


def _rest(base: str, key: str, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
    r = httpx.request(method, f"{base}/v1{path}", json=body, headers={"Authorization": f"Bearer {key}"}, timeout=30)
    assert r.status_code < 300, (path, r.status_code, r.text)
    return r.json() if r.content else None


def _review_account(base: str, admin_key: str) -> tuple[str, str]:
    """Account "lena" over REST: Oslo and chess committed, then an open sandbox with her turn (markup
    in its text) and the agent eva's, a fact superseding Oslo, a profile change (the policy holds it for review), a
    fact too unsure to store and one memory already holds. Returns her key and the sandbox."""
    _rest(base, admin_key, "POST", "/accounts", {"name": "lena"})
    key = _rest(base, admin_key, "POST", "/accounts/lena/keys", {"label": "browser test"})["key"]
    first = _rest(base, key, "POST", "/accounts/lena/sandboxes", {"name": "monday"})["sandbox_id"]
    for fact in ("Lena lives in Oslo", "Lena plays chess"):
        _rest(base, key, "POST", f"/accounts/lena/sandboxes/{first}/facts", {"content": fact, "confidence": 0.95})
    assert _rest(base, key, "POST", f"/accounts/lena/sandboxes/{first}/archive", {})["status"] == "committed"
    sb = _rest(base, key, "POST", "/accounts/lena/sandboxes", {"name": "tuesday"})["sandbox_id"]
    at = f"/accounts/lena/sandboxes/{sb}"
    _rest(base, key, "POST", f"{at}/turns", {"speaker": "user",
                                             "text": "We moved to Bergen <img src=x onerror=boom()>"})
    _rest(base, key, "POST", f"{at}/turns", {"speaker": "eva", "text": "Bergen! Rainy, but lovely."})
    _rest(base, key, "POST", f"{at}/facts", {"content": "Lena lives in Bergen", "confidence": 0.95})
    _rest(base, key, "POST", f"{at}/profile", {"data": {"city": "Bergen"}})
    _rest(base, key, "POST", f"{at}/facts", {"content": "Lena maybe likes jazz", "confidence": 0.3})
    _rest(base, key, "POST", f"{at}/facts", {"content": "Lena plays chess", "confidence": 0.95})
    return key, sb


def test_review_a_sandbox_and_approve_all_but_the_unticked(tab: Page, served: tuple[str, UiWorld]) -> None:
    """An open sandbox is listed; its review page shows each item; approving all but the unticked
    fact commits the rest, the fact is nowhere in memory; the header's badge comes and goes."""
    base, world = served
    key, sb = _review_account(base, world.admin_key)
    tab.login(key)
    assert tab.page.inner_text("#review-badge") == "1"  # the profile change waits for a person
    tab.page.click('header a[data-nav="sandboxes"]')
    tab.page.wait_for_load_state("networkidle")
    row = tab.page.locator(f'#sandboxes tr[data-sandbox="{sb}"]')
    assert "tuesday" in row.inner_text() and "yes" in row.locator(".awaiting-cell").inner_text()
    assert row.locator("td").nth(1).inner_text() == "eva" and row.locator("td").nth(4).inner_text() == "6"
    tab.snap("sandboxes")
    row.locator("a.review-link").click()
    tab.page.wait_for_load_state("networkidle")
    records = tab.page.inner_text("#review-records")
    assert "We moved to Bergen <img src=x onerror=boom()>" in records  # text, never markup
    assert tab.page.locator("#review-records img").count() == 0
    facts = tab.page.inner_text("#review-facts")
    assert "Lena lives in Bergen" in facts and "Lena lives in Oslo" in facts  # the fact it supersedes
    assert "city" in tab.page.inner_text("#review-documents") and "Bergen" in tab.page.inner_text("#review-documents")
    rejected = tab.page.inner_text("#review-rejected")
    assert "Lena maybe likes jazz" in rejected and "semantic" in rejected and "0.3" in rejected
    assert "Lena plays chess" in tab.page.inner_text("#review-duplicates")
    assert "needs review" in tab.page.inner_text("#review-documents")
    tab.snap("review", full=True)
    bergen = tab.page.locator("#review-facts input[type=checkbox]")
    assert bergen.count() == 1
    bergen.uncheck()
    tab.page.fill("#review-reason", "not sure she moved")
    tab.page.click("#approve-ticked")
    tab.page.wait_for_load_state("networkidle")
    assert "/ui/a/lena/v/2" in tab.page.url
    assert "not sure she moved" in tab.page.inner_text("#excluded")
    assert tab.page.locator("#review-badge").count() == 0
    facts_now = _rest(base, key, "GET", "/accounts/lena/records?kind=fact")
    assert "Lena lives in Bergen" not in str(facts_now) and "Lena lives in Oslo" in str(facts_now)
    assert "Rainy, but lovely" in str(_rest(base, key, "GET", "/accounts/lena/records?kind=turn_llm"))  # the rest is in
    hits = _rest(base, key, "POST", "/accounts/lena/search", {"query": "Lena lives in Bergen", "k": 10})
    assert all(h["kind"] != "fact" or "Bergen" not in h["text"] for h in hits["hits"]), hits
    tab.open("/ui/a/lena/sandboxes")
    assert "No open sandboxes" in tab.page.inner_text("#sandboxes")
    assert tab.errors == []
