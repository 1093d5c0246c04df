"""Filtered search through the catalog's filter columns and the vector rows' mask (issue 19).

A broad filter (a speaker, a time range) is answered by numpy masks instead of SQLite lookups
(``catalog/columns.py``, ``index/filtered.py``) and, among many passing rows, by the rows' sign
bits (``vectors/signs.py``). Every answer is checked here against SQLite's own answer."""

from __future__ import annotations

import hashlib
import importlib.util
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest

import soulpass
from soulpass.ids import new_temp_id
from soulpass.index import passages
from soulpass.index.account import AccountIndex
from soulpass.index.catalog import Catalog, Filters, remove_catalog
from soulpass.index.catalog.columns import CatalogColumns
from soulpass.index.dense import LocalDense
from soulpass.index.filtered import MaskedDense
from soulpass.index.recipe import SEARCHABLE_KINDS
from soulpass.records import TurnLLM, TurnUser
from soulpass.vectors import ExactIndex, HnswIndex
from soulpass.vectors.signs import SignBits, hamming, nearest
from test_vector_index import clustered

HAS_USEARCH = importlib.util.find_spec("usearch") is not None
SPEAKERS = ("ann", "bob", "cyd", "dee", "eli")
START = datetime(2024, 1, 1, tzinfo=UTC)


class HashEmbedder:
    """Deterministic vectors: each text's own random direction, plus a shared one per first word
    (so queries have neighbours)."""

    model_id = "test/hash-16"
    dim = 16

    def embed_batch(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        out = []
        for text in texts:
            own = np.random.default_rng(_seed(text)).standard_normal(self.dim)
            topic = np.random.default_rng(_seed(text.split()[0])).standard_normal(self.dim)
            v = own + 2 * topic
            out.append(v / np.linalg.norm(v))
        return np.asarray(out, dtype=np.float32)


def _seed(text: str) -> int:
    return int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "little")


def _turns(n: int, seed: int, start: datetime, tags: tuple[str, ...] = ()) -> list[Any]:
    rng = np.random.default_rng(seed)
    words = ["apple", "river", "violin", "tax", "wedding", "puppy", "garden", "train"]
    out = []
    for i in range(n):
        speaker = SPEAKERS[int(rng.integers(len(SPEAKERS)))]
        text = " ".join(words[int(w)] for w in rng.integers(len(words), size=4)) + f" number{i}"
        kind, name = (TurnLLM, "turn_llm") if speaker == "eli" else (TurnUser, "turn_user")
        out.append(kind(id=new_temp_id(name), text_excerpt=text, agent=speaker, created_at=start + timedelta(hours=i),
                        session_id=f"s{i // 20}", tags=tags))
    return out


HAS_TANTIVY = importlib.util.find_spec("tantivy") is not None
ENGINES = ["fts5", pytest.param("tantivy", marks=pytest.mark.skipif(not HAS_TANTIVY,
                                                                    reason="tantivy is not installed"))]


@pytest.fixture
def index(tmp_path: Path, request: pytest.FixtureRequest) -> Any:
    acct = soulpass.open(tmp_path, embedder="none").account("a", create=True)
    acct.bulk_append(_turns(400, 1, START))
    idx = AccountIndex(acct.store, HashEmbedder(), backend="hnsw", fulltext=getattr(request, "param", "fts5"))
    idx.catch_up()
    yield acct, idx
    idx.close()  # closing twice is harmless
    acct.close()


def _sql_dense(idx: AccountIndex, query: str, depth: int, filters: Filters) -> list[str]:
    """What SQLite says: the exact nearest among every id passing the filters."""
    assert idx.vectors is not None
    allowed = idx.catalog.ids_matching(filters)
    qvec = idx.embedder.embed_batch([query])[0]  # type: ignore[union-attr]
    return [i for i, _ in idx.vectors.search(qvec, depth, allowed=allowed)] if allowed else []


def _filters() -> list[Filters]:
    mid = START + timedelta(hours=150)
    return [Filters(kinds=SEARCHABLE_KINDS, agent="bob"), Filters(kinds=SEARCHABLE_KINDS, since=mid),
            Filters(kinds=SEARCHABLE_KINDS, agent="cyd", since=START + timedelta(hours=40), until=mid),
            Filters(kinds=("turn_llm",), until=mid), Filters(kinds=SEARCHABLE_KINDS, agent="nobody")]


