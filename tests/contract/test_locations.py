"""Where a backend keeps what is derived from its accounts, for every backend: the store says where an
account's index lives (a closed union) and which database, if any, other layers keep tables in."""

from __future__ import annotations

from contract_backends import Backend

from soulpass.index.opening import drop_index, index_database
from soulpass.store.contract import DatabaseIndex, LocalIndex


def test_an_account_says_where_its_index_lives(backend: Backend) -> None:
    sp = backend.engine()
    alice, bob = sp.backend.open("alice", create=True), sp.backend.open("bob", create=True)
    database = sp.backend.database()
    match alice.index_location(), bob.index_location():
        case LocalIndex(folder=mine), LocalIndex(folder=theirs):  # a home folder: inside the account
            assert database is None and mine.parent.name == "alice" and theirs.parent.name == "bob"
        case DatabaseIndex() as mine_db, DatabaseIndex() as theirs_db:  # a database: its tables, by account row
            assert database is not None and mine_db.database is database and theirs_db.database is database
            assert mine_db.account != theirs_db.account and mine_db.folder != theirs_db.folder
            assert index_database(mine_db) is database
        case other:
            raise AssertionError(f"one backend, two kinds of index location: {other}")
    acct = sp.account("alice")
    sb = acct.create_sandbox("s")
    sb.add_turn("user", "the violin lesson is on Tuesday")
    sb.archive()
    assert acct.search("violin", k=1)
    acct.close()
    drop_index(alice)  # gone, and the next search rebuilds it from the store
    assert sp.account("alice").search("violin", k=1)[0].text == "the violin lesson is on Tuesday"
