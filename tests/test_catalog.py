"""The catalog (DESIGN §5, issue 3 item 1): rows per stored copy, FTS5, catch-up and rebuild.

Everything runs on real stores (archives, supersessions, rollbacks, bulk appends) and a real
SQLite file; "crashes" are an exception inside a catch-up transaction, a commit stopped after
``version_written`` and a SIGKILLed catch-up process.
"""

from __future__ import annotations

import hashlib
import os
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

import soulpass
from soulpass import Committed
from soulpass.errors import BackendUnavailable, InvalidInput
from soulpass.ids import new_temp_id
from soulpass.index.catalog import (
    Catalog,
    CatalogRow,
    Filters,
    catch_up,
    fts_query,
    passes,
    query_terms,
)
from soulpass.index.catalog.rows import is_catalogued, row_id
from soulpass.index.catalog.schema import SCHEMA_VERSION
from soulpass.index.catalog.sync import apply_changes
from soulpass.records import SensoryRecord, TurnLLM, TurnUser
from soulpass.store.contract import StoredCopy
from soulpass.store.files.layout import history_path
from soulpass.store.keys import record_path

T0 = datetime(2025, 3, 1, 9, 0, tzinfo=UTC)


@pytest.fixture(autouse=True)
def _no_fsync(monkeypatch: pytest.MonkeyPatch) -> None:
    """Durability of the files is tested by the crash tests; here fsync would only be slow."""
    monkeypatch.setattr(os, "fsync", lambda fd: None)


@pytest.fixture(autouse=True)
def _every_engine(engine: str) -> str:
    """Every test runs with FTS5 alone and with the tantivy sidecar (``engine`` in conftest)."""
    return engine


@pytest.fixture
def acct(tmp_path: Path) -> soulpass.Account:
    return soulpass.open(tmp_path / "home").account("alice", create=True)


@pytest.fixture
def cat(acct: soulpass.Account) -> Iterator[Catalog]:
    with Catalog.open(acct.store) as c:
        yield c


def archive(sb: soulpass.Sandbox) -> Committed:
    res = sb.archive()
    assert isinstance(res, Committed), res
    return res


def fact(acct: soulpass.Account, s: str, p: str, o: str) -> tuple[int, str]:
    sb = acct.create_sandbox("facts")
    temp = sb.add_fact(s, p, o, confidence=0.9)
    res = archive(sb)
    return res.version, res.plan.id_map[temp]


def snapshot(c: Catalog) -> list[CatalogRow]:
    return list(c.rows())


def keys(rows: list[CatalogRow]) -> set[tuple[str, int]]:
    return {(r.id, r.version) for r in rows}


def build_history(acct: soulpass.Account, catalog: Catalog | None = None) -> dict[str, Any]:
    """Several kinds of version: archives with every event type, a supersession, a rollback, a
    restore (rollback forward again), a bulk append. ``catalog`` catches up after each one."""
    out: dict[str, Any] = {}

    def step() -> None:
        if catalog is not None:
            catalog.catch_up(acct.store)

    sb = acct.create_sandbox("morning")
    tu = sb.write_turn({"kind": "turn_user", "text_excerpt": "I adopted a grey cat named Pixel",
                        "created_at": T0.isoformat(), "tags": ["pets", "home"]})
    sb.write_turn({"kind": "turn_llm", "text_excerpt": "Pixel is a lovely name for a cat.", "agent": "eva",
                   "created_at": (T0 + timedelta(minutes=1)).isoformat(), "reply_to": tu})
    sb.write_episode({"summary": {"action_taken": "talked about the new cat", "key_outcome": "user has a cat",
                                  "future_implication": "ask about Pixel"},
                      "persona_id": "companion", "event_id": "adoption", "created_at": T0.isoformat()})
    sb.add_fact("alice", "lives in", "Paris", confidence=0.9)
    sb.update_state("ire", {"mood": "cheerful"})
    sb.update_profile({"name": "Alice", "city": "Paris"})
    sb.propose_core("identity", "Eva", key="name", confidence=0.95, reason="introduced herself")
    sb.add_sensory("Recipe: croissants need butter, flour and patience.", source="http://example.org/r")
    out["v1"] = archive(sb)
    step()
    sb = acct.create_sandbox("evening")
    sb.write_turn({"kind": "turn_user", "text_excerpt": "We are moving to Berlin next month",
                   "created_at": (T0 + timedelta(days=30)).isoformat(), "tags": ["travel"]})
    sb.add_fact("alice", "lives in", "Berlin", confidence=0.9)  # supersedes Paris
    sb.update_state("ire", {"mood": "excited"})
    out["v2"] = archive(sb)
    step()
    out["v3"] = acct.rollback(1)  # Berlin retired, Paris back in force
    step()
    out["v4"] = acct.rollback(2)  # and forward again: Berlin restored
    step()
    out["v5"] = acct.bulk_append([
        TurnUser(id=new_temp_id("turn_user"), text_excerpt=f"bulk note {i} about gardening tomatoes",
                 created_at=T0 + timedelta(days=60, minutes=i))
        for i in range(5)
    ] + [SensoryRecord(id=new_temp_id("sensory"), content="A long article about sourdough starters")])
    step()
    sb = acct.create_sandbox("late")
    sb.write_turn({"kind": "turn_user", "text_excerpt": "Pixel knocked the sourdough jar over",
                   "created_at": (T0 + timedelta(days=61)).isoformat()})
    out["v6"] = archive(sb)
    step()
    return out


# --- schema ------------------------------------------------------------------------------


