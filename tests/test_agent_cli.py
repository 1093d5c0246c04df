"""The agent commands end to end through click's runner: clipboard, context, ingest, chat."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

import soulpass
from agent_helpers import shared_redis
from soulpass.cli.main import cli
from soulpass.records import TurnLLM


@pytest.fixture
def run(tmp_path: Path) -> Iterator[Any]:
    runner = CliRunner()
    home = tmp_path / "home"

    def invoke(*args: str, code: int = 0, input: str | None = None) -> str:
        result = runner.invoke(cli, ["--home", str(home), *args], input=input,
                               env={"SOULPASS_ACCOUNT": "", "SOULPASS_HOME": "", "SOULPASS_AGENT": "",
                                    "SOULPASS_CHAT_BASE_URL": "", "SOULPASS_CHAT_MODEL": ""})
        assert result.exit_code == code, f"{args}: exit {result.exit_code}\n{result.output}\n{result.exception!r}"
        return result.output

    invoke("account", "create", "ann")
    yield invoke


def _acct(tmp_path: Path) -> soulpass.Account:
    return soulpass.open(tmp_path / "home", embedder="none").account("ann")


def test_clipboard_commands(run: Any, tmp_path: Path) -> None:
    who = ("-a", "ann", "--agent", "pro")
    run("clipboard", "add", "deploy on Tuesdays only", *who)
    run("clipboard", "add", "ACME is the priority", *who)
    assert _acct(tmp_path).head() == 2  # each write outside a sandbox is its own version
    out = run("clipboard", "show", *who, "--json")
    assert json.loads(out) == {"agent": "pro", "items": ["deploy on Tuesdays only", "ACME is the priority"]}
    assert "2. ACME is the priority" in run("clipboard", "show", *who)
    run("clipboard", "remove", "1", *who)
    assert json.loads(run("clipboard", "show", *who, "--json"))["items"] == ["ACME is the priority"]
    assert json.loads(run("clipboard", "show", *who, "--at", "2", "--json"))["items"][0] == "deploy on Tuesdays only"
    run("clipboard", "remove", "not there", *who, code=3)
    # inside a sandbox: nothing committed until it is archived
    sid = run("sandbox", "create", "s", "-a", "ann").strip()
    run("clipboard", "clear", *who, "--sandbox", sid)
    assert json.loads(run("clipboard", "show", *who, "--sandbox", sid, "--json"))["items"] == []
    assert json.loads(run("clipboard", "show", *who, "--json"))["items"] == ["ACME is the priority"]
    run("archive", sid, "-a", "ann")
    assert json.loads(run("clipboard", "show", *who, "--json"))["items"] == []


def test_context_and_ingest_commands(run: Any, tmp_path: Path) -> None:
    who = ("-a", "ann", "--agent", "pro")
    doc = tmp_path / "runbook.md"
    doc.write_text("# Queue runbook\n\nRestart the billing queue with systemctl restart billing-q.", encoding="utf-8")
    out = json.loads(run("ingest", str(doc), *who, "--json"))
    assert out["source"] == str(doc) and out["raw_id"].startswith("SR_")  # archived: permanent ids (issue 16)
    run("clipboard", "add", "ACME first", *who)
    head = _acct(tmp_path).head()
    text = run("context", "how do I restart the billing queue", *who, "--situation", "location_context=mobile_ssh")
    assert text.index("[ACTIVE_CLIPBOARD]") < text.index("[SITUATION]") < text.index("[HOT_LOG]")
    assert "2-3 lines of code" in text and "billing" in text.split("[MEMORIES]")[1]
    block = json.loads(run("context", "billing queue", *who, "--budget", "40", "--json"))
    assert block["budget_tokens"] == 40 and any(s["dropped"] for s in block["sections"])
    assert _acct(tmp_path).head() == head and _acct(tmp_path).sandboxes() == []  # context wrote nothing
    run("context", "x", *who, "--situation", "oops", code=2)
    run("ingest", str(tmp_path / "missing.md"), *who, "--kind", "path", code=3)


class _Model(BaseHTTPRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        return None

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        context = body["messages"][0]["content"]
        answer = "Use rsync." if "[HOT_LOG]" in context else "no context?"
        data = json.dumps({"choices": [{"message": {"role": "assistant", "content": answer}}]}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


def test_chat_logs_turns_shows_context_and_answers(run: Any, tmp_path: Path) -> None:
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Model)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{httpd.server_address[1]}/v1"
        out = run("chat", "-a", "ann", "--agent", "eva", "--base-url", url, "--model", "tiny",
                  input="how do I copy the backups?\n/clip add backups live on /mnt/storage\n/hot\n/quit\n")
    finally:
        httpd.shutdown()
        httpd.server_close()
    assert "[ACTIVE_CLIPBOARD]" in out and "eva> Use rsync." in out and "archived as version 1" in out
    acct = _acct(tmp_path)
    texts = sorted(r.text for r in acct.records("turn_user")) + sorted(r.text for r in acct.records("turn_llm"))
    assert texts == ["how do I copy the backups?", "Use rsync."]
    (asked,), (answer,) = list(acct.records("turn_user")), list(acct.records("turn_llm"))
    assert isinstance(answer, TurnLLM) and answer.reply_to == asked.id
    assert json.loads(run("clipboard", "show", "-a", "ann", "--agent", "eva", "--json"))["items"] == [
        "backups live on /mnt/storage"]


def test_chat_without_an_endpoint_only_logs(run: Any, tmp_path: Path) -> None:
    out = run("chat", "-a", "ann", "--agent", "eva", "--hide-context", input="remember the milk\n")
    assert "no chat endpoint configured" in out and "[HOT_LOG]" not in out
    assert [r.text for r in _acct(tmp_path).records("turn_user")] == ["remember the milk"]
    run("chat", "-a", "ann", "--agent", "eva", "--base-url", "http://127.0.0.1:9/v1", code=2, input="")


def test_chat_rag_through_a_redis_inbox(run: Any, tmp_path: Path) -> None:
    client = shared_redis()
    run("ingest", "The staging database password rotates every Friday at noon.", "-a", "ann", "--agent", "pro")
    key = "soulpass:ann:inbox:pro"
    client.delete(key)
    try:
        out = run("chat", "-a", "ann", "--agent", "pro", "--inbox-redis", "redis://127.0.0.1:6379/0",
                  input="/rag staging database password\n/quit\n")
        assert "1 episode(s) delivered to pro's inbox" in out
        message = json.loads(client.lindex(key, 0))
        assert message["from_tool"] == "rag_search" and "rotates every Friday" in message["markdown"]
    finally:
        client.delete(key)
