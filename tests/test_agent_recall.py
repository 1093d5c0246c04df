"""The agent's recall is the sandbox's one search: a committed fact the session supersedes does not
outrank the fact superseding it in the agent's context block (issue 37 item 6)."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent_helpers import account, memory


def test_the_context_block_lists_the_new_fact_above_the_one_it_supersedes(tmp_path: Path) -> None:
    pytest.importorskip("onnxruntime", reason="needs the embed extra (the real model)")
    acct = account(tmp_path, embedder="auto")
    past = acct.create_sandbox("past")
    paris = past.add_fact("Ann", "lives in", "Paris", confidence=0.9)
    plan = past.archive().plan
    mem = memory(acct)
    lyon = mem.sandbox.add_fact("Ann", "lives in", "Lyon", confidence=0.9)  # supersedes Paris at archive
    block = mem.context("eva", "where does Ann live?", 100_000)
    lines = next(s for s in block.sections if s.name == "memories").text.splitlines()
    assert any(lyon in line for line in lines), lines
    paris_id = plan.id_map[paris]
    above = [i for i, line in enumerate(lines) if paris_id in line]
    assert not above or above[0] > next(i for i, line in enumerate(lines) if lyon in line), lines
    assert mem.sandbox.archive().plan.superseded[0]["fact"] == paris_id  # and the archive agrees