def test_schema_is_made_once_and_another_schema_is_rebuilt(acct: soulpass.Account) -> None:
    build_history(acct)
    with Catalog.open(acct.store) as first:
        first.catch_up(acct.store)
        rows = first.status().rows
    assert rows > 0
    path = acct.store.path / "index" / "catalog.sqlite"
    db = sqlite3.connect(path)
    assert db.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone() == (str(SCHEMA_VERSION),)
    assert db.execute("PRAGMA journal_mode").fetchone() == ("wal",)
    assert len(db.execute("SELECT name FROM migrations").fetchall()) == 5  # what earlier releases look for
    with db:  # a catalog made by another release: derived, so deleted and made again
        db.execute("UPDATE meta SET value = '1' WHERE key = 'schema_version'")
        db.execute("CREATE TABLE leftover (x)")
    db.close()
    with pytest.raises(BackendUnavailable, match="schema is not version"):
        Catalog.open(acct.store, heal=False)  # an audit reports it and leaves it
    with Catalog.open(acct.store) as again:
        assert again.status().schema_version == SCHEMA_VERSION and again.version() == 0
        assert again.catch_up(acct.store).rebuilt is False and again.status().rows == rows
    db = sqlite3.connect(path)
    assert db.execute("SELECT count(*) FROM sqlite_master WHERE name = 'leftover'").fetchone() == (0,)
    db.close()


