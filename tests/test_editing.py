"""Edit and history of one record (issue 15, item 4): a new version per edit, every copy kept."""

from __future__ import annotations

from pathlib import Path

import pytest

import soulpass
from soulpass.engine import Account
from soulpass.errors import InvalidInput, NotFound


@pytest.fixture
def acct(tmp_path: Path) -> Account:
    a = soulpass.open(tmp_path / "home").create_account("ann")
    sb = a.create_sandbox("s")
    sb.add_fact("ann", "lives_in", "Paris", confidence=0.9)
    sb.add_turn("user", "hello there")
    sb.archive()
    return a


def _ids(a: Account) -> tuple[str, str]:
    added = a.log()[-1]["added"]
    return added["fact"][0], added["turn_user"][0]


def test_edit_turn_writes_a_new_copy_and_keeps_the_old(acct: Account) -> None:
    _fact, turn = _ids(acct)
    v = acct.edit(turn, text_excerpt="hello world", reason="typo")
    assert v == 2 and acct.log()[-1]["kind"] == "edit"
    assert acct.record(turn).text_excerpt == "hello world"
    assert acct.record(turn).text == "hello world"
    assert acct.record(turn, at=1).text_excerpt == "hello there"
    rows = acct.history(turn)
    assert [r["version"] for r in rows] == [1, 2]
    assert rows[1]["changes"]["changed"]["text_excerpt"] == ["hello there", "hello world"]
    assert rows[1]["reason"] == "typo"


def test_edit_fact_supersedes_it(acct: Account) -> None:
    fact, _turn = _ids(acct)
    acct.edit(fact, object="Lyon")
    entry = acct.log()[-1]
    new = entry["added"]["fact"][0]
    assert entry["superseded"] == [{"fact": fact, "by": new}]
    assert acct.record(fact).superseded_by == new
    assert acct.record(new).object == "Lyon" and acct.record(new).supersedes == (fact,)
    assert acct.record(fact).object == "Paris"
    assert [e.target_label for e in acct.gks().edges] == ["Lyon"]  # the graph moved to the new fact
    with pytest.raises(InvalidInput):
        acct.edit(fact, object="Rome")  # superseded: the newer fact is the one to edit
    assert [r["version"] for r in acct.history(fact)] == [1, 2]
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
