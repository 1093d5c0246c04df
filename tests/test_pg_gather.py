"""A search's candidates fetched from PostgreSQL in one statement (``soulpass.index.pg.gather``)
are the candidates the steps fetch one question at a time: the same ids, full-text scores,
cosines, sessions and neighbours, and so the same hits, under every filter (those it answers and
those it hands to the steps), for turns with passages and without, and where the walk's first rows
hold too few records."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

import soulpass
from postgres_helpers import schema_url
from soulpass.index import dense as dense_module
from soulpass.index.catalog import Filters
from soulpass.index.gather import Gathered, Stepwise
from soulpass.index.pg.gather import PgGather
from soulpass.index.recipe import TURN_KINDS
from test_catalog import T0
from test_postgres_index import CountingEmbedder, vector_server  # noqa: F401  (a fixture)

psycopg = pytest.importorskip("psycopg", reason="the 'postgres' extra (psycopg) is not installed")

QUERIES = ["garden3 river2 word9", "river4 about note", "word17 garden1 long story", "nothing matches zzz"]
FILTERS = [
    Filters(kinds=TURN_KINDS),
    Filters(kinds=("turn_user",)),
    Filters(agent="eva", kinds=TURN_KINDS),
    Filters(tags=("pets",), kinds=TURN_KINDS),
    Filters(tags=("pets",), kinds=("turn_user", "fact")),  # a rare tag, neighbours of one turn kind
    Filters(since=T0 + timedelta(minutes=20), kinds=TURN_KINDS),
    Filters(kinds=("fact",)),  # no turn kinds: no neighbours
    Filters(session_id="s2", kinds=TURN_KINDS),  # not broad: the steps answer
    Filters(as_of_version=1, kinds=TURN_KINDS),  # neither
]


@pytest.fixture
def vurl(vector_server: str, tmp_path: Path) -> Iterator[str]:  # noqa: F811
    yield from schema_url(vector_server, tmp_path)


@pytest.fixture
def index(vurl: str) -> Iterator[Any]:
    """Two sessions of turns by two speakers, some tagged, a few long enough to have passages."""
    emb = CountingEmbedder()
    acct = soulpass.open(vurl, embedder=emb).account("alice", create=True)
    for name, turns in (("s1", range(0, 40)), ("s2", range(40, 70))):
        sb = acct.create_sandbox(name)
        for n in turns:
            long = " ".join(f"story part{j} garden{j % 7} river{j % 5}." for j in range(260)) if n % 13 == 0 else ""
            second = f"It rained on river{n % 4} that day." if n % 2 else ""  # two sentences: passages
            sb.write_turn({"kind": "turn_user" if n % 2 else "turn_llm", "agent": "eva" if n % 3 == 0 else "bob",
                           "tags": ["pets"] if n % 10 == 0 or n == 45 else [],  # 45: a user's, between two
                           "text_excerpt": f"note {n} about garden{n % 7} and river{n % 5} with word{n}. {second}"
                                           f"{long}",
                           "created_at": T0 + timedelta(minutes=n)})
        sb.archive()
    index = acct.index()
    index.search("warm up the weights", 5)
    yield index
    acct.close()


def _given(vector: Any) -> Any:
    """What ``Gather.around`` waits on for a query vector already made."""
    return lambda: vector


def _same(a: Gathered, b: Gathered) -> None:
    assert set(a.ids) == set(b.ids)
    assert a.sessions == b.sessions
    assert a.links == b.links
    assert a.fts.keys() == b.fts.keys()
    assert [a.fts[i] for i in sorted(a.fts)] == pytest.approx([b.fts[i] for i in sorted(a.fts)], rel=1e-9)
    assert a.dense.keys() == b.dense.keys()
    assert [a.dense[i] for i in sorted(a.dense)] == pytest.approx([b.dense[i] for i in sorted(a.dense)], rel=1e-9)


def test_one_statement_gathers_what_the_steps_gather(index: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    gather = index._search._gather
    assert isinstance(gather, PgGather)
    steps = gather.steps
    assert isinstance(steps, Stepwise)
    reference = Stepwise(steps.catalog, steps.dense)  # the steps on their own
    handed: list[Filters] = []  # what the one statement handed to the steps
    monkeypatch.setattr(steps, "around_hits", lambda *a, f=steps.around_hits: handed.append(a[4]) or f(*a))
    outright: list[Filters] = []  # what a rare tag had scored outright
    monkeypatch.setattr(gather, "_outright", lambda *a, f=gather._outright: ((found := f(*a)) is not None
                        and outright.append(a[3])) or found)
    passages = index.vectors.passages_total()
    assert passages > 0  # records whose passages are vectors of their own
    emb = CountingEmbedder()
    compared = linked = 0
    for query in QUERIES:
        vector = emb.embed_batch([query])[0]
        for filters in FILTERS:
            turn_kinds = [k for k in TURN_KINDS if k in filters.kinds]
            for depth in (5, 50):
                one = gather.around(query, _given(vector), depth, filters, turn_kinds)
                _same(one, reference.around(query, _given(vector), depth, filters, turn_kinds))
                added = [n for pair in one.links.values() for n in pair if n and n not in one.ids]
                _same(gather.scores(query, vector, added, filters), steps.scores(query, vector, added, filters))
                compared += bool(one.ids)
                linked += bool(added)
            # Full text only (no query vector): nothing to walk, the steps' answer.
            _same(gather.around(query, lambda: None, 10, filters, turn_kinds),
                  reference.around(query, lambda: None, 10, filters, turn_kinds))
    assert compared >= 40 and linked >= 10
    # A rare tag with a query vector: every passing row scored in the one statement, at each depth.
    assert outright == [f for _ in QUERIES for f in FILTERS if f.tags for _ in (5, 50)]
    broad = [f for f in FILTERS if dense_module.broad(f)]
    # Without a vector, and under a version or a session, the steps answer; so do they where the
    # walk's rows held too few records (depth 5: ten rows, some of them passages). Most of the rest
    # was one statement.
    steps_only = len(QUERIES) * (len(FILTERS) + 2 * (len(FILTERS) - len(broad)))
    assert steps_only <= len(handed) <= steps_only + len(QUERIES) * len(broad)


def test_the_hits_are_the_same_and_too_few_records_in_the_walk_go_to_the_steps(
        index: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    search = index._search
    gather = search._gather

    def hits(filters: Filters) -> list[tuple[str, float]]:
        return [(h.id, h.score) for h in search.search("garden3 river2 long story", 20, filters)]

    for filters in FILTERS:
        one = hits(filters)
        search._gather = gather.steps
        stepwise = hits(filters)
        search._gather = gather
        assert [i for i, _ in one] == [i for i, _ in stepwise], filters
        assert [s for _, s in one] == pytest.approx([s for _, s in stepwise], rel=1e-9)
    # One row per record walked: the long turns' passages fill it, and the steps walk again.
    monkeypatch.setattr("soulpass.index.pg.gather.WALK_ROWS", 1)
    monkeypatch.setattr(dense_module, "WALK_ROWS", 1)
    asked: list[int] = []
    steps_around = gather.steps.around_hits
    monkeypatch.setattr(gather.steps, "around_hits", lambda *a: asked.append(1) or steps_around(*a))
    wide = Filters(kinds=TURN_KINDS)
    one = [h.id for h in search.search("long story part3 garden3", 50, wide)]
    search._gather = gather.steps
    assert one == [h.id for h in search.search("long story part3 garden3", 50, wide)]
    assert asked  # the walk's rows held too few records at least once


def test_more_tagged_rows_than_are_scored_outright_are_walked_to(index: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """A tag on few rows: each scored, the best ``depth`` by each score kept; on none: nothing; on
    more than ``SCORED_OUTRIGHT``: the walk's statement, with the same candidates as the steps'."""
    gather = index._search._gather
    emb = CountingEmbedder()
    tagged = Filters(tags=("pets",), kinds=TURN_KINDS)
    nobody = Filters(tags=("nobody-has-this",), kinds=TURN_KINDS)
    assert len(index.catalog.ids_matching(tagged)) == 8
    for query in QUERIES:
        given = _given(emb.embed_batch([query])[0])
        every = gather._outright(query, given, 50, tagged, TURN_KINDS)
        assert every is not None and len(every.ids) == 8  # each has a vector
        best = [*sorted(every.fts, key=lambda i: (-every.fts[i], i))[:3],
                *sorted(every.dense, key=lambda i: (-every.dense[i], i))[:3]]
        assert gather._outright(query, given, 3, tagged, TURN_KINDS).ids == list(dict.fromkeys(best))
        assert gather._outright(query, given, 50, nobody, TURN_KINDS).ids == []
        # Neighbours of one turn kind among rows of both: the other kind's rows are passed over.
        one_kind = gather._outright(query, given, 50, tagged, ["turn_user"])
        assert one_kind is not None and one_kind.links
        _same(one_kind, Stepwise(gather.steps.catalog, gather.steps.dense).around(query, given, 50, tagged,
                                                                                  ["turn_user"]))
        monkeypatch.setattr("soulpass.index.pg.gather.SCORED_OUTRIGHT", 6)
        assert gather._outright(query, given, 50, tagged, TURN_KINDS) is None
        _same(gather.around(query, given, 50, tagged, TURN_KINDS),
              Stepwise(gather.steps.catalog, gather.steps.dense).around(query, given, 50, tagged, TURN_KINDS))
        monkeypatch.undo()


def test_searches_on_many_threads_at_once_find_what_one_thread_finds(index: Any) -> None:
    """Each search holds a pooled connection for its walk while its full-text search runs on a side
    thread with another: more searches at once than the pool has connections for two each still
    answer, each as it does alone."""
    from concurrent.futures import ThreadPoolExecutor

    from soulpass.store.postgres.connections import POOL_SIZE

    search = index._search
    jobs = [(query, filters) for query in QUERIES for filters in FILTERS] * 3

    def ranked(job: tuple[str, Filters]) -> list[str]:
        return [h.id for h in search.search(job[0], 20, job[1])]

    alone = [ranked(job) for job in jobs]
    with ThreadPoolExecutor(POOL_SIZE + 6) as pool:
        assert list(pool.map(ranked, jobs)) == alone
