"""The scribe: the extractive summariser, and a chat model served by a local OpenAI-compatible server."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, ClassVar

import pytest

from agent_helpers import Clock, account, memory
from soulpass.agent import ChatEndpoint, ChatSummariser, ExtractiveSummariser, SummaryRequest
from soulpass.agent.scribe import EpisodeDraft, SummaryFailed, draft_episode
from soulpass.agent.types import LogEntry
from soulpass.engine import Committed
from soulpass.errors import BackendUnavailable, InvalidInput
from soulpass.records import Episode

VALID = {
    "title": "Invoices booked",
    "situation_context": {"interaction_mode": "task", "location_context": None, "agent_role": "Accountant",
                          "mission_goal": "close the month"},
    "summary": {"action_taken": "Booked the January invoices", "key_outcome": "All 4 invoices are booked",
                "future_implication": "Send the ledger to the auditor"},
    "narrative": "## Invoices\n\nThe agents booked every January invoice.",
}


class _Model(BaseHTTPRequestHandler):
    """``/<mode>/v1/chat/completions``: answers by mode; records each request."""

    requests: ClassVar[list[dict[str, Any]]] = []

    def log_message(self, format: str, *args: Any) -> None:
        return None

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        type(self).requests.append({"path": self.path, "body": body, "auth": self.headers.get("Authorization")})
        mode = self.path.split("/")[1]
        if mode == "fail":
            self.send_response(500)
            self.end_headers()
            self.wfile.write(b"model crashed")
            return
        content = {
            "valid": json.dumps(VALID),
            "fenced": "```json\n" + json.dumps(VALID) + "\n```",
            "invalid": json.dumps({"title": "x", "summary": {"action_taken": 3}}),
            "extra": json.dumps({**VALID, "mood": "happy"}),
            "nojson": "Sure! Here is a summary: the agents booked invoices.",
            "empty": "",
            "garbage": "",
        }[mode]
        payload = {"choices": [{"message": {"role": "assistant", "content": content}}]}
        data = b"<html>bad gateway</html>" if mode == "garbage" else json.dumps(payload).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


@pytest.fixture
def server() -> Iterator[str]:
    _Model.requests = []
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Model)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}"
    finally:
        httpd.shutdown()
        httpd.server_close()


def _entries() -> tuple[LogEntry, ...]:
    from agent_helpers import START

    return tuple(
        LogEntry(id=f"tl_temp_{i:012x}", event_id=str(i), at=START, agent="pro" if i % 2 else "flash",
                 kind="outcome" if i % 2 else "intent", speaker="pro" if i % 2 else "user",
                 text=f"invoice {i} booked. We should send it next week." if i % 2 else f"book invoice {i}")
        for i in range(6))


def test_extractive_is_deterministic_and_complete() -> None:
    req = SummaryRequest(reason="limit", entries=_entries())
    a, b = ExtractiveSummariser().summarise(req), ExtractiveSummariser().summarise(req)
    assert a == b
    assert a.summary.action_taken.startswith("flash, pro: 6 log entries")
    assert a.summary.key_outcome == "invoice 5 booked."
    assert a.summary.future_implication == "Follow up: invoice 5 booked."
    assert all(e.text[:20] in a.narrative for e in req.entries)
    assert a.situation_context.interaction_mode == "chat"
    doc = ExtractiveSummariser().summarise(SummaryRequest(reason="ingest", document="# Tides\n\nThe moon pulls "
                                                          "the sea. Tides rise twice a day.", source="x.md"))
    assert doc.title == "Tides" and "Tides rise" in doc.narrative
    with pytest.raises(SummaryFailed):
        ExtractiveSummariser().summarise(SummaryRequest(reason="limit"))


@pytest.mark.parametrize(("mode", "fallback"), [
    ("valid", None), ("fenced", None), ("invalid", "does not match the episode schema"),
    ("extra", "does not match the episode schema"), ("nojson", "not JSON"), ("fail", "the model call failed"),
    ("empty", "not JSON"), ("garbage", "sent no chat completion"),
])
def test_model_answers_always_end_in_a_valid_episode(server: str, mode: str, fallback: str | None,
                                                      tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    endpoint = ChatEndpoint(f"{server}/{mode}/v1", "tiny-llm", api_key="sk-test", timeout=5)
    clock = Clock()
    acct = account(tmp_path)
    mem = memory(acct, clock)
    mem.summariser = ChatSummariser(endpoint)
    ids = [mem.log("pro", f"invoice {i} booked", kind="outcome").id for i in range(4)]
    with caplog.at_level("WARNING", logger="soulpass.scribe"):
        result = mem.scribe(keep=0)
    assert result is not None and result.covered == tuple(ids)
    sent = _Model.requests[-1]
    assert sent["auth"] == "Bearer sk-test" and sent["body"]["model"] == "tiny-llm"
    assert "invoice 3 booked" in sent["body"]["messages"][1]["content"]
    episode = Episode.model_validate(mem.sandbox.buffer().new_episodes[-1])
    if fallback is None:
        assert result.summariser == "chat:tiny-llm" and result.fallback is None
        assert episode.summary.key_outcome == "All 4 invoices are booked"
        assert episode.situation_context.agent_role == "Accountant"
        assert not caplog.records
    else:
        assert result.summariser == "extractive" and fallback in (result.fallback or "")
        assert episode.annotations["scribe"]["fallback"] == result.fallback
        assert episode.summary.key_outcome == "invoice 3 booked"
        assert any(fallback in r.getMessage() for r in caplog.records)
    assert episode.summary.action_taken and episode.text == result.narrative
    committed = mem.sandbox.archive()
    assert isinstance(committed, Committed)
    stored = acct.record(committed.plan.id_map[episode.id])
    assert isinstance(stored, Episode) and [acct.record(r).text for r in stored.turn_refs] == [
        f"invoice {i} booked" for i in range(4)]


def test_an_unreachable_endpoint_falls_back() -> None:
    summariser = ChatSummariser(ChatEndpoint("http://127.0.0.1:9/v1", "m", timeout=2))
    draft, name, why = draft_episode(summariser, SummaryRequest(reason="limit", entries=_entries()))
    assert isinstance(draft, EpisodeDraft) and name == "extractive" and why and "failed" in why
    with pytest.raises(BackendUnavailable):
        summariser.endpoint.complete([{"role": "user", "content": "hi"}])


def test_endpoint_settings_are_checked() -> None:
    with pytest.raises(InvalidInput):
        ChatEndpoint("ftp://x", "m")
    with pytest.raises(InvalidInput):
        ChatEndpoint("http://127.0.0.1:1/v1", "")
