"""Clipboards (tier 1.5): explicit ops only, injected in every context, persisted by archive."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest

import soulpass
from agent_helpers import Clock, account, memory
from soulpass.agent import AgentMemory
from soulpass.engine import Committed
from soulpass.errors import InvalidInput, NotFound


def test_add_remove_clear_show(tmp_path: Path) -> None:
    mem = memory(account(tmp_path))
    assert mem.clipboard_show("pro").items == ()
    mem.clipboard_add("pro", "deploy key is in vault/ops")
    mem.clipboard_add("pro", "never restart db-2 during business hours")
    view = mem.clipboard_add("pro", "deploy key is in vault/ops")  # already pinned: not twice
    assert view.items == ("deploy key is in vault/ops", "never restart db-2 during business hours")
    assert mem.clipboard_show("flash").items == ()  # one clipboard per agent
    assert mem.clipboard_remove("pro", 1).items == ("never restart db-2 during business hours",)
    with pytest.raises(NotFound):
        mem.clipboard_remove("pro", "not pinned")
    with pytest.raises(NotFound):
        mem.clipboard_remove("pro", 5)
    with pytest.raises(InvalidInput):
        mem.clipboard_add("pro", "   ")
    with pytest.raises(InvalidInput):
        mem.clipboard_add("../pro", "x")
    assert mem.clipboard_clear("pro").items == ()
    view = mem.clipboard_add("pro", "multi\nline item")
    assert view.markdown() == "[ACTIVE_CLIPBOARD]\n1. multi\nline item\n[/ACTIVE_CLIPBOARD]"


def test_the_clipboard_is_in_every_context_and_never_pruned(tmp_path: Path) -> None:
    clock = Clock()
    mem = memory(account(tmp_path), clock, log_limit=5, hot_window=2)
    mem.clipboard_add("pro", "the customer is ACME")
    for i in range(12):
        mem.log("pro", f"working on step {i}")
        clock.advance(minutes=1)
        block = mem.context("pro", "next?", 50)  # a tiny budget: everything else is cut first
        assert "[ACTIVE_CLIPBOARD]\n1. the customer is ACME\n[/ACTIVE_CLIPBOARD]" in block.text
    assert len(mem.hot()) <= 5
    clock.advance(hours=9)
    assert "the customer is ACME" in mem.context("pro", "morning", 50).text
    assert mem.clipboard_show("pro").items == ("the customer is ACME",)


def test_clipboard_survives_deep_sleep_archive_and_restart(tmp_path: Path) -> None:
    clock = Clock()
    acct = account(tmp_path)
    mem = memory(acct, clock, archive_on_sleep=True)
    mem.log("pro", "started")
    mem.clipboard_add("pro", "ticket OPS-12 is the priority")
    mem.clipboard_add("pro", "staging password rotates on Fridays")
    clock.advance(hours=8)
    assert mem.wake("pro") is not None  # archived as version 1, continued in a fresh sandbox
    assert acct.head() == 1
    path = acct.store.path / "core" / "06_Clipboard" / "pro.md"
    text = path.read_text(encoding="utf-8")
    assert text.startswith("---\n") and "- ticket OPS-12 is the priority" in text
    assert mem.clipboard_show("pro").items == ("ticket OPS-12 is the priority", "staging password rotates on Fridays")
    mem.clipboard_remove("pro", "staging password rotates on Fridays")
    assert isinstance(mem.sandbox.archive(), Committed)
    # restart: a new process opens the home folder again
    acct2 = soulpass.open(tmp_path, embedder="none").account("ann")
    again = AgentMemory(acct2.create_sandbox("next day"))
    assert again.clipboard_show("pro").items == ("ticket OPS-12 is the priority",)
    # the replaced copy is kept: version 1 still reads the two items
    assert acct2.store.snapshot(1).document("core/06_Clipboard/pro.md")["items"] == [  # type: ignore[index]
        "ticket OPS-12 is the priority", "staging password rotates on Fridays"]
    assert "core/06_Clipboard/pro.md" in acct2.log()[-1].replaced


def test_a_discarded_sandbox_discards_its_clipboard_edits(tmp_path: Path) -> None:
    acct = account(tmp_path)
    mem = memory(acct)
    mem.clipboard_add("pro", "kept")
    mem.sandbox.archive()
    scratch = memory(acct, sandbox_name="scratch")
    scratch.clipboard_add("pro", "thrown away")
    scratch.clipboard_remove("pro", "kept")
    assert scratch.clipboard_show("pro").items == ("thrown away",)
    scratch.sandbox.discard()
    assert memory(acct, sandbox_name="after").clipboard_show("pro").items == ("kept",)
    assert acct.head() == 1


def test_rebase_keeps_items_another_sandbox_pinned(tmp_path: Path) -> None:
    acct = account(tmp_path)
    first = memory(acct)
    first.clipboard_add("pro", "old note")
    first.sandbox.archive()
    a = memory(acct, sandbox_name="a")
    b = memory(acct, sandbox_name="b")
    a.clipboard_add("pro", "pinned by a")
    a.sandbox.archive()
    b.clipboard_clear("pro")  # b saw only "old note"
    b.clipboard_add("pro", "pinned by b")
    result = b.sandbox.archive()
    assert isinstance(result, Committed) and result.plan.rebased
    assert memory(acct, sandbox_name="c").clipboard_show("pro").items == ("pinned by a", "pinned by b")


def test_a_clipboard_op_never_runs_on_its_own(tmp_path: Path) -> None:
    clock = Clock()
    mem = memory(account(tmp_path), clock, sleep_after=timedelta(minutes=1))
    mem.clipboard_add("pro", "x")
    for _ in range(3):
        clock.advance(hours=2)
        mem.log("pro", "tick")
        mem.scribe(keep=0)
    assert mem.clipboard_show("pro").items == ("x",)


def test_rollback_restores_an_earlier_clipboard(tmp_path: Path) -> None:
    acct = account(tmp_path)
    for items in (("a",), ("a", "b")):
        mem = memory(acct)
        mem.clipboard_clear("pro")
        for item in items:
            mem.clipboard_add("pro", item)
        mem.sandbox.archive()
    assert acct.head() == 2
    acct.rollback(1)
    assert memory(acct, sandbox_name="after").clipboard_show("pro").items == ("a",)
    text = (acct.store.path / "core" / "06_Clipboard" / "pro.md").read_text(encoding="utf-8")
    assert text.startswith("---\n") and "# Clipboard of pro\n\n- a\n" in text and "version: 3" in text
    acct.rollback(0)  # before the clipboard existed: the file is retired
    assert memory(acct, sandbox_name="empty").clipboard_show("pro").items == ()
