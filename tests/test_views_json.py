"""The JSON of ``log``, ``diff``, ``history`` and ``show`` on every interface (CLI ``--json`` and
its tables, REST, MCP) is pinned: whole documents compared with ``tests/data/views_golden.json``,
captured before those methods returned models instead of dicts. What differs between runs (times,
sandbox ids, event ids, dates inside ids and paths, temporary ids, hashes of what holds a time) is masked.

Regenerate only on purpose: ``SOULPASS_WRITE_GOLDEN=1 pytest tests/test_views_json.py``."""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from fastapi.testclient import TestClient

import soulpass
from soulpass.cli.main import cli
from soulpass.mcp.tools import MemoryTools
from soulpass.pool import AccountPool
from soulpass.server.app import create_app
from soulpass.server.keys import FileKeyStore
from soulpass.server.limits import ServerLimits

GOLDEN = Path(__file__).parent / "data" / "views_golden.json"
WRITE = os.environ.get("SOULPASS_WRITE_GOLDEN") == "1"

_MASKS = (
    (re.compile(r"\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}:\d{2}(?:\.\d+)?(?:Z|[+-]\d{2}:\d{2})?"), "<time>"),
    (re.compile(r"sb_\d{8}_\d{6}_[0-9a-f]+"), "<sandbox>"),
    (re.compile(r"\b([a-z]{2})_temp_[0-9a-f]+"), r"\1_temp"),
    (re.compile(r"\b([A-Z]{2})_\d{8}_(\d{3})"), r"\1_<date>_\2"),
    (re.compile(r"\d{4}-\d{2}-\d{2}_"), "<date>_"),
    (re.compile(r"/\d{4}/\d{2}/"), "/<yyyy>/<mm>/"),
    (re.compile(r"\b[0-9a-f]{64}\b"), "<sha256>"),
    (re.compile(r"\b[0-9a-f]{32}\b"), "<uuid>"),
)


def mask(value: Any) -> Any:
    """``value`` with what changes from run to run replaced by placeholders (keys too)."""
    if isinstance(value, dict):
        return {mask(k): mask(v) for k, v in value.items()}
    if isinstance(value, list):
        return [mask(v) for v in value]
    if isinstance(value, str):
        for pattern, repl in _MASKS:
            value = pattern.sub(repl, value)
    return value


@dataclass
class Home:
    path: Path
    sp: soulpass.Soulpass
    fact: str
    turn: str
    entry: str
    key: str


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Home:
    path = tmp_path_factory.mktemp("views") / "home"
    sp = soulpass.open(path, embedder="none")
    acct = sp.create_account("ann")
    sb = acct.create_sandbox("monday")
    sb.add_turn("user", "I moved to Rome last spring")
    sb.add_fact("ann", "lives_in", "Rome", confidence=0.9)
    sb.update_state("mood", {"calm": 1})
    sb.update_profile({"name": "Ann"})
    sb.propose_core("identity", "a violinist", confidence=0.95, reason="said so", key="role")
    sb.add_journal("A day in Rome, lovely and slow.", title="rome", tags=("travel",))
    v1 = sb.archive()
    assert isinstance(v1, soulpass.Committed)
    (fact,) = v1.plan.added["fact"]
    (turn,) = v1.plan.added["turn_user"]
    (entry,) = [j["id"] for j in v1.plan.journal]
    acct.edit(fact, object="Milan", reason="moved again")
    acct.edit(turn, text_excerpt="I moved to Rome last summer", reason="typo")
    acct.rollback(1)
    acct.journal().add("Another entry, about Milan.", tags=("travel",))
    key = FileKeyStore(path).create(None).secret
    return Home(path, sp, fact, turn, entry, key)