def test_passes_answers_every_filter_as_the_catalog_does(acct: soulpass.Account, cat: Catalog) -> None:
    """Filters are checked in one module: its SQL and its check of a row out of the catalog agree."""
    build_history(acct, cat)
    rows = list(cat.rows())
    in_force = [r for r in rows if r.valid_to is None]
    times = sorted({r.event_time for r in rows if r.event_time is not None})
    tags = sorted({t for r in rows for t in r.tags})
    wanted = [Filters(kinds=(kind,)) for kind in sorted({r.kind for r in rows})]
    wanted += [Filters(agent=r.agent) for r in rows if r.agent] + [Filters(tags=(t,)) for t in tags]
    wanted += [Filters(session_id=r.session_id, kinds=(r.kind,)) for r in rows if r.session_id]
    wanted += [Filters(source="nowhere"), Filters(tags=(tags[0], "nothing"), agent="user")]
    wanted += [Filters(since=times[len(times) // 2]), Filters(until=times[len(times) // 2], kinds=("turn_user",))]
    assert len(tags) >= 2 and len(times) >= 4
    for filters in wanted:
        expected = sorted(r.id for r in in_force if passes(r, filters))
        assert cat.ids_matching(filters) == expected, filters


def test_new_catalog_reflects_version_zero(cat: Catalog) -> None:
    assert cat.version() == 0
    assert cat.fts_search("anything") == []
    assert cat.ids_matching() == []
    assert cat.status().rows == 0


# --- catch-up ------------------------------------------------------------------------------


def test_catch_up_after_each_archive_adds_exactly_the_new_rows(acct: soulpass.Account, cat: Catalog) -> None:
    before: list[CatalogRow] = []
    for n in range(3):
        sb = acct.create_sandbox(f"s{n}")
        sb.add_turn("user", f"message number {n} about kayaks")
        sb.add_turn("eva", f"reply number {n}")
        sb.update_state("ire", {"n": n})
        res = archive(sb)
        report = cat.catch_up(acct.store)
        assert (report.from_version, report.to_version, report.versions) == (res.version - 1, res.version, 1)
        after = snapshot(cat)
        new = keys(after) - keys(before)
        records = {rid for ids in res.plan.added.values() for rid in ids}
        documents = set(acct.log()[-1].to_json()["written"])
        assert new == {(rid, res.version) for rid in records | documents}
        assert report.rows_added == len(new)
        # Nothing old vanished; only the state document's previous copy was closed.
        old = {(r.id, r.version): r for r in before}
        for r in after:
            if (r.id, r.version) in old and old[r.id, r.version] != r:
                assert r.id in documents and r.replaced_at == res.version == r.valid_to
        before = after
    assert cat.catch_up(acct.store).versions == 0  # idempotent
    assert snapshot(cat) == before


def test_rows_carry_the_record_fields_and_file_hashes(acct: soulpass.Account, cat: Catalog) -> None:
    out = build_history(acct)
    cat.catch_up(acct.store)
    v1 = out["v1"].plan
    tu, tl = v1.added["turn_user"][0], v1.added["turn_llm"][0]
    ep = v1.added["episode"][0]
    rows = {r.id: r for r in cat.get([tu, tl, ep])}
    assert rows[tu].kind == "turn_user" and rows[tu].agent == "user" and rows[tu].tags == ("pets", "home")
    assert rows[tu].event_time == T0 and rows[tu].session_id == v1.sandbox_id
    assert rows[tu].text == "I adopted a grey cat named Pixel" and rows[tu].version == 1
    assert rows[tl].agent == "eva"
    assert (rows[ep].persona_id, rows[ep].event_id) == ("companion", "adoption")
    assert "talked about the new cat" in rows[ep].text
    for r in cat.rows():
        if r.replaced_at is None:
            data = (acct.store.path / r.path).read_bytes()
            assert r.content_hash == hashlib.sha256(data).hexdigest(), r.path
    profile = cat.get(["core/07_User_block/User_profile.json"])[0]
    assert profile.kind == "user_profile" and "city: Paris" in profile.text


def test_a_row_read_back_from_its_columns_is_the_row_itself() -> None:
    # from_sql passes the columns by position: each field here has a value no other field could
    # take, so a column read into the wrong field fails.
    when = datetime(1969, 7, 20, 20, 17, 40, 123456, tzinfo=UTC)  # before 1970 and to the microsecond
    row = CatalogRow(id="TU_1", kind="turn_user", version=3, valid_to=7, replaced_at=9, event_time=when,
                     agent="Ada", session_id="sb_1", persona_id="companion", event_id="launch",
                     tags=("pets", "home"), superseded_by="F_2", path="core/x/TU_1.json", text="I adopted a cat",
                     semantic_hash="s" * 64, content_hash="c" * 64)
    assert CatalogRow.from_sql(row.to_sql()) == row
    later = replace(row, event_time=datetime(2026, 11, 29, 8, 0, 0, 1, tzinfo=UTC), valid_to=None,
                    replaced_at=None, tags=())
    assert CatalogRow.from_sql(later.to_sql()) == later


def test_superseded_fact_rows_close_and_as_of_search_finds_the_old_fact(acct: soulpass.Account,
                                                                          cat: Catalog) -> None:
    v1, paris = fact(acct, "alice", "lives in", "Paris")
    v2, berlin = fact(acct, "alice", "lives in", "Berlin")
    cat.catch_up(acct.store)
    copies = [r for r in cat.rows() if r.id == paris]
    assert [(r.version, r.valid_to, r.replaced_at, r.superseded_by) for r in copies] == [
        (v1, v2, v2, None),  # the original copy, replaced by the supersession
        (v2, v2, None, berlin),  # the copy on disk now: superseded, never in force
    ]
    assert cat.get([paris])[0].valid_to == v2
    assert cat.get([paris], as_of_version=v1)[0].superseded_by is None
    facts = Filters(kinds=("fact",))
    assert [i for i, _ in cat.fts_search("where does alice live", filters=facts)] == [berlin]
    old = Filters(kinds=("fact",), as_of_version=v1)
    assert [i for i, _ in cat.fts_search("where does alice live", filters=old)] == [paris]
    assert [i for i, _ in cat.fts_search("Paris", filters=Filters(as_of_version=v2))] == []
    assert cat.ids_matching(facts) == [berlin]
    assert cat.ids_matching(old) == [paris]


def test_rollback_retires_rows(acct: soulpass.Account, cat: Catalog) -> None:
    v1, paris = fact(acct, "alice", "lives in", "Paris")
    v2, berlin = fact(acct, "alice", "lives in", "Berlin")
    cat.catch_up(acct.store)
    v3 = acct.rollback(v1)
    report = cat.catch_up(acct.store)
    assert report.to_version == v3 and report.rows_closed > 0
    (b,) = [r for r in cat.rows() if r.id == berlin]
    assert (b.version, b.valid_to, b.replaced_at) == (v2, v3, v3)
    assert cat.get([paris])[0].version == v3 and cat.get([paris])[0].valid_to is None
    facts = Filters(kinds=("fact",))
    assert cat.ids_matching(facts) == [paris]
    assert [i for i, _ in cat.fts_search("alice lives", filters=facts)] == [paris]
    assert [i for i, _ in cat.fts_search("berlin")] == []
    assert [i for i, _ in cat.fts_search("berlin", filters=Filters(as_of_version=v2))] == [berlin]
    assert cat.get([berlin], as_of_version=v3) == []  # not on disk at v3
    assert cat.get([berlin])[0].replaced_at == v3  # the latest copy says when it went


def test_bulk_versions_are_read_from_their_added_file(acct: soulpass.Account, cat: Catalog) -> None:
    records = [TurnUser(id=new_temp_id("turn_user"), text_excerpt=f"imported line {i} about llamas",
                        created_at=T0 + timedelta(minutes=i)) for i in range(30)]
    version = acct.bulk_append(records)
    assert "added_file" in acct.log()[-1].to_json()
    report = cat.catch_up(acct.store)
    assert report.to_version == version
    assert len(cat.ids_matching(Filters(kinds=("turn_user",)))) == 30
    assert len(cat.fts_search("llamas", k=50)) == 30


@pytest.mark.parametrize("every", [1, 3, 12], ids=["all-pass", "a-third", "a-twelfth"])
def test_a_kind_filter_gives_the_exact_top_k_however_few_matches_pass(acct: soulpass.Account, cat: Catalog,
                                                                        every: int) -> None:
    """Full text ranks the matches alone and filters the best few, widening while too few pass: the
    answer is the exact top k of the passing rows (ties by id) whether all, a third or a twelfth of
    the matches pass the filter."""
    records = [(TurnUser if i % every == 0 else TurnLLM)(
        id=new_temp_id("turn_user" if i % every == 0 else "turn_llm"),
        text_excerpt=" ".join(["llamas"] * (1 + i % 7) + ["graze"] * (i % 5) + [f"filler{i}"] * (i % 11)),
        created_at=T0 + timedelta(minutes=i)) for i in range(240)]
    acct.bulk_append(records)
    cat.catch_up(acct.store)
    users = Filters(kinds=("turn_user",))
    passing = cat.ids_matching(users)
    assert len(passing) == len(range(0, 240, every))
    for query, k in (("llamas graze", 10), ("llamas", 20), ("graze llamas", 5)):
        everything = cat.fts_search(query, k=240)
        expected = [i for i, _ in everything if i in passing][:k]
        got = cat.fts_search(query, k=k, filters=users)
        assert [i for i, _ in got] == expected, (query, k)
        assert [s for _, s in got] == [s for i, s in everything if i in set(expected)]


def test_passing_and_full_text_scores_are_kept_and_follow_changes(acct: soulpass.Account, cat: Catalog) -> None:
    """``passing`` and ``fts_scores`` read which rows of the given ids pass the filters once while the
    catalog is unchanged, and again when it changed (an edit supersedes a row, a forget retires one),
    by this handle or another connection."""
    sb = acct.create_sandbox("chat")
    temps = [sb.write_turn({"kind": "turn_user", "text_excerpt": f"llamas graze number {n}",
                            "created_at": (T0 + timedelta(minutes=n)).isoformat()}) for n in range(3)]
    empty = acct.store.head()
    plan = archive(sb).plan
    a, b, c = (plan.id_map[t] for t in temps)
    cat.catch_up(acct.store)
    turns = Filters(kinds=("turn_user",))
    assert cat.passing([a, b, c, "missing"], turns) == {a, b, c}
    assert cat.passing([a], Filters(kinds=("turn_llm",))) == set()  # another question, asked anew
    before = cat.fts_scores("llamas", [a, b, c], turns)
    assert set(before) == {a, b, c}
    acct.edit(a, text_excerpt="alpacas only", reason="no llamas now")
    with Catalog.open(acct.store) as other:  # another connection brings the catalog up to date
        other.catch_up(acct.store)
    assert cat.passing([a, b, c], turns) == {a, b, c}  # a's new copy passes
    assert set(cat.fts_scores("llamas", [a, b, c], turns)) == {b, c}  # its old row is not read
    assert set(cat.fts_scores("alpacas", [a, b, c], turns)) == {a}
    acct.forget([b])
    cat.catch_up(acct.store)
    assert cat.passing([a, b, c], turns) == {a, c}
    assert set(cat.fts_scores("llamas", [a, b, c], turns)) == {c}
    assert cat.passing([a, c], Filters(kinds=("turn_user",), as_of_version=empty)) == set()  # before they were
    assert cat.passing([a, c], Filters(kinds=("turn_user",), as_of_version=empty + 1)) == {a, c}


def test_sessions_and_neighbours_are_kept_while_the_catalog_is_unchanged_and_read_again_when_it_changes(
        acct: soulpass.Account, cat: Catalog) -> None:
    """``sessions`` and ``neighbours`` keep their answers (ranking reads them for every candidate) and
    read them again once the catalog changed, by this handle or by another connection;
    ``as_of_version`` reads the copy of then."""
    from soulpass.index.catalog.kept import Kept, last_row

    sb = acct.create_sandbox("chat")
    tu = sb.write_turn({"kind": "turn_user", "text_excerpt": "I moved to Paris.", "created_at": T0.isoformat()})
    rid = archive(sb).plan.id_map[tu]
    cat.catch_up(acct.store)
    first = cat.sessions([rid, "missing"])
    assert set(first) == {rid} and first[rid] == sb.id
    assert cat.sessions([rid]) == first  # kept: the same answer without reading it again
    acct.edit(rid, text_excerpt="Did I tell you I moved to Paris?", reason="a new copy")
    with Catalog.open(acct.store) as other:  # another connection brings the catalog up to date
        other.catch_up(acct.store)
    assert cat.sessions([rid]) == first  # the new copy's session (read again: the catalog changed)
    assert cat.sessions([rid], as_of_version=0) == {}  # no copy before the record was written
    cat.catch_up(acct.store)
    assert cat.sessions([rid]) == first

    # Neighbours are kept by the question (kinds, filters) and read again when the catalog changes.
    sb = acct.create_sandbox("later")
    temps = [sb.write_turn({"kind": "turn_user", "text_excerpt": f"turn {n}",
                            "created_at": (T0 + timedelta(days=1, minutes=n)).isoformat()}) for n in range(3)]
    plan = archive(sb).plan
    a, b, c = (plan.id_map[t] for t in temps)
    cat.catch_up(acct.store)
    turns = ("turn_user",)
    assert cat.neighbours([a, b, c, "missing"], turns) == {a: (None, b), b: (a, c), c: (b, None)}
    assert cat.neighbours([b], turns) == {b: (a, c)}
    assert cat.neighbours([b], turns, Filters(until=T0 + timedelta(days=1, minutes=1))) == {}  # b is past it
    assert cat.neighbours([a], ("turn_llm",)) == {}  # another question: asked, not taken from the other
    acct.forget([b])
    cat.catch_up(acct.store)
    assert cat.neighbours([a, c], turns) == {a: (None, c), c: (a, None)}

    fetched: list[list[str]] = []
    conn = sqlite3.connect(":memory:")
    conn.execute("CREATE TABLE t (x)")
    cache = Kept(most=3)

    def fetch(ids: Any) -> dict[str, str | None]:
        fetched.append(list(ids))
        return {i: None if len(i) < 3 else i for i in ids if i != "gone"}

    assert set(cache.get(conn, "t", ["a", "bb", "gone"], fetch)) == {"a", "bb"}
    assert set(cache.get(conn, "t", ["bb", "a", "gone"], fetch)) == {"a", "bb"}  # "gone" kept as unknown
    assert fetched == [["a", "bb", "gone"]]
    conn.execute("INSERT INTO t VALUES (1)")  # this connection changed something: read again
    cache.get(conn, "t", ["a"], fetch)
    cache.get(conn, "t", ["cc", "ddd", "a"], fetch)  # three kept: as many as it keeps
    assert fetched[1:] == [["a"], ["cc", "ddd"]]
    assert cache.get(conn, "t", ["ddd"], fetch) == {"ddd": "ddd"}
    assert len(fetched) == 3
    cache.get(conn, "other", ["eeee"], fetch)  # one more than it keeps: it starts again
    cache.get(conn, "t", ["a"], fetch)
    assert fetched[3:] == [["eeee"], ["a"]]
    # Starting again while some of those asked for were kept: all of them are answered.
    assert set(cache.get(conn, "t", ["a", "ff", "ggg"], fetch)) == {"a", "ff", "ggg"}
    assert fetched[5:] == [["a", "ff", "ggg"]]
    # A catalog larger than what is kept keeps nothing (its size read again when it changes).
    size = [10]
    large = Kept(most=3, rows=lambda _conn: size[0])
    fetched.clear()
    assert set(large.get(conn, "t", ["a"], fetch)) == set(large.get(conn, "t", ["a"], fetch)) == {"a"}
    assert fetched == [["a"], ["a"]]
    size[0] = 2
    conn.execute("DELETE FROM t")
    large.get(conn, "t", ["a"], fetch)
    large.get(conn, "t", ["a"], fetch)
    assert fetched == [["a"], ["a"], ["a"]]
    assert last_row(cat._conn) >= len(list(cat.rows())) > 0  # no count over every row, about as many
    conn.execute("CREATE TABLE catalog (row INTEGER PRIMARY KEY)")
    assert last_row(conn) == 0


def test_rebuild_gives_the_rows_of_incremental_catch_up(acct: soulpass.Account, tmp_path: Path) -> None:
    with Catalog(tmp_path / "incremental.sqlite") as inc:
        build_history(acct, inc)
        rows = snapshot(inc)
        with Catalog(tmp_path / "rebuilt.sqlite") as fresh:
            seen: list[tuple[int, int]] = []
            report = fresh.rebuild(acct.store, progress=lambda done, total: seen.append((done, total)))
            assert report.rebuilt and report.to_version == acct.head() == fresh.version() and not report.skipped
            assert snapshot(fresh) == rows
            assert seen and seen[-1][0] == seen[-1][1] > 0
            for q in ("cat Pixel", "Berlin", "sourdough", "gardening tomatoes", "name", "cheerful excited"):
                for f in (Filters(), Filters(as_of_version=2), Filters(as_of_version=3)):
                    assert fresh.fts_search(q, filters=f) == inc.fts_search(q, filters=f), (q, f)
        # A catalog that lags several versions catches up to the same rows too.
        with Catalog(tmp_path / "late.sqlite") as late:
            assert late.catch_up(acct.store).versions == acct.head()
            assert snapshot(late) == rows
        inc.rebuild(acct.store)  # in place, over existing rows
        assert snapshot(inc) == rows
        assert inc.status().generation == 1


def test_rebuild_skips_a_copy_it_cannot_read_and_catalogues_the_rest(acct: soulpass.Account,
                                                                     tmp_path: Path) -> None:
    with Catalog(tmp_path / "incremental.sqlite") as inc:
        build_history(acct, inc)
        rows = snapshot(inc)
    walk = acct.store.copies(is_catalogued)
    found = list(walk)
    assert len(walk) == len(found) and all(is_catalogued(c.copy.key) for c in found)
    assert [c.replaced_at is None for c in found] == sorted((c.replaced_at is None for c in found), reverse=True)
    old = next(c for c in found if c.replaced_at is not None and c.copy.key.endswith(".json"))
    assert isinstance(old.copy, StoredCopy)
    (acct.store.path / history_path(old.copy.key, old.replaced_at)).write_bytes(b"{not json")
    with Catalog(tmp_path / "rebuilt.sqlite") as fresh:
        seen: list[tuple[int, int]] = []
        report = fresh.rebuild(acct.store, progress=lambda done, total: seen.append((done, total)))
        assert seen[-1] == (len(found), len(found))
        (skipped,) = report.skipped  # named by its key, and the why names the file
        assert skipped.startswith(f"{old.copy.key} (replaced by version {old.replaced_at}): ")
        assert f"{history_path(old.copy.key, old.replaced_at)} is not valid JSON" in skipped
        lost = (row_id(old.copy.key), int(old.copy.body["version"]))
        assert keys(snapshot(fresh)) == keys(rows) - {lost} and lost in keys(rows)


def test_rebuild_is_a_snapshot_of_the_head_it_started_from(acct: soulpass.Account, tmp_path: Path) -> None:
    build_history(acct)
    with Catalog(tmp_path / "ref.sqlite") as ref:
        ref.catch_up(acct.store)
        # The walk meets copies a later commit left (history of v7, new files of v7): it must
        # ignore them as if it had run before v7.
        head = acct.head()
        sb = acct.create_sandbox("after")
        sb.add_fact("alice", "lives in", "Rome", confidence=0.9)
        sb.update_state("ire", {"mood": "calm"})
        archive(sb)
        real_head = acct.store.head
        acct.store.head = lambda: head  # type: ignore[method-assign]
        with Catalog(tmp_path / "snap.sqlite") as snap:
            snap.rebuild(acct.store)
            assert snap.version() == head
            assert snapshot(snap) == snapshot(ref)
            acct.store.head = real_head  # type: ignore[method-assign]
            ref.catch_up(acct.store)
            snap.catch_up(acct.store)
            assert snapshot(snap) == snapshot(ref)


def test_crash_inside_a_catch_up_leaves_the_previous_version(acct: soulpass.Account, tmp_path: Path,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    build_history(acct)
    with Catalog(tmp_path / "ref.sqlite") as ref:
        ref.catch_up(acct.store)
        expected = snapshot(ref)
    real = apply_changes
    calls = 0

    def dying(*args: Any) -> None:
        nonlocal calls
        calls += 1
        real(*args)  # rows written inside the transaction...
        if calls == 3:
            raise KeyboardInterrupt  # ...then the process "dies" before the commit

    monkeypatch.setattr("soulpass.index.catalog.sync.apply_changes", dying)
    path = tmp_path / "crash.sqlite"
    with Catalog(path) as c, pytest.raises(KeyboardInterrupt):
        c.catch_up(acct.store)
    monkeypatch.setattr("soulpass.index.catalog.sync.apply_changes", real)
    with Catalog(path) as c:
        assert c.version() == 2  # versions 1 and 2 committed, 3 rolled back
        assert c.catch_up(acct.store).from_version == 2
        assert snapshot(c) == expected


def test_commit_without_catch_up_then_reopen(tmp_path: Path) -> None:
    """A commit stopped after VERSION.json, before its log line; the catalog must stop at the
    last logged version, then catch up once reopening the account finishes the commit."""
    home = tmp_path / "home"
    acct = soulpass.open(home).account("alice", create=True)
    build_history(acct)
    follow = Catalog(tmp_path / "follow.sqlite")
    follow.catch_up(acct.store)
    head = acct.head()

    class Crash(Exception):
        pass

    def crash(step: str) -> None:
        if step == "version_written":
            raise Crash

    sb = acct.create_sandbox("interrupted")
    sb.add_turn("user", "this message was committed by a process that died")
    sb.add_fact("alice", "lives in", "Lisbon", confidence=0.9)
    with pytest.raises(Crash):
        sb.archive(hook=crash)
    assert acct.store.head() == head + 1 and acct.store.log()[-1].version == head  # half-applied
    assert follow.catch_up(acct.store).to_version == head  # nothing half-read
    follow.close()

    reopened = soulpass.open(home).account("alice")  # recovery finishes the commit
    assert reopened.store.log()[-1].version == head + 1
    with Catalog(tmp_path / "follow.sqlite") as again:
        assert again.catch_up(reopened.store).to_version == head + 1
        with Catalog(tmp_path / "fresh.sqlite") as fresh:
            fresh.catch_up(reopened.store)
            assert snapshot(again) == snapshot(fresh)
        assert [i for i, _ in again.fts_search("Lisbon")]


@pytest.mark.slow
def test_sigkilled_catch_up_process(acct: soulpass.Account, tmp_path: Path, engine: str) -> None:
    if engine != "fts5":
        pytest.skip("the child process picks its engine itself; once is enough")
    acct.bulk_append([TurnUser(id=new_temp_id("turn_user"), text_excerpt=f"line {i} of a long import",
                               created_at=T0 + timedelta(seconds=i)) for i in range(3000)])
    build_history(acct)
    with Catalog(tmp_path / "ref.sqlite") as ref:
        ref.catch_up(acct.store)
        expected = snapshot(ref)
    path = tmp_path / "killed.sqlite"
    code = ("import sys; from pathlib import Path; import soulpass; from soulpass.index.catalog import Catalog;"
            "a = soulpass.open(Path(sys.argv[1])).account('alice'); c = Catalog(Path(sys.argv[2]));"
            "print('go', flush=True); c.catch_up(a.store)")
    for delay in (0.05, 0.2, 0.5):
        with subprocess.Popen([sys.executable, "-c", code, str(acct.sp.home), str(path)],
                              stdout=subprocess.PIPE) as proc:
            assert proc.stdout is not None and proc.stdout.readline() == b"go\n"
            time.sleep(delay)
            proc.send_signal(signal.SIGKILL)
        with Catalog(path) as c:
            assert c.version() in range(acct.head() + 1)
    with Catalog(path) as c:
        c.catch_up(acct.store)
        assert snapshot(c) == expected


def test_catalog_ahead_of_its_store_is_rebuilt(tmp_path: Path) -> None:
    home = tmp_path / "home"
    acct = soulpass.open(home).account("alice", create=True)
    build_history(acct)
    catch_up(acct.store)
    # The account is deleted and made again with fewer versions; the old catalog file remains.
    import shutil

    index = acct.store.path / "index"
    shutil.move(index, tmp_path / "index")
    shutil.rmtree(acct.store.path)
    acct = soulpass.open(home).account("alice", create=True)
    shutil.move(tmp_path / "index", index)
    sb = acct.create_sandbox("new life")
    sb.add_turn("user", "a fresh start")
    archive(sb)
    with Catalog.open(acct.store) as c:
        report = c.catch_up(acct.store)
        assert report.rebuilt and c.version() == 1
        assert [r.text for r in c.get(c.ids_matching())] == ["a fresh start"]


def test_same_version_count_but_another_history_is_rebuilt(tmp_path: Path) -> None:
    home = tmp_path / "home"
    acct = soulpass.open(home).account("alice", create=True)
    sb = acct.create_sandbox("one")
    sb.add_turn("user", "first life")
    archive(sb)
    catch_up(acct.store)
    import shutil

    shutil.move(acct.store.path / "index", tmp_path / "index")
    shutil.rmtree(acct.store.path)
    acct = soulpass.open(home).account("alice", create=True)
    shutil.move(tmp_path / "index", acct.store.path / "index")
    sb = acct.create_sandbox("two")
    sb.add_turn("user", "second life")
    archive(sb)
    assert catch_up(acct.store).rebuilt
    with Catalog.open(acct.store) as c:
        assert [r.text for r in c.get(c.ids_matching())] == ["second life"]


def test_two_catalog_handles_on_one_file(acct: soulpass.Account, tmp_path: Path) -> None:
    build_history(acct)
    a, b = Catalog(tmp_path / "c.sqlite"), Catalog(tmp_path / "c.sqlite")
    ra, rb = a.catch_up(acct.store), b.catch_up(acct.store)
    assert ra.versions == acct.head() and rb.versions == 0
    assert snapshot(a) == snapshot(b)
    a.close()
    b.close()


# --- queries -----------------------------------------------------------------------------


@pytest.fixture
def searchable(acct: soulpass.Account, cat: Catalog) -> dict[str, Any]:
    out = build_history(acct)
    cat.catch_up(acct.store)
    return out


def ids(hits: list[tuple[str, float]]) -> list[str]:
    return [i for i, _ in hits]


def test_search_ranks_and_scores(searchable: dict[str, Any], cat: Catalog) -> None:
    hits = cat.fts_search("Pixel the cat")
    assert hits and all(isinstance(s, float) for _, s in hits)
    assert [s for _, s in hits] == sorted((s for _, s in hits), reverse=True)
    top = cat.get([hits[0][0]])[0]
    assert "Pixel" in top.text or "cat" in top.text
    assert len(cat.fts_search("Pixel the cat", k=1)) == 1
    assert cat.fts_search("Pixel", k=0) == []
    with pytest.raises(InvalidInput):
        cat.fts_search("Pixel", k=-1)


def test_filters(searchable: dict[str, Any], cat: Catalog) -> None:
    v1 = searchable["v1"].plan
    turns = Filters(kinds=("turn_user", "turn_llm"))
    assert {cat.get([i])[0].kind for i in ids(cat.fts_search("cat Pixel", k=20, filters=turns))} <= set(turns.kinds)
    one_kind = Filters(kinds="turn_llm")  # type: ignore[arg-type]  # a lone string is one kind
    assert ids(cat.fts_search("Pixel", filters=one_kind)) == v1.added["turn_llm"]
    assert ids(cat.fts_search("Pixel", filters=Filters(agent="eva"))) == v1.added["turn_llm"]
    assert ids(cat.fts_search("Pixel cat", filters=Filters(tags=("pets", "nothing")))) == v1.added["turn_user"]
    assert cat.fts_search("Pixel", filters=Filters(tags=("nothing",))) == []
    assert ids(cat.fts_search("cat", filters=Filters(persona_id="companion"))) == v1.added["episode"]
    assert ids(cat.fts_search("cat", filters=Filters(event_id="adoption"))) == v1.added["episode"]
    in_session = ids(cat.fts_search("cat Pixel", k=20, filters=Filters(session_id=v1.sandbox_id)))
    assert set(in_session) == {*v1.added["turn_user"], *v1.added["turn_llm"], *v1.added["episode"]}
    # Event-time range: since inclusive, until exclusive; naive datetimes are UTC.
    march = Filters(since=T0, until=T0 + timedelta(days=1))
    assert set(cat.ids_matching(Filters(kinds=("turn_user", "turn_llm", "episode"), since=T0,
                                        until=T0 + timedelta(minutes=1)))) == {
        *v1.added["turn_user"], *v1.added["episode"]}
    assert ids(cat.fts_search("Pixel sourdough", k=20, filters=Filters(since=T0 + timedelta(days=61),
                                                                   until=T0 + timedelta(days=62)))) == \
        searchable["v6"].plan.added["turn_user"]
    assert set(ids(cat.fts_search("Pixel", k=20, filters=march))) <= set(cat.ids_matching(march))
    naive = Filters(since=T0.replace(tzinfo=None), until=(T0 + timedelta(days=1)).replace(tzinfo=None))
    assert cat.ids_matching(naive) == cat.ids_matching(march)
    # ids_matching is the pre-filter for vector search: same rows as search would consider.
    assert cat.ids_matching(Filters(kinds=("turn_llm",), agent="eva")) == v1.added["turn_llm"]
    assert len(cat.ids_matching(Filters(kinds=("turn_user",)))) == 1 + 1 + 5 + 1
    with pytest.raises(InvalidInput):
        Filters(as_of_version=-1)
    with pytest.raises(InvalidInput):
        Filters(since="yesterday")  # type: ignore[arg-type]


def test_narrow_filters_still_find_low_ranked_rows(acct: soulpass.Account, cat: Catalog) -> None:
    # 300 rows rank above the one row that passes the filter: the over-fetch cannot hold it.
    acct.bulk_append([TurnUser(id=new_temp_id("turn_user"), text_excerpt="lighthouse lighthouse lighthouse",
                               created_at=T0 + timedelta(seconds=i)) for i in range(300)])
    sb = acct.create_sandbox("rare")
    sb.add_turn("user", "a long sentence that mentions the lighthouse only once among many other words")
    res = archive(sb)
    cat.catch_up(acct.store)
    hits = cat.fts_search("lighthouse", k=3, filters=Filters(session_id=res.plan.sandbox_id))
    assert ids(hits) == res.plan.added["turn_user"]


def test_rare_kind_among_many_better_hits(acct: soulpass.Account, cat: Catalog,
                                         monkeypatch: pytest.MonkeyPatch) -> None:
    acct.bulk_append([TurnUser(id=new_temp_id("turn_user"), text_excerpt="lighthouse lighthouse lighthouse",
                               created_at=T0 + timedelta(seconds=i)) for i in range(300)])
    v, fid = fact(acct, "the old lighthouse keeper", "likes", "long walks along the windy cliffs at dusk")
    cat.catch_up(acct.store)
    facts = Filters(kinds=("fact",))
    assert ids(cat.fts_search("lighthouse", k=3, filters=facts)) == [fid]
    assert ids(cat.fts_search("lighthouse", k=3, filters=Filters(kinds=("fact",), as_of_version=v - 1))) == []
    # More passing rows than a restricted sidecar search takes: FTS5 ranks them, same answer.
    monkeypatch.setattr("soulpass.index.catalog.fulltext._NARROW", 0)
    assert ids(cat.fts_search("lighthouse", k=3, filters=facts)) == [fid]


def test_ties_are_broken_by_id(acct: soulpass.Account, cat: Catalog) -> None:
    acct.bulk_append([TurnUser(id=new_temp_id("turn_user"), text_excerpt="same words here",
                               created_at=T0 + timedelta(seconds=i)) for i in range(200)])
    cat.catch_up(acct.store)
    hits = cat.fts_search("same words", k=10)
    assert ids(hits) == sorted(cat.ids_matching())[:10]
    assert len({s for _, s in hits}) == 1


HOSTILE = [
    "", " ", '"', '""', "'", "NEAR", "NEAR(a b)", "a NEAR b", "*", "a*", "*a", "-", "-a", "a -b", "(", ")", "((a)",
    "a AND", "OR", "NOT a", "AND OR NOT", "a:b", "text:cat", "^cat", "{text agent}: cat", '"unterminated',
    "cat\" OR \"dog", "a\x00b", "\u0301", "😀", "....", "__", "a_b", "NEAR/2", "c++", "@#$%^&*()", "e\u0301té",
    "x" * 10_000, " ".join(["cat"] * 1000), " ".join(f"w{i}" for i in range(500)), "\ud800",
]


@pytest.mark.parametrize("text", HOSTILE, ids=range(len(HOSTILE)))
def test_hostile_queries_never_raise(searchable: dict[str, Any], cat: Catalog, text: str) -> None:
    hits = cat.fts_search(text)
    assert isinstance(hits, list)
    q = fts_query(text)
    assert q is None or all(part.startswith('"') and part.endswith('"') for part in q.split(" OR "))


def test_query_terms_drop_stop_words_unless_nothing_is_left() -> None:
    assert query_terms("When did Caroline go to the LGBTQ support group?") == [
        "caroline", "go", "lgbtq", "support", "group"]
    assert query_terms("What is it?") == ["what", "is", "it"]
    assert query_terms("Café CAFÉ café") == ["café"]
    assert fts_query("") is None and fts_query("?!") is None
    assert len(query_terms(" ".join(f"w{i}" for i in range(100)))) == 32


def test_diacritics_and_stems_match(acct: soulpass.Account, cat: Catalog) -> None:
    sb = acct.create_sandbox("s")
    sb.add_turn("user", "We painted the café walls")
    archive(sb)
    cat.catch_up(acct.store)
    assert cat.fts_search("cafe")
    assert cat.fts_search("painting")


def test_get_keeps_order_and_skips_unknown(searchable: dict[str, Any], cat: Catalog) -> None:
    v1 = searchable["v1"].plan
    tu, tl = v1.added["turn_user"][0], v1.added["turn_llm"][0]
    assert [r.id for r in cat.get([tl, "TU_19990101_001", tu, tl])] == [tl, tu]
    assert cat.get([]) == []
    assert cat.get([tu], as_of_version=0) == []
    row = cat.get([tu])[0]
    assert row.in_force_at(1) and not row.in_force_at(0) and row.valid_from == 1
    assert row.path == record_path(tu)


def test_status(searchable: dict[str, Any], cat: Catalog, acct: soulpass.Account) -> None:
    st = cat.status()
    assert st.store_version == acct.head() and st.schema_version == SCHEMA_VERSION
    assert st.in_force["turn_user"] == len(cat.ids_matching(Filters(kinds=("turn_user",))))
    assert st.rows >= sum(st.in_force.values())


# --- the tantivy sidecar -------------------------------------------------------------------


def test_sidecar_follows_rows_added_by_another_handle(acct: soulpass.Account, tmp_path: Path, engine: str) -> None:
    path = tmp_path / "c.sqlite"
    reader, writer = Catalog(path), Catalog(path)
    build_history(acct)
    writer.catch_up(acct.store)
    assert ids(reader.fts_search("sourdough"))
    sb = acct.create_sandbox("more")
    sb.add_turn("user", "the zeppelin flew over the harbour")
    res = archive(sb)
    writer.catch_up(acct.store)
    assert ids(reader.fts_search("zeppelin")) == res.plan.added["turn_user"]
    reader.close()
    writer.close()
    if engine == "tantivy":
        assert [p.name for p in tmp_path.glob("c.fulltext-*")] == ["c.fulltext-0"]


def _caught_up_sidecar(acct: soulpass.Account, tmp_path: Path, engine: str) -> Path:
    """A catalog of ``build_history`` with its tantivy sidecar, caught up (skips the FTS5 run)."""
    if engine != "tantivy":
        pytest.skip("sidecar only")
    path = tmp_path / "c.sqlite"
    build_history(acct)
    with Catalog(path, fulltext="tantivy") as c:
        c.catch_up(acct.store)
    return path


def test_sidecar_is_replaced_on_rebuild_and_when_damaged(acct: soulpass.Account, tmp_path: Path,
                                                         engine: str) -> None:
    path = _caught_up_sidecar(acct, tmp_path, engine)
    with Catalog(path, fulltext="tantivy") as c:
        before = c.fts_search("Pixel cat sourdough", k=20)
        c.rebuild(acct.store)
        assert [p.name for p in tmp_path.glob("c.fulltext-*")] == ["c.fulltext-1"]
        assert c.fts_search("Pixel cat sourdough", k=20) == before
    for f in (tmp_path / "c.fulltext-1").iterdir():
        if f.is_file():
            f.write_bytes(b"garbage")
    with Catalog(path, fulltext="tantivy") as c:
        assert c.fts_search("Pixel cat sourdough", k=20) == before
    with Catalog(path, fulltext="fts5") as c:
        assert ids(c.fts_search("Pixel cat sourdough", k=20)) and not (tmp_path / "c.fulltext-2").exists()


def test_sidecar_knows_how_far_it_is_by_one_lookup(acct: soulpass.Account, tmp_path: Path, engine: str) -> None:
    """How far the sidecar is: the catalog's newest row when the index holds it (one term lookup),
    else the highest row it holds (every row read): never further than it is, so a sync after a
    partial one adds exactly what is missing."""
    path = _caught_up_sidecar(acct, tmp_path, engine)
    import tantivy

    from soulpass.index.catalog.sidecar import TantivySidecar

    rows = [r for (r,) in sqlite3.connect(path).execute("SELECT row FROM catalog WHERE text != '' ORDER BY row")]

    sidecar = TantivySidecar(tantivy, path, 0)
    newest = rows[-1]
    assert sidecar.indexed_upto(newest) == newest == sidecar.indexed_upto()
    assert sidecar.indexed_upto(newest + 5) == newest  # not there: read from the rows themselves
    writer = sidecar.index.writer(heap_size=15_000_000, num_threads=1)
    writer.delete_documents_by_term("row", newest)  # as if the last commit had not happened
    writer.commit()
    writer.wait_merging_threads()
    assert sidecar.indexed_upto(newest) == rows[-2]
    with sqlite3.connect(path) as conn:
        assert sidecar.sync(conn)
    assert sidecar.indexed_upto(newest) == newest
    assert len(sidecar.index.searcher().search(tantivy.Query.all_query(), 10_000).hits) == len(rows)


def test_tantivy_required_but_missing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("soulpass.index.catalog.catalog.tantivy_module", lambda: None)
    with pytest.raises(BackendUnavailable, match="tantivy"):
        Catalog(tmp_path / "c.sqlite", fulltext="tantivy")


def test_fulltext_engine_is_configured_and_recorded(tmp_path: Path, engine: str,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """Chosen by configuration, recorded in the index, never switched by what is importable."""
    monkeypatch.setattr("soulpass.index.catalog.catalog.DEFAULT_FULLTEXT", "fts5")  # the shipped default
    if engine == "tantivy":  # installed, yet a catalog nobody configured still ranks with FTS5
        plain = soulpass.open(tmp_path / "plain", embedder="none").account("a", create=True)
        plain.search("anything")
        assert plain.index().catalog.fulltext == "fts5"
        assert plain.index().catalog.status().fulltext == "fts5 (default)"
        assert not list((tmp_path / "plain").rglob("*.fulltext-*"))
        plain.close()
        return
    pytest.importorskip("tantivy")
    home = tmp_path / "home"
    acct = soulpass.open(home, embedder="none", fulltext="tantivy").account("a", create=True)
    build_history(acct)
    assert list(acct.search("sourdough")) and acct.index().catalog.fulltext == "tantivy"
    acct.close()
    later = soulpass.open(home, embedder="none").account("a")  # no choice of its own: the recorded one
    assert later.index().catalog.fulltext == "tantivy" and later.index().catalog.status().fulltext == "tantivy"
    later.close()
    switched = soulpass.open(home, embedder="none", fulltext="fts5").account("a")
    assert switched.index().catalog.fulltext == "fts5"
    switched.close()
    with Catalog.open(switched.store) as c:
        assert c.recorded_fulltext() == "fts5"
    with pytest.raises(InvalidInput, match="fulltext"):
        Catalog(tmp_path / "c.sqlite", fulltext="lucene")  # type: ignore[arg-type]


def test_a_recorded_engine_that_is_missing_says_so(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with Catalog(tmp_path / "c.sqlite") as c:
        c.record_fulltext("tantivy")
    monkeypatch.setattr("soulpass.index.catalog.catalog.tantivy_module", lambda: None)
    with pytest.raises(BackendUnavailable, match="'search' extra"):
        Catalog(tmp_path / "c.sqlite")
    with Catalog(tmp_path / "c.sqlite", fulltext="fts5") as c:  # an explicit choice still opens it
        assert c.fulltext == "fts5" and c.recorded_fulltext() == "tantivy"