def _masked(idx: AccountIndex) -> MaskedDense:
    """The broad filters' masks of a local index (``LocalDense.masked``)."""
    assert isinstance(idx.dense, LocalDense) and idx.dense.masked is not None
    return idx.dense.masked


def _check_all(idx: AccountIndex, queries: Sequence[str] = ("apple river", "violin tax", "puppy garden")) -> None:
    for filters in _filters():
        for query in queries:
            qvec = idx.embedder.embed_batch([query])[0]  # type: ignore[union-attr]
            masked = _masked(idx).nearest(qvec, 30, filters)
            assert masked is not None, filters
            assert masked == _sql_dense(idx, query, 30, filters), (filters, query)


def test_masked_dense_search_equals_sqlites_answer(index: Any) -> None:
    _, idx = index
    _check_all(idx)
    # and a whole search returns only what passes
    for hit in idx.search("apple river", 10, Filters(agent="bob")):
        assert hit.row is not None and hit.row.agent == "bob"


def test_masks_follow_new_versions_edits_forgets_and_deleted_rows(index: Any) -> None:
    acct, idx = index
    _check_all(idx)
    acct.bulk_append(_turns(60, 2, START + timedelta(hours=500)))  # new rows: columns and vectors grow
    idx.catch_up()
    _check_all(idx)
    some = idx.catalog.ids_matching(Filters(agent="bob"))[:5]
    acct.edit(some[0], text_excerpt="apple river violin changed words", reason="test")  # a new copy
    acct.edit(some[3], agent="ann", reason="test")  # same text, another speaker: the old row closes
    idx.catch_up()
    assert some[3] not in idx.catalog.ids_matching(Filters(agent="bob"))
    assert some[3] in idx.catalog.ids_matching(Filters(agent="ann"))
    _check_all(idx, ("apple river", "changed words"))
    row = idx.catalog.get([some[2]])[0]
    assert idx.catalog.delete_rows([(row.id, row.version)]) == 1  # counted in meta: everything reloads
    _check_all(idx)
    acct.forget([some[1]], reason="test")  # drops the index: a new handle builds its masks afresh
    assert idx.dropped()
    idx.close()
    idx = AccountIndex(acct.store, HashEmbedder(), backend="hnsw")
    idx.catch_up()
    assert some[1] not in idx.catalog.ids_matching(Filters(agent="bob"))
    _check_all(idx)
    idx.close()


def test_the_filter_columns_agree_with_sql(index: Any) -> None:
    _, idx = index
    for filters in _filters():
        got = idx.catalog.filter_mask(filters)
        assert got is not None
        rows = set(np.flatnonzero(got[0]).tolist())
        ids = {r.id for r in idx.catalog.get(idx.catalog.ids_matching(filters))}
        in_force = idx.catalog.rows_in_force(ids)
        assert rows == set(in_force.values())
    # what the columns do not hold is left to SQLite
    for filters in (Filters(session_id="s1"), Filters(tags=("x",)), Filters(as_of_version=1), Filters(event_id="e")):
        assert not CatalogColumns.handles(filters)
        assert idx.catalog.filter_mask(filters) is None