def documents(h: Home) -> dict[str, Any]:
    """What each question asks: (CLI args, REST path, MCP call) by name."""
    return {
        "log": (["log"], "/versions", None),
        "diff_0_head": (["diff", "0", "5"], "/diff?a=0&b=5", ("memory_diff", (0, 5))),
        "diff_1_3": (["diff", "1", "3"], "/diff?a=1&b=3", ("memory_diff", (1, 3))),
        "history_fact": (["history", h.fact], f"/records/{h.fact}/history", ("memory_history", (h.fact,))),
        "history_turn": (["history", h.turn], f"/records/{h.turn}/history", ("memory_history", (h.turn,))),
        "history_entry": (["history", h.entry], f"/records/{h.entry}/history", ("memory_history", (h.entry,))),
        "show_fact": (["show", h.fact], f"/show/{h.fact}", ("get_memory", (h.fact,))),
        "show_fact_at_2": (["show", h.fact, "--at", "2"], f"/show/{h.fact}?at=2", ("get_memory", (h.fact, 2))),
        "show_turn": (["show", h.turn], f"/records/{h.turn}", ("get_memory", (h.turn,))),
        "show_entry": (["show", h.entry], f"/show/{h.entry}", ("get_memory", (h.entry,))),
        "show_core": (["show", "core"], "/show/core", ("get_memory", ("core",))),
        "show_profile": (["show", "profile"], "/show/profile", ("get_memory", ("profile",))),
        "show_gks": (["show", "gks"], "/show/gks", ("get_memory", ("gks",))),
        "show_state": (["show", "state:mood"], "/show/state:mood", ("get_memory", ("state:mood",))),
    }


def _cli(h: Home, args: list[str], *extra: str) -> str:
    result = CliRunner().invoke(cli, ["--home", str(h.path), *args, "-a", "ann", *extra], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    return result.output


@pytest.fixture(scope="module")
def answers(home: Home) -> dict[str, Any]:
    """Every interface's answer to every question, masked."""
    client = TestClient(create_app(home.sp, limits=ServerLimits(rate=0, burst=0, failed_keys=0, quota_bytes=0)))
    tools = MemoryTools(AccountPool(home.sp))
    out: dict[str, Any] = {}
    for name, (args, rest, mcp) in documents(home).items():
        got = client.get(f"/v1/accounts/ann{rest}", headers={"Authorization": f"Bearer {home.key}"})
        assert got.status_code == 200, got.text
        out[name] = {"cli_json": mask(json.loads(_cli(home, args, "--json"))), "rest": mask(got.json())}
        if mcp is not None:
            method, call = mcp
            out[name]["mcp"] = mask(json.loads(json.dumps(getattr(tools, method)("ann", *call))))
        if not name.startswith("show"):  # show's text is the JSON, coloured
            out[name]["cli_text"] = mask(_cli(home, args)).splitlines()
    out["mcp_memory_log"] = mask(json.loads(json.dumps(tools.memory_log("ann", 10))))
    out["mcp_read_identity"] = mask(json.loads(json.dumps(tools.read_identity("ann"))))
    return out


@pytest.fixture(scope="module")
def golden(answers: dict[str, Any]) -> Iterator[dict[str, Any]]:
    if WRITE:
        GOLDEN.write_text(json.dumps(answers, indent=1, ensure_ascii=False, sort_keys=True) + "\n", "utf-8")
    yield json.loads(GOLDEN.read_text("utf-8"))


@pytest.mark.parametrize("name", ["log", "diff_0_head", "diff_1_3", "history_fact", "history_turn",
                                  "history_entry", "show_fact", "show_fact_at_2", "show_turn", "show_entry",
                                  "show_core", "show_profile", "show_gks", "show_state", "mcp_memory_log",
                                  "mcp_read_identity"])
def test_every_interface_answers_as_before(name: str, answers: dict[str, Any], golden: dict[str, Any]) -> None:
    assert answers[name] == golden[name]


def test_the_interfaces_agree_with_each_other(answers: dict[str, Any]) -> None:
    """The CLI's ``--json``, REST and MCP give one document (REST's log is a page of the same entries)."""
    for name, got in answers.items():
        if name.startswith("mcp_"):
            continue
        assert got["cli_json"] == got["rest"], name
        if "mcp" in got:
            assert got["mcp"] == got["cli_json"], name
    assert [e["version"] for e in answers["log"]["cli_json"]] == [1, 2, 3, 4, 5]
