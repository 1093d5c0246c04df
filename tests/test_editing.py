"""Edit and history of one record (issue 15, item 4): a new version per edit, every copy kept."""

from __future__ import annotations

from pathlib import Path

import pytest

import soulpass
from soulpass.engine import Account
from soulpass.errors import InvalidInput, NotFound
from soulpass.records import SensoryRecord


@pytest.fixture
def acct(tmp_path: Path) -> Account:
    a = soulpass.open(tmp_path / "home").create_account("ann")
    sb = a.create_sandbox("s")
    sb.add_fact("ann", "lives_in", "Paris", confidence=0.9)
    sb.add_turn("user", "hello there")
    sb.archive()
    return a


def _ids(a: Account) -> tuple[str, str]:
    added = a.log()[-1].added
    return added["fact"][0], added["turn_user"][0]


def test_edit_turn_writes_a_new_copy_and_keeps_the_old(acct: Account) -> None:
    _fact, turn = _ids(acct)
    v = acct.edit(turn, text_excerpt="hello world", reason="typo")
    assert v == 2 and acct.log()[-1].kind == "edit"
    assert acct.record(turn).text_excerpt == "hello world"
    assert acct.record(turn).text == "hello world"
    assert acct.record(turn, at=1).text_excerpt == "hello there"
    rows = acct.history(turn)
    assert [r.version for r in rows] == [1, 2]
    assert rows[1].changes is not None and rows[1].changes.changed["text_excerpt"] == ["hello there", "hello world"]
    assert rows[1].reason == "typo"


def test_edit_fact_supersedes_it(acct: Account) -> None:
    fact, _turn = _ids(acct)
    acct.edit(fact, object="Lyon")
    entry = acct.log()[-1]
    new = entry.added["fact"][0]
    assert entry.superseded == [{"fact": fact, "by": new}]
    assert acct.record(fact).superseded_by == new
    assert acct.record(new).object == "Lyon" and acct.record(new).supersedes == (fact,)
    assert acct.record(fact).object == "Paris"
    assert [e.target_label for e in acct.gks().edges] == ["Lyon"]  # the graph moved to the new fact
    with pytest.raises(InvalidInput):
        acct.edit(fact, object="Rome")  # superseded: the newer fact is the one to edit
    assert [r.version for r in acct.history(fact)] == [1, 2]
    assert acct.store.audit() == []


def test_bad_edits(acct: Account) -> None:
    _fact, turn = _ids(acct)
    head = acct.head()
    with pytest.raises(NotFound, match="TU_20200101_001"):
        acct.edit("TU_20200101_001", text_excerpt="x")
    with pytest.raises(NotFound, match="TU_20200101_001"):
        acct.history("TU_20200101_001")
    for fields in ({"bogus": 1}, {"text_excerpt": 5}, {"id": "TU_20200101_002"}, {}):
        with pytest.raises(InvalidInput):
            acct.edit(turn, **fields)
    assert acct.head() == head


def test_edit_of_text_carries_every_derived_field(tmp_path: Path) -> None:
    """Issue 40 item 2: ``edit --set text=…`` once kept the old words in ``text_excerpt`` (and the
    semantic hash), so ``show`` and ``search`` of the old secret still found them at HEAD."""
    a = soulpass.open(tmp_path / "home", embedder="none").create_account("ann")
    sb = a.create_sandbox("s")
    sb.add_turn("user", "my code is ZEBRAQUARTZ-7731")
    sb.add_sensory("the vault code reads ZEBRAQUARTZ-7731")
    sb.archive()
    turn = next(a.records("turn_user")).id
    sensory = next(a.records("sensory")).id
    for rid in (turn, sensory):
        before = a.record(rid)
        a.edit(rid, text="my code is ZEBRAQUARTZ-9999", reason="corrected")
        after = a.record(rid)
        assert "7731" not in a.show(rid).model_dump_json(), a.show(rid)
        assert after.core_text() == after.text == "my code is ZEBRAQUARTZ-9999"
        assert after.semantic_hash != before.semantic_hash
        assert "7731" in a.show(rid, at=1).model_dump_json()  # the earlier copy is kept
    sensory_now = a.record(sensory)
    assert isinstance(sensory_now, SensoryRecord) and sensory_now.size_bytes == len(sensory_now.content)
    assert [h.id for h in a.search("ZEBRAQUARTZ-7731") if "7731" in h.text] == []
    assert {h.id for h in a.search("ZEBRAQUARTZ-9999")} >= {turn, sensory}
    assert [h.id for h in a.search("ZEBRAQUARTZ-7731", at=1) if "7731" in h.text]
