"""Ingest: path, URL (from a local HTTP server on 127.0.0.1 only) or text into sensory memory."""

from __future__ import annotations

import itertools
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from agent_helpers import account, memory
from soulpass.agent.chat import ChatEndpoint
from soulpass.agent.ingest import chunk_text, html_to_text, read_source
from soulpass.engine import Committed
from soulpass.errors import BackendUnavailable, InvalidInput, NotFound
from soulpass.records import Episode, SensoryRecord, TurnLLM

PARAGRAPH = ("Tidal locking happens when a moon's orbital period matches its rotation period. "
             "The same face then always points at the planet. ")
PAGE = f"""<!doctype html><html><head><title>Tidal locking</title><style>body {{color: red}}</style>
<script>alert("no")</script></head><body><nav><a href="/">Home</a> <a href="/about">About us</a></nav>
<article><h1>Tidal locking</h1>
{"".join(f"<p>{PARAGRAPH} Section {i}.</p>" for i in range(12))}
<h2>Exceptions</h2><ul><li>Mercury is in a 3:2 spin-orbit resonance rather than locked.</li></ul></article>
<footer>Copyright 2026 Moon Facts Ltd</footer></body></html>"""


class _Site(BaseHTTPRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        return None

    def do_GET(self) -> None:
        pages = {"/moon.html": ("text/html; charset=utf-8", PAGE.encode()),
                 "/notes.txt": ("text/plain; charset=utf-8", b"plain notes about tides"),
                 "/image.png": ("image/png", b"\x89PNG....")}
        if self.path not in pages:
            self.send_error(404)
            return
        ctype, body = pages[self.path]
        self.send_response(200)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


@pytest.fixture
def site() -> Iterator[str]:
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Site)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}"
    finally:
        httpd.shutdown()
        httpd.server_close()


def test_ingest_a_url_keeps_the_raw_text_chunks_it_and_writes_an_episode(site: str, tmp_path: Path) -> None:
    acct = account(tmp_path)
    mem = memory(acct, chunk_chars=400, chunk_overlap=80)
    result = mem.ingest(f"{site}/moon.html", agent="pro")
    buf = mem.sandbox.buffer()
    sensory = {s["id"]: SensoryRecord.model_validate(s) for s in buf.sensory}
    raw = sensory[result.raw_id]
    assert raw.source == f"{site}/moon.html" and raw.media_type == "text/html"
    assert raw.content.startswith("# Tidal locking\n") and "alert" not in raw.content and "color" not in raw.content
    assert "Mercury is in a 3:2 spin-orbit resonance" in raw.content and result.chars == len(raw.content)
    assert len(result.chunk_ids) > 3
    chunks = [sensory[c] for c in result.chunk_ids]
    assert all(len(c.content) <= 400 for c in chunks) and all("chunk" in c.tags for c in chunks)
    assert chunks[-1].source == f"{site}/moon.html#chunk-{len(chunks)}/{len(chunks)}"
    assert {t for t in raw.tags if t.startswith("doc:")} == {t for t in chunks[0].tags if t.startswith("doc:")}
    # an outcome in the working log, and the scribe's episode about the document
    outcome = mem.hot()[-1]
    assert outcome.kind == "outcome" and outcome.agent == "pro" and "kept verbatim in sensory memory" in outcome.text
    assert "_temp_" not in outcome.text  # the episode's turn_refs link it to the raw record (issue 16)
    episode = Episode.model_validate(buf.new_episodes[-1])
    assert episode.id == result.episode_id and episode.turn_refs == (outcome.id, result.raw_id)
    assert "Tidal locking" in episode.text and episode.annotations["scribe"]["reason"] == "ingest"
    # the buffer's search already finds a chunk
    assert any(h.id in result.chunk_ids for h in mem.sandbox.search("Mercury resonance", k=5))
    committed = mem.sandbox.archive()
    assert isinstance(committed, Committed)
    stored = acct.record(committed.plan.id_map[episode.id])
    assert isinstance(stored, Episode)
    turn, sensory_rec = (acct.record(r) for r in stored.turn_refs)
    assert isinstance(turn, TurnLLM) and "outcome" in turn.tags
    assert isinstance(sensory_rec, SensoryRecord) and sensory_rec.content == raw.content
    assert (acct.store.path / "core" / "03_Sensory_memory").is_dir()


def test_ingest_text_and_path(tmp_path: Path) -> None:
    mem = memory(account(tmp_path / "home"))
    doc = tmp_path / "runbook.md"
    doc.write_text("# Runbook\n\nRestart the queue with `systemctl restart q`.", encoding="utf-8")
    by_path = mem.ingest(doc, agent="pro")
    assert by_path.source == str(doc) and by_path.chunk_ids == ()  # short: the raw record is its only chunk
    by_text = mem.ingest("The cafeteria closes at 3 pm on Fridays.", agent="flash")
    assert by_text.source == "text"
    assert mem.ingest(str(doc), agent="pro", kind="text").source == "text"  # kind wins over auto
    with pytest.raises(InvalidInput):
        mem.ingest("   ", agent="pro")
    with pytest.raises(NotFound):
        mem.ingest(tmp_path / "missing.md", agent="pro")


def test_ingest_refuses_what_it_cannot_read(site: str, tmp_path: Path) -> None:
    mem = memory(account(tmp_path))
    with pytest.raises(NotFound):
        mem.ingest(f"{site}/missing.html", agent="pro")
    with pytest.raises(InvalidInput, match="not text"):
        mem.ingest(f"{site}/image.png", agent="pro")
    with pytest.raises(InvalidInput):
        mem.ingest("file:///etc/passwd", agent="pro", kind="url")
    assert read_source(f"{site}/notes.txt").text == "plain notes about tides"
    assert mem.entries() == []


def test_chunks_cover_the_text_within_the_size() -> None:
    text = " ".join(f"Sentence number {i} talks about topic {i % 7}." for i in range(300))
    chunks = chunk_text(text, 500, 100)
    assert all(len(c) <= 500 for c in chunks) and len(chunks) > 10
    words = set(text.split())
    assert words == set(" ".join(chunks).split())
    for a, b in itertools.pairwise(chunks):
        assert a[-40:].split()[-1] in b  # consecutive chunks overlap
    assert chunk_text("short", 500, 100) == ["short"] and chunk_text("  ", 500, 100) == []


def test_html_to_text_keeps_the_main_content_as_markdown_and_drops_the_rest() -> None:
    text, title = html_to_text(PAGE)
    assert title == "Tidal locking" and text.startswith("# Tidal locking\n") and "## Exceptions" in text
    assert "- Mercury is in a 3:2 spin-orbit resonance" in text
    assert "alert" not in text and "{" not in text  # scripts and styles
    assert "About us" not in text and "Copyright" not in text  # navigation and footer
    assert html_to_text("<html><body><p>hi</p></body></html>") == ("hi", None)  # little content: all of it


def test_without_the_agent_extra_html_urls_and_chat_say_what_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("trafilatura", "httpx", "openai"):
        monkeypatch.setitem(sys.modules, name, None)  # as if not installed: importing it fails
    with pytest.raises(BackendUnavailable, match=r"'agent' extra \(trafilatura\)"):
        html_to_text(PAGE)
    with pytest.raises(BackendUnavailable, match=r"'agent' extra \(httpx\)"):
        read_source("http://127.0.0.1:9/moon.html")
    with pytest.raises(BackendUnavailable, match="'agent' extra"):
        ChatEndpoint("http://127.0.0.1:9/v1", "tiny").complete([{"role": "user", "content": "hi"}])
    assert read_source("plain text needs no extra").text == "plain text needs no extra"
