"""Rebase through the engine, for every backend: a sandbox whose parent moved is re-planned on HEAD."""

from __future__ import annotations

from contract_backends import Backend

from soulpass import Committed
from soulpass.records import TurnUser


def test_two_sandboxes_from_one_parent_both_land(backend: Backend) -> None:
    acct = backend.engine().create_account("alice")
    first, second = acct.create_sandbox("first"), acct.create_sandbox("second")
    first.add_fact("User", "lives in", "Paris", confidence=0.9)
    first.update_state("ire", {"mood": "calm"})
    second.add_fact("User", "lives in", "Bangkok", confidence=0.9)
    second.add_turn("user", "I moved to Bangkok")
    a, b = first.archive(), second.archive()
    assert isinstance(a, Committed) and isinstance(b, Committed)
    assert (a.version, b.version, b.plan.rebased) == (1, 2, True)
    entry = acct.log()[-1].to_json()
    assert entry["rebased"] == {"from": 0, "onto": 1} and entry["parent"] == 1
    facts = {f.object: f for f in acct.records("fact")}
    assert facts["Paris"].superseded_by == facts["Bangkok"].id  # re-validated against the newer master
    assert acct.state("ire") is not None and acct.state("ire").data == {"mood": "calm"}  # type: ignore[union-attr]
    turns = list(acct.records("turn_user"))
    assert [r.text_excerpt for r in turns if isinstance(r, TurnUser)] == ["I moved to Bangkok"] and len(turns) == 1