@pytest.mark.parametrize("index", ENGINES, indirect=True)
def test_full_text_with_broad_filters_equals_the_sql_path(index: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    _, idx = index
    monkeypatch.setattr("soulpass.index.catalog.fulltext._FEW", 10)  # over-fetch, not "among the few"
    cases = [(f, q) for f in _filters() for q in ("apple", "violin tax wedding", "number7")]
    got = [idx.catalog.fts_search(q, 15, f) for f, q in cases]
    monkeypatch.setattr(idx.catalog, "filter_mask", lambda filters: None)  # SQLite checks every hit
    assert got == [idx.catalog.fts_search(q, 15, f) for f, q in cases]
    assert any(len(g) == 15 for g in got) and any(g == [] for g in got)


@pytest.mark.parametrize("index", ENGINES, indirect=True)
def test_a_tag_on_few_rows_is_ranked_among_them(index: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """A tag on a handful of rows (standing instructions): full text ranks the tagged rows from the
    query's kept matches, and the nearest vectors are those rows scored outright. Both equal the
    paths that over-fetch and check (what a tag on many rows takes) and SQLite's exact answer."""
    acct, idx = index
    acct.bulk_append(_turns(30, 7, START + timedelta(hours=600), tags=("rule",)))
    idx.catch_up()
    tagged = set(idx.catalog.ids_matching(Filters(tags=("rule",))))
    assert len(tagged) == 30
    cases = [(f, q) for f in (Filters(kinds=SEARCHABLE_KINDS, tags=("rule",)),
                              Filters(kinds=("turn_user",), tags=("rule", "other")),
                              Filters(kinds=SEARCHABLE_KINDS, tags=("rule",), agent="bob"),
                              Filters(kinds=SEARCHABLE_KINDS, tags=("other",)))
             for q in ("apple", "violin tax wedding", "number7 river")]

    def answers() -> tuple[list[Any], list[Any]]:
        fts = [idx.catalog.fts_search(q, 15, f) for f, q in cases]
        dense = [idx.dense.nearest(idx.embedder.embed_batch([q])[0], 20, f) for f, q in cases]
        return fts, dense

    fts, dense = answers()
    assert dense == [_sql_dense(idx, q, 20, f) for f, q in cases]
    assert {i for found in fts for i, _ in found} <= tagged and {i for found in dense for i in found} <= tagged
    assert any(len(found) == 15 for found in fts) and any(found == [] for found in fts)
    assert any(len(found) == 20 for found in dense)
    monkeypatch.setattr("soulpass.index.catalog.fulltext._FEW", 0)  # no tag is few: over-fetch and check
    monkeypatch.setattr("soulpass.index.dense.FEW_TAGGED", 0)
    assert answers() == (fts, dense)


def test_few_matching_lists_the_passing_rows_up_to_a_limit(index: Any) -> None:
    _, idx = index
    for filters in (*_filters(), Filters(session_id="s3"), Filters(tags=("nothing",))):
        every = idx.catalog.ids_matching(filters)
        assert idx.catalog.few_matching(filters, len(every)) == every
        assert idx.catalog.few_matching(filters, len(every) + 5) == every
        if every:
            assert idx.catalog.few_matching(filters, len(every) - 1) is None


# -- the vector index's masked search ---------------------------------------------------------


@pytest.mark.skipif(not HAS_USEARCH, reason="usearch is not installed (pip install 'soulpass[search]')")
@pytest.mark.parametrize("quantization", ["b1", "f16"])
def test_search_masked_finds_the_top_among_the_mask(tmp_path: Path, quantization: str) -> None:
    """Through the graph (a large share), the sign bits (a small one) or exactly (a few rows): only
    allowed live rows, and recall as good as the unfiltered graph's on the same rows."""
    dim, n = 256, 6000
    data = clustered(n, dim)
    ids = [f"r{i}" for i in range(n)]
    idx = HnswIndex(tmp_path / "v", model_id="m", dim=dim, ann_threshold=512, seal_rows=256, exact_allowed=64,
                    quantization=quantization)  # type: ignore[arg-type]
    idx.upsert(ids, data)
    idx.delete(ids[:300])  # dead rows are never returned
    queries = clustered(40, dim, sample_seed=9)
    live = np.arange(n) >= 300

    def recall(got: list[tuple[str, float]], allowed: npt.NDArray[np.bool_], q: npt.NDArray[np.float32]) -> float:
        ok = np.flatnonzero(allowed & live)
        truth = ok[np.argsort(-(data[ok] @ q), kind="stable")[:10]]
        return len({int(i[1:]) for i, _ in got} & set(truth.tolist())) / 10

    idx.prepare_masked(lambda rows: np.ones(rows.rows, dtype=np.bool_))  # packs the sign bits up front
    assert (idx._signs is not None and idx._signs.rows == n) == (quantization == "b1")
    plain = float(np.mean([recall(idx.search(q, 10), live, q) for q in queries]))
    rng = np.random.default_rng(5)
    for share in (0.6, 0.08, 0.005):  # the graph, the sign bits, exact (<= exact_allowed rows)
        allowed = rng.random(n) < share
        def mask_of(rows: Any, a: npt.NDArray[np.bool_] = allowed) -> npt.NDArray[np.bool_]:
            return a[:rows.rows]

        found = [idx.search_masked(q, 10, mask_of) for q in queries]
        assert all(allowed[int(i[1:])] and int(i[1:]) >= 300 for got in found for i, _ in got)
        mean = float(np.mean([recall(got, allowed, q) for got, q in zip(found, queries, strict=True)]))
        assert mean >= (1.0 if share == 0.005 else min(0.9, plain) - 0.05), (share, mean, plain)
    with pytest.raises(ValueError, match="row mask"):
        idx.search_masked(queries[0], 10, lambda rows: np.ones(3, dtype=bool))
    idx.close()
    if quantization == "b1":
        assert list((tmp_path / "v").glob("signs-*.b1")), "the packed signs are kept for the next process"


def test_exact_index_search_masked(tmp_path: Path) -> None:
    data = clustered(300, 16)
    idx = ExactIndex(tmp_path / "v", model_id="m", dim=16)
    idx.upsert([f"r{i}" for i in range(300)], data)
    allowed = np.arange(300) % 3 == 0
    got = idx.search_masked(data[3], 5, lambda rows: allowed[:rows.rows])
    truth = np.flatnonzero(allowed)[np.argsort(-(data[allowed] @ data[3]))[:5]]
    assert [int(i[1:]) for i, _ in got] == truth.tolist()
    idx.close()


def test_sign_bits_are_saved_reloaded_and_recomputed_when_short(tmp_path: Path) -> None:
    data = clustered(5000, 64)
    signs = SignBits(tmp_path, 0, 64, read_only=False)
    rows = np.array([0, 7, 4999], dtype=np.int64)
    expect = np.packbits(data > 0, axis=-1)
    assert (signs.take(rows, 5000, data) == expect[rows]).all()
    signs.save_if_unsaved()
    saved = tmp_path / "signs-0-5000.b1"
    assert saved.stat().st_size == 5000 * 8
    again = SignBits(tmp_path, 0, 64, read_only=False)
    assert again.rows == 5000 and (again.take(rows, 5000, data) == expect[rows]).all()
    more = np.concatenate([data, clustered(100, 64, seed=3)])
    both = np.array([1, 5000, 5099], dtype=np.int64)  # the file's rows and rows packed after it
    assert (again.take(both, 5100, more) == np.packbits(more > 0, axis=-1)[both]).all()
    with open(saved, "r+b") as f:
        f.truncate(100)  # short: not trusted, recomputed
    third = SignBits(tmp_path, 0, 64, read_only=False)
    assert third.rows == 0 and not saved.exists()
    assert (third.take(rows, 5000, data) == expect[rows]).all()
    q = np.packbits(data[0] > 0)
    assert hamming(expect[:3], q)[0] == 0
    assert hamming(expect[:3], q).tolist() == [int(np.unpackbits(expect[i] ^ q).sum()) for i in range(3)]


@pytest.mark.parametrize("dim", [64, 100, 384])  # one word, bytes (not whole words), six words
def test_hamming_counts_the_differing_bits_in_steps(dim: int, monkeypatch: pytest.MonkeyPatch) -> None:
    from soulpass.vectors import signs as signs_mod

    monkeypatch.setattr(signs_mod, "CHUNK_ROWS", 64)  # 1000 rows: 16 steps, the last one short
    packed = np.packbits(clustered(1000, dim) > 0, axis=-1)
    q = np.packbits(clustered(1, dim, seed=9)[0] > 0)
    want = np.unpackbits(packed ^ q, axis=-1).sum(axis=1)
    assert hamming(packed, q).tolist() == want.tolist() and hamming(packed[:0], q).shape == (0,)
    assert hamming(packed[::2], q).tolist() == want[::2].tolist()  # not contiguous: byte by byte


@pytest.mark.parametrize("wanted", [0, 1, 7, 50, 999, 1000, 1200])
def test_nearest_takes_the_smallest_distances_first_of_the_ties(wanted: int) -> None:
    distance = np.random.default_rng(wanted).integers(0, 40, 1000).astype(np.uint16)
    distance[::97] = np.iinfo(np.uint16).max  # dead rows: last
    got = nearest(distance, wanted)
    want = np.sort(np.argsort(distance, kind="stable")[:wanted])  # stable: the first of equal distances
    assert got.dtype == np.int64 and got.tolist() == want.tolist()


def test_passage_rows_take_their_records_mask(tmp_path: Path) -> None:
    acct = soulpass.open(tmp_path, embedder="none").account("a", create=True)
    long_text = " ".join(f"Sentence number {i} talks about the violin and the river." for i in range(12))
    acct.bulk_append([TurnUser(id=new_temp_id("turn_user"), text_excerpt=long_text, agent="bob",
                               created_at=START, session_id="s0"),
                      TurnUser(id=new_temp_id("turn_user"), text_excerpt="short violin", agent="ann",
                               created_at=START, session_id="s0")])
    idx = AccountIndex(acct.store, HashEmbedder(), backend="hnsw")
    idx.catch_up()
    assert idx._state is not None and passages.total(idx._state) > 0  # the long turn has passages
    qvec = HashEmbedder().embed_batch(["violin river."])[0]
    bob = _masked(idx).nearest(qvec, 10, Filters(kinds=SEARCHABLE_KINDS, agent="bob"))
    ann = _masked(idx).nearest(qvec, 10, Filters(kinds=SEARCHABLE_KINDS, agent="ann"))
    assert bob is not None and ann is not None and len(bob) == 1 and len(ann) == 1 and bob != ann
    idx.close()
    acct.close()


def _count_full_builds(idx: AccountIndex, monkeypatch: pytest.MonkeyPatch) -> list[object]:
    """The ``ids`` of each ``rows_in_force`` call (None: every id, a full build of the row map)."""
    calls: list[object] = []
    catalog: Any = idx.catalog
    real = catalog.rows_in_force

    def counting(ids: Any = None) -> Any:
        calls.append(ids)
        return real(ids)

    monkeypatch.setattr(catalog, "rows_in_force", counting)
    return calls


def _account_with_kept_masks(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, search_first: bool,
                             ) -> tuple[Any, list[Path]]:
    """An account of 400 turns whose index was caught up (and, with ``search_first``, searched with
    filters) by a handle now closed; the files it kept the masks in (saved from the first row on)."""
    from soulpass.index import tuning

    monkeypatch.setattr(tuning, "SAVE_MIN_ROWS", 1)
    acct = soulpass.open(tmp_path, embedder="none").account("a", create=True)
    acct.bulk_append(_turns(400, 1, START))
    idx = AccountIndex(acct.store, HashEmbedder(), backend="hnsw")
    idx.catch_up()
    if search_first:
        _check_all(idx)
    idx.close()
    folder = acct.store.index_location().folder
    kept = [*folder.rglob("*.columns.npz"), *folder.rglob("*.catalog-rows.npz")]
    assert len(kept) == 2
    return acct, kept


def test_columns_and_row_map_are_kept_for_the_next_handle(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    acct, kept = _account_with_kept_masks(tmp_path, monkeypatch, search_first=True)
    idx = AccountIndex(acct.store, HashEmbedder(), backend="hnsw")
    full_builds = _count_full_builds(idx, monkeypatch)
    _check_all(idx)
    assert None not in full_builds, "the map was rebuilt although it was kept"
    assert isinstance(idx.catalog, Catalog)
    masks = idx.catalog._masks
    assert masks.columns is not None and masks.columns.saved_rows > 0  # loaded from the file
    acct.bulk_append(_turns(60, 2, START + timedelta(hours=500)))  # caught up from what was kept
    idx.catch_up()
    _check_all(idx)
    idx.close()
    for path in kept:  # damaged: ignored, built again
        path.write_bytes(b"not an npz file")
    idx = AccountIndex(acct.store, HashEmbedder(), backend="hnsw")
    _check_all(idx)
    idx.close()
    remove_catalog(acct.store)  # a new catalog (another born token): the row map kept is not its
    idx = AccountIndex(acct.store, HashEmbedder(), backend="hnsw")
    idx.catch_up()
    _check_all(idx)
    idx.close()
    acct.close()


def test_a_repeated_query_is_embedded_once(index: Any) -> None:
    _, idx = index
    calls: list[list[str]] = []
    real = idx.embedder.embed_batch

    def counting(texts: Sequence[str]) -> Any:
        calls.append(list(texts))
        return real(texts)

    idx.embedder.embed_batch = counting
    first = idx.search("violin river", 5)
    again = idx.search("violin river", 5, Filters(agent="bob"))
    assert calls == [["violin river"]]
    assert [h.id for h in idx.search("violin river", 5)] == [h.id for h in first]
    assert all(h.row is not None and h.row.agent == "bob" for h in again)
    idx.search("apple tax", 5)
    assert calls == [["violin river"], ["apple tax"]]


def test_a_large_catch_up_prepares_the_filters(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """After a catch-up that wrote many vectors the masks are built and kept: the first filtered
    search of the next handle builds nothing."""
    from soulpass.index import follow

    monkeypatch.setattr(follow, "PREPARE_FILTERS_AFTER", 300)
    acct, _ = _account_with_kept_masks(tmp_path, monkeypatch, search_first=False)  # the catch-up alone
    idx = AccountIndex(acct.store, HashEmbedder(), backend="hnsw")
    full_builds = _count_full_builds(idx, monkeypatch)
    _check_all(idx)
    assert None not in full_builds
    idx.close()
    acct.close()
