"""Contract tests every ``VectorIndex`` backend must pass, plus crash-safety of the local ones.

Backends: ``exact``; ``hnsw`` with its defaults (exact below 16k rows, so these small tests
exercise its exact path and the 20k recall test, at 384-d, its sign-bit graph); ``hnsw-graph``
and ``hnsw-b1``, the same class with tiny thresholds and an f16 or a sign-bit graph, so every test
runs through the graph, the tail and the filtered over-fetch; and ``chroma``, a real ChromaDB
(skipped only where chromadb is not installed).
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import numpy.typing as npt
import pytest

from soulpass.errors import BackendUnavailable, ConfigError, InvalidInput
from soulpass.vectors import ChromaIndex, ExactIndex, HnswIndex, SharedIndex, VectorIndex, open_vector_index
from soulpass.vectors.abilities import ScoresRows
from soulpass.vectors.exact import NO_ROW

DIM = 32
MODEL = "test/model-a"
HAS_CHROMA = importlib.util.find_spec("chromadb") is not None
HAS_USEARCH = importlib.util.find_spec("usearch") is not None

Opener = Callable[..., VectorIndex]


def _open_hnsw_graph(folder: Path, model_id: str = MODEL, dim: int = DIM) -> VectorIndex:
    return HnswIndex(folder, model_id=model_id, dim=dim, ann_threshold=64, seal_rows=48, exact_allowed=8,
                     max_fetch=512, quantization="f16")


def _open_hnsw_b1(folder: Path, model_id: str = MODEL, dim: int = DIM) -> VectorIndex:
    return HnswIndex(folder, model_id=model_id, dim=dim, ann_threshold=64, seal_rows=48, exact_allowed=8,
                     quantization="b1")


OPENERS: dict[str, Opener] = {
    "exact": lambda folder, model_id=MODEL, dim=DIM: ExactIndex(folder, model_id=model_id, dim=dim),
    "hnsw": lambda folder, model_id=MODEL, dim=DIM: HnswIndex(folder, model_id=model_id, dim=dim),
    "hnsw-graph": _open_hnsw_graph,
    "hnsw-b1": _open_hnsw_b1,
    "chroma": lambda folder, model_id=MODEL, dim=DIM: ChromaIndex(folder, model_id=model_id, dim=dim),
}
SKIPS = {
    "chroma": pytest.mark.skipif(not HAS_CHROMA, reason="chromadb is not installed (pip install 'soulpass[chroma]')"),
    "hnsw": pytest.mark.skipif(not HAS_USEARCH, reason="usearch is not installed (pip install 'soulpass[search]')"),
    "hnsw-graph": pytest.mark.skipif(not HAS_USEARCH, reason="usearch is not installed"),
    "hnsw-b1": pytest.mark.skipif(not HAS_USEARCH, reason="usearch is not installed"),
}
ALL = [pytest.param(name, marks=SKIPS.get(name, ())) for name in OPENERS]
ANN = [pytest.param(name, marks=SKIPS[name]) for name in ("hnsw", "chroma")]
EXACT = ("exact", "hnsw")  # hnsw stays exact below its 16k-row threshold
LOCAL = ["exact", *(pytest.param(name, marks=SKIPS[name]) for name in ("hnsw-graph", "hnsw-b1"))]


def clustered(n: int, dim: int = DIM, seed: int = 0, sample_seed: int = 1) -> npt.NDArray[np.float32]:
    """Unit vectors near a low-dimensional mixture of clusters, like sentence embeddings."""
    rng = np.random.default_rng(seed)
    latent = min(dim, 24)
    proj = rng.standard_normal((latent, dim)).astype(np.float32) / np.sqrt(latent)
    centres = rng.standard_normal((64, latent)).astype(np.float32)
    rng = np.random.default_rng(sample_seed)
    z = centres[rng.integers(0, len(centres), n)] + 1.2 * rng.standard_normal((n, latent)).astype(np.float32)
    x = z @ proj + 0.4 * rng.standard_normal((n, dim)).astype(np.float32)
    unit: npt.NDArray[np.float32] = (x / np.linalg.norm(x, axis=1, keepdims=True)).astype(np.float32)
    return unit


def exact_top(data: npt.NDArray[np.float32], ids: list[str], query: npt.NDArray[np.float32], k: int,
              among: set[str] | None = None) -> list[str]:
    scores = data @ (query / np.linalg.norm(query))
    order = np.argsort(-scores, kind="stable")
    return [ids[i] for i in order if among is None or ids[i] in among][:k]


@pytest.fixture(params=ALL)
def backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def open_index(backend: str, tmp_path: Path) -> Iterator[Callable[..., VectorIndex]]:
    opened: list[VectorIndex] = []

    def _open(model_id: str = MODEL, dim: int = DIM, folder: Path | None = None) -> VectorIndex:
        index = OPENERS[backend](folder or tmp_path / "vectors", model_id=model_id, dim=dim)
        opened.append(index)
        return index

    yield _open
    for index in opened:
        index.close()


def test_upsert_search_count(open_index: Callable[..., VectorIndex], backend: str) -> None:
    index = open_index()
    assert index.count() == 0
    assert index.search(np.ones(DIM), 5) == []
    data = clustered(300)
    ids = [f"r{i}" for i in range(300)]
    index.upsert(ids, data)
    assert index.count() == 300
    assert isinstance(index, VectorIndex)
    hits = index.search(data[7] * 3.0, 10)  # scale does not matter: cosine
    assert hits[0][0] == "r7" and hits[0][1] == pytest.approx(1.0, abs=1e-3)
    assert [s for _, s in hits] == sorted((s for _, s in hits), reverse=True)
    truth = exact_top(data, ids, data[7], 10)
    if backend in EXACT:
        assert [i for i, _ in hits] == truth
    else:
        assert len({i for i, _ in hits} & set(truth)) >= 8
    assert len(index.search(data[0], 1000)) == 300
    with pytest.raises(InvalidInput):
        index.search(data[0], 0)


def test_upsert_of_an_existing_id_replaces_it(open_index: Callable[..., VectorIndex]) -> None:
    index = open_index()
    data = clustered(200)
    ids = [f"r{i}" for i in range(200)]
    index.upsert(ids, data)
    index.upsert(["r3", "r4"], data[[100, 101]] + 0.0)
    assert index.count() == 200
    hits = index.search(data[100], 2)
    assert {h[0] for h in hits} == {"r3", "r100"}
    assert all(s == pytest.approx(1.0, abs=1e-3) for _, s in hits)
    assert "r3" not in [i for i, _ in index.search(data[3], 3)]


def test_delete_and_missing_ids(open_index: Callable[..., VectorIndex]) -> None:
    index = open_index()
    data = clustered(200)
    index.upsert([f"r{i}" for i in range(200)], data)
    index.delete(["r5", "nope"])
    index.delete(["r5"])
    index.delete([])
    assert index.count() == 199
    assert "r5" not in [i for i, _ in index.search(data[5], 20)]
    index.upsert(["r5"], data[5:6])
    assert index.search(data[5], 1)[0][0] == "r5"


def test_bad_input_is_refused(open_index: Callable[..., VectorIndex]) -> None:
    index = open_index()
    with pytest.raises(InvalidInput, match="dim 16"):
        index.upsert(["a"], np.ones((1, 16)))
    with pytest.raises(InvalidInput):
        index.upsert(["a", "b"], np.ones((1, DIM)))
    with pytest.raises(InvalidInput, match="repeat"):
        index.upsert(["a", "a"], np.ones((2, DIM)))
    with pytest.raises(InvalidInput, match="non-zero"):
        index.upsert(["a"], np.zeros((1, DIM)))
    with pytest.raises(InvalidInput):
        index.search(np.ones(16), 3)
    assert index.count() == 0


def test_allowed_filter(open_index: Callable[..., VectorIndex], backend: str) -> None:
    index = open_index()
    data = clustered(3000)
    ids = [f"r{i}" for i in range(3000)]
    index.upsert(ids, data)
    index.delete(["r10", "r11"])
    ids_live = [i for i in ids if i not in {"r10", "r11"}]
    data_live = data[[int(i[1:]) for i in ids_live]]
    rng = np.random.default_rng(3)
    small = {ids[i] for i in rng.choice(3000, 40, replace=False)} | {"r10", "missing"}
    large = {ids[i] for i in range(0, 3000, 3)} | {"r11"}
    for q in rng.choice(3000, 5, replace=False):
        query = data[q]
        # a small set: the true top-k within it, whatever the backend
        got = [i for i, _ in index.search(query, 10, allowed=small)]
        assert got == exact_top(data_live, ids_live, query, 10, among=small)
        assert index.search(query, 10, allowed=list(small))[0][0] == got[0]  # any Collection works
        # a large set: only allowed ids; exact backends exactly, ANN ones nearly
        got = [i for i, _ in index.search(query, 10, allowed=large)]
        truth = exact_top(data_live, ids_live, query, 10, among=large)
        assert set(got) <= large and "r11" not in got
        if backend in EXACT:
            assert got == truth
        else:
            assert len(set(got) & set(truth)) >= 8
    assert index.search(data[0], 5, allowed=set()) == []
    assert index.search(data[0], 5, allowed={"missing"}) == []


def cosines(index: ScoresRows, vector: npt.ArrayLike, ids: list[str]) -> dict[str, float]:
    """``cosine_array`` as a dict, ids without a live row left out."""
    return {i: s for i, s in zip(ids, index.cosine_array(vector, ids).tolist(), strict=True) if s > NO_ROW}


@pytest.mark.parametrize("name", LOCAL)
def test_cosines_score_the_given_ids_as_a_search_among_them_does(name: str, tmp_path: Path) -> None:
    """``cosine_array``: the exact score of each given id that has a live row, the very value a search
    among those ids gives it (a hybrid search completes its candidates' scores by it), in the graph,
    the tail and past the gather threshold; unknown and deleted ids are left out."""
    index = OPENERS[name](tmp_path / "vectors")
    shared = SharedIndex(tmp_path / "vectors", index)
    data = clustered(400)
    ids = [f"r{i}" for i in range(400)]
    index.upsert(ids, data)
    index.delete(["r5"])
    rng = np.random.default_rng(7)
    for size in (3, 60, 350):  # a gather of a few rows; most rows: one product over them all
        wanted = [ids[i] for i in rng.choice(400, size, replace=False)] + ["r5", "missing"]
        query = data[int(rng.integers(400))] * 2.0
        got = cosines(shared, query, wanted)
        assert got is not None and set(got) == set(wanted) - {"r5", "missing"}
        exact = ExactIndex(tmp_path / f"exact-{size}", model_id=MODEL, dim=DIM)
        exact.upsert(ids, data)
        searched = dict(exact.search(query, len(wanted), allowed=wanted))
        exact.close()
        assert got == {i: searched[i] for i in got}  # the same floats, not just close
        unit = query / np.linalg.norm(query)
        assert got == pytest.approx({i: float(data[int(i[1:])] @ unit) for i in got}, abs=1e-5)
    assert cosines(shared, data[0], []) == {}
    index.close()


def test_reopen_gives_the_same_results(open_index: Callable[..., VectorIndex], tmp_path: Path) -> None:
    index = open_index()
    data = clustered(500)
    index.upsert([f"r{i}" for i in range(400)], data[:400])
    index.upsert([f"r{i}" for i in range(300, 500)], data[300:])
    index.delete([f"r{i}" for i in range(0, 500, 7)])
    queries = clustered(5, sample_seed=9)
    before = [index.search(q, 10) for q in queries]
    filtered = [index.search(q, 5, allowed={f"r{i}" for i in range(100)}) for q in queries]
    count = index.count()
    index.close()
    index.close()  # idempotent
    again = open_index()
    assert again.count() == count
    for q, b, f in zip(queries, before, filtered, strict=True):
        assert [i for i, _ in again.search(q, 10)] == [i for i, _ in b]
        assert [s for _, s in again.search(q, 10)] == pytest.approx([s for _, s in b], abs=1e-5)
        got = again.search(q, 5, allowed={f"r{i}" for i in range(100)})
        assert [i for i, _ in got] == [i for i, _ in f]


def test_another_model_or_dim_is_refused(open_index: Callable[..., VectorIndex], backend: str, tmp_path: Path) -> None:
    index = open_index()
    index.upsert(["a"], np.ones((1, DIM)))
    index.close()
    with pytest.raises(ConfigError) as err:
        open_index(model_id="test/model-b")
    assert "test/model-a" in str(err.value) and "test/model-b" in str(err.value)
    with pytest.raises(ConfigError, match="32-d"):
        open_index(dim=DIM * 2)
    other = "chroma" if backend != "chroma" else "exact"
    with pytest.raises(ConfigError, match="index"):
        OPENERS[other](tmp_path / "vectors", model_id=MODEL, dim=DIM)
    assert open_index().count() == 1


@pytest.mark.parametrize("name", ANN)
def test_ann_recall_at_10_on_20k(name: str, tmp_path: Path) -> None:
    dim = 384  # MiniLM's: the default index keeps sign bits (b1) in its graph from 256-d on
    data = clustered(20_000, dim=dim, seed=5)
    queries = clustered(100, dim=dim, seed=5, sample_seed=77)
    ids = [f"r{i}" for i in range(len(data))]
    index = OPENERS[name](tmp_path / name, model_id=MODEL, dim=dim)
    try:
        index.upsert(ids, data)
        if isinstance(index, HnswIndex):
            assert index._graph is not None, "20k rows are above the default ANN threshold"
            assert index.quantization == "b1"
        recall = np.mean([
            len({i for i, _ in index.search(q, 10)} & set(exact_top(data, ids, q, 10))) / 10 for q in queries
        ])
    finally:
        index.close()
    assert recall >= 0.95, f"{name} recall@10 = {recall:.3f}"


# -- local backends: crash safety, compaction, one owner ----------------------------------------


@pytest.mark.parametrize("name", LOCAL)
def test_torn_writes_are_cut_off_on_open(name: str, tmp_path: Path) -> None:
    folder = tmp_path / "v"
    data = clustered(200)
    index = OPENERS[name](folder, model_id=MODEL, dim=DIM)
    index.upsert([f"r{i}" for i in range(100)], data[:100])
    index.close()
    # a crash mid-upsert: vector bytes written, row log frame torn
    with open(next(folder.glob("vectors-*.f32")), "ab") as fh:
        fh.write(data[100:150].tobytes())
    with open(next(folder.glob("journal-*.log")), "ab") as fh:
        fh.write(b"\x40\x00\x00\x00\x01\x02\x03\x04{\"u\": [\"r1")
    index = OPENERS[name](folder, model_id=MODEL, dim=DIM)
    assert index.count() == 100
    assert index.search(data[120], 1)[0][0] != "r120"
    index.upsert([f"r{i}" for i in range(100, 200)], data[100:])
    assert index.search(data[120], 1)[0][0] == "r120"
    index.close()
    index = OPENERS[name](folder, model_id=MODEL, dim=DIM)
    assert index.count() == 200 and index.search(data[150], 1)[0][0] == "r150"
    index.close()


@pytest.mark.parametrize("name", LOCAL)
def test_compaction_keeps_results(name: str, tmp_path: Path) -> None:
    folder = tmp_path / "v"
    data = clustered(5000)
    index = OPENERS[name](folder, model_id=MODEL, dim=DIM)
    index.upsert([f"r{i}" for i in range(5000)], data)
    index.delete([f"r{i}" for i in range(4600)])
    assert (folder / "vectors-1.f32").exists() and not (folder / "vectors-0.f32").exists()
    assert index.count() == 400
    hits = index.search(data[4700], 10)
    assert hits[0][0] == "r4700"
    index.close()
    index = OPENERS[name](folder, model_id=MODEL, dim=DIM)
    assert [i for i, _ in index.search(data[4700], 10)] == [i for i, _ in hits]
    index.close()


def _read_only(index: VectorIndex) -> bool:
    assert isinstance(index, ExactIndex)  # the local backends (HnswIndex is one)
    return index.read_only


@pytest.mark.parametrize("name", LOCAL)
def test_one_writer_and_readers_that_follow_it(name: str, tmp_path: Path) -> None:
    """A second open of a folder another owner writes is a reader: it searches what the writer
    commits (after compaction too), refuses to write, and leaves the writer's files alone."""
    data = clustered(5000)
    writer = OPENERS[name](tmp_path / "v", model_id=MODEL, dim=DIM)
    writer.upsert([f"r{i}" for i in range(10)], data[:10])
    reader = OPENERS[name](tmp_path / "v", model_id=MODEL, dim=DIM)
    assert _read_only(reader) and not _read_only(writer)
    assert reader.count() == 10 and reader.search(data[3], 1)[0][0] == "r3"
    with pytest.raises(BackendUnavailable, match="another process"):
        reader.upsert(["x"], data[:1])
    writer.upsert([f"r{i}" for i in range(10, 5000)], data[10:])
    assert reader.count() == 5000 and reader.search(data[4321], 1)[0][0] == "r4321"
    writer.delete([f"r{i}" for i in range(4600)])  # compacts into a new generation
    assert reader.count() == 400 and reader.search(data[4700], 1)[0][0] == "r4700"
    files = sorted(p.name for p in (tmp_path / "v").iterdir())
    reader.close()
    assert sorted(p.name for p in (tmp_path / "v").iterdir()) == files
    late = OPENERS[name](tmp_path / "v", model_id=MODEL, dim=DIM)
    assert _read_only(late)
    writer.close()
    assert late.count() == 400 and not _read_only(late)  # the writer let go: the reader takes over
    late.upsert(["new"], data[:1])
    again = OPENERS[name](tmp_path / "v", model_id=MODEL, dim=DIM)
    assert _read_only(again) and again.count() == 401
    again.close()
    late.close()


def test_handles_in_one_process_share_one_open_index(tmp_path: Path) -> None:
    data = clustered(20)
    first = open_vector_index(tmp_path / "v", model_id=MODEL, dim=DIM, backend="exact")
    second = open_vector_index(tmp_path / "v", model_id=MODEL, dim=DIM, backend="exact")
    assert isinstance(first, SharedIndex) and isinstance(second, SharedIndex)
    assert not first.read_only and not second.read_only
    first.upsert(["a", "b"], data[:2])
    assert second.count() == 2 and second.search(data[1], 1)[0][0] == "b"
    with pytest.raises(ConfigError, match="open as"):
        open_vector_index(tmp_path / "v", model_id="other/model", dim=DIM, backend="exact")
    first.close()
    first.close()  # idempotent: releases its handle once
    second.upsert(["c"], data[2:3])  # still open for the other handle
    second.close()
    writer = ExactIndex(tmp_path / "v", model_id=MODEL, dim=DIM)  # the folder was released
    assert not writer.read_only and writer.count() == 3
    writer.close()


@pytest.mark.skipif(not HAS_USEARCH, reason="usearch is not installed")
def test_lost_graph_is_rebuilt(tmp_path: Path) -> None:
    folder = tmp_path / "v"
    data = clustered(500)
    index = _open_hnsw_graph(folder)
    index.upsert([f"r{i}" for i in range(500)], data)
    hits = index.search(data[3], 10)
    index.close()
    for graph in folder.glob("graph-*.usearch"):
        graph.write_bytes(b"not a graph")
    index = _open_hnsw_graph(folder)
    assert [i for i, _ in index.search(data[3], 10)][:5] == [i for i, _ in hits][:5]
    assert isinstance(index, HnswIndex) and index._graph is not None  # rebuilt when first needed
    index.close()


@pytest.mark.skipif(not HAS_USEARCH, reason="usearch is not installed")
def test_a_sign_bit_graph_holds_the_signs_of_a_rotation_too(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A new sign-bit graph holds 2 x dim bits a row (the vector's signs, then its rotation's), which
    find more of the exact top 10 among the same number of re-scored candidates than the signs alone;
    a graph saved with dim bits (before) is searched as it is, not rebuilt."""
    from soulpass.vectors import hnsw

    dim, n = 128, 4000
    data, queries = clustered(n, dim=dim), clustered(60, dim=dim, sample_seed=5)
    ids = [f"r{i}" for i in range(n)]
    rotation = hnsw._rotation(dim)
    assert np.allclose(rotation @ rotation.T, np.eye(dim), atol=1e-4)  # a rotation: keeps angles
    bits = hnsw.graph_bits(data[:3], 2)
    assert bits.shape == (3, 2 * dim // 8) and np.array_equal(bits[:, :dim // 8], np.packbits(data[:3] > 0, axis=-1))

    def recall(folder: Path, projections: int) -> float:
        monkeypatch.setattr(hnsw, "GRAPH_PROJECTIONS", projections)
        index = _open_hnsw_b1(folder, dim=dim)
        assert isinstance(index, HnswIndex)
        index.b1_base = 40  # few candidates: how good the first stage is shows
        if not index._graph_files():
            index.upsert(ids, data)
        found = [len({i for i, _ in index.search(q, 10)} & set(exact_top(data, ids, q, 10))) / 10 for q in queries]
        assert index._has_graph() and index._graph.ndim == dim * projections
        index.close()
        return float(np.mean(found))

    one, two = recall(tmp_path / "one", 1), recall(tmp_path / "two", 2)
    assert two > one + 0.02, (one, two)
    saved = sorted((tmp_path / "one").glob("graph-*.usearch"))
    stamp = [p.stat().st_mtime_ns for p in saved]
    monkeypatch.setattr(hnsw, "GRAPH_PROJECTIONS", 2)
    index = _open_hnsw_b1(tmp_path / "one", dim=dim)  # the dim-bit graph of before, opened by today's code
    assert isinstance(index, HnswIndex) and index._has_graph() and index._graph.ndim == dim
    assert index.search(data[11], 3)[0][0] == "r11"
    index.close()
    assert sorted((tmp_path / "one").glob("graph-*.usearch")) == saved
    assert [p.stat().st_mtime_ns for p in saved] == stamp  # not rebuilt


@pytest.mark.skipif(not HAS_USEARCH, reason="usearch is not installed")
def test_a_graph_notes_how_widely_it_was_built_and_is_searched_by_it(tmp_path: Path) -> None:
    """A saved graph has a note beside it (``graph-G-R.json``) with the expansion_add its rows joined
    with; a graph built with EXPANSION_ADD re-scores fewer candidates, one without a note (saved
    before) is taken as built with 64 and keeps its width, also after rows are added to it."""
    from soulpass.vectors import hnsw

    assert hnsw._b1_candidates(10, 1_000_000, projections=2) == 220  # built with 64
    assert hnsw._b1_candidates(10, 1_000_000, projections=2, expansion_add=hnsw.EXPANSION_ADD) == 170
    assert hnsw._b1_candidates(10, 100_000, projections=2, expansion_add=hnsw.EXPANSION_ADD) == 150
    assert hnsw._b1_candidates(75, 1_000_000, projections=2, expansion_add=hnsw.EXPANSION_ADD) == 170 + 4 * 65
    folder, data = tmp_path / "v", clustered(600)
    index = _open_hnsw_b1(folder)
    index.upsert([f"r{i}" for i in range(500)], data[:500])
    index.close()
    (graph,) = folder.glob("graph-*.usearch")
    note = graph.with_suffix(".json")
    assert json.loads(note.read_text("utf-8")) == {"expansion_add": hnsw.EXPANSION_ADD}
    index = _open_hnsw_b1(folder)
    assert isinstance(index, HnswIndex) and index._has_graph()
    assert index._graph_expansion == hnsw.EXPANSION_ADD
    assert index._graph.expansion_search == hnsw._b1_candidates(10, 500, None, 2, hnsw.EXPANSION_ADD)
    index.close()

    note.unlink()  # a graph saved before notes
    index = _open_hnsw_b1(folder)
    assert isinstance(index, HnswIndex) and index._has_graph() and index._graph_expansion == 64
    assert index._graph.expansion_search == hnsw._b1_candidates(10, 500, None, 2, 64)
    assert index.search(data[7], 1)[0][0] == "r7"
    index.upsert([f"r{i}" for i in range(500, 600)], data[500:])  # sealed into the graph of before
    index.close()
    (graph,) = folder.glob("graph-*.usearch")
    assert graph.name.endswith("-600.usearch") and json.loads(graph.with_suffix(".json").read_text("utf-8")) == {
        "expansion_add": 64}
    assert sorted(p.name for p in folder.glob("graph-*")) == [graph.with_suffix(".json").name, graph.name]

    # Built again from the stored rows (nothing embedded), as new graphs are: wide, noted so.
    index = _open_hnsw_b1(folder)
    assert isinstance(index, HnswIndex)
    reader = HnswIndex(folder, model_id=MODEL, dim=DIM, ann_threshold=64, seal_rows=48, quantization="b1")
    assert reader.read_only
    with pytest.raises(BackendUnavailable, match="another process writes"):
        reader.rebuild_graph()
    reader.close()
    seen: list[tuple[int, int]] = []
    assert index.rebuild_graph(lambda done, total: seen.append((done, total))) == 600
    assert index._graph_expansion == hnsw.EXPANSION_ADD and seen and seen[-1] == (600, 600)
    assert json.loads(graph.with_suffix(".json").read_text("utf-8")) == {"expansion_add": hnsw.EXPANSION_ADD}
    assert [index.search(data[i], 1)[0][0] for i in (3, 550)] == ["r3", "r550"]
    index.close()
    index = _open_hnsw_b1(folder)
    assert isinstance(index, HnswIndex) and index._has_graph() and index._graph_expansion == hnsw.EXPANSION_ADD
    index.close()
    few = HnswIndex(tmp_path / "few", model_id=MODEL, dim=DIM, quantization="b1")  # below ann_threshold
    few.upsert(["a"], data[:1])
    assert few.rebuild_graph() == 0 and not list((tmp_path / "few").glob("graph-*"))
    few.close()


def test_open_vector_index_picks_the_backend(tmp_path: Path) -> None:
    index = open_vector_index(tmp_path / "v", model_id=MODEL, dim=DIM, backend="exact")
    assert isinstance(index, SharedIndex) and index.meta.backend == "exact" and index.meta.model_id == MODEL
    index.close()


def test_search_scale_benchmark_smoke(tmp_path: Path) -> None:
    """``benchmarks/search_scale.py`` end to end on a tiny size (children, rounds, filters, JSON)."""
    spec = importlib.util.spec_from_file_location(
        "soulpass_bench_search_scale", Path(__file__).resolve().parents[1] / "benchmarks" / "search_scale.py"
    )
    assert spec is not None and spec.loader is not None
    bench = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = bench  # dataclasses look their module up
    try:
        spec.loader.exec_module(bench)
    finally:
        sys.modules.pop(spec.name, None)
    out = tmp_path / "result.json"
    backend = "hnsw" if HAS_USEARCH else "exact"  # hnsw is exact at this size
    assert bench.main(["--sizes", "1500", "--queries", "12", "--rounds", "1", "--backends", backend,
                       "--filtered", "0.1", "--workdir", str(tmp_path / "work"), "--json", str(out)]) == 0
    vector = json.loads(out.read_text())["sizes"]["1500"]["vector"]
    assert vector[backend]["recall"] == 1.0 and vector[backend]["p95_ms"] > 0
    assert "filtered" in vector[backend] or backend == "exact"
    assert not (tmp_path / "work").exists()


@pytest.mark.skipif(importlib.util.find_spec("usearch") is None or importlib.util.find_spec("onnxruntime") is None,
                    reason="needs the 'search' and 'embed' extras")
def test_a_graph_opened_before_the_embedder_does_not_crash_the_process(tmp_path: Path) -> None:
    """`import usearch.index; import onnxruntime` segfaults with the pinned builds: the index must
    load ONNX Runtime first, so a process may open a big index and then embed a query."""
    import subprocess

    script = (
        "import numpy as np\n"
        "from soulpass.vectors import HnswIndex\n"
        f"idx = HnswIndex({str(tmp_path / 'v')!r}, model_id='m', dim=8, ann_threshold=64, seal_rows=32)\n"
        "rng = np.random.default_rng(1)\n"
        "idx.upsert([f'r{i}' for i in range(200)], rng.normal(size=(200, 8)))\n"
        "import onnxruntime\n"
        "print(len(idx.search(rng.normal(size=8), 3)))\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, (done.returncode, done.stderr[-2000:])
    assert done.stdout.strip() == "3"


def test_row_store_replays_a_batch_with_an_id_twice(tmp_path: Path) -> None:
    """New ids are taken in one step (append and replay on open); an id twice in one batch (which
    ``upsert`` refuses, but a row log may hold) keeps its last row, and an update kills the old row."""
    from soulpass.vectors.rows import RowStore

    data = clustered(8)
    rows = RowStore(tmp_path / "v", DIM)
    rows.append(["a", "b", "a", "c"], data[:4])
    rows.append(["b", "d"], data[4:6])
    state = (list(rows.ids), rows.row_of, rows.live_mask().tolist())
    assert state == ([None, None, "a", "c", "b", "d"], {"a": 2, "b": 4, "c": 3, "d": 5},
                     [False, False, True, True, True, True])
    rows.close()
    again = RowStore(tmp_path / "v", DIM)
    assert (list(again.ids), again.row_of, again.live_mask().tolist()) == state
    again.close()


def _row_log_frames(folder: Path) -> list[dict[str, object]]:
    from soulpass.vectors.rows import _read_frames

    return [frame for _end, frame in _read_frames(folder / "journal-0.log")]


def test_row_store_frames_name_their_dead_rows_and_opening_builds_no_id_map(tmp_path: Path) -> None:
    """Each frame names the rows it kills, so opening replays rows and liveness without an id -> row
    map (1M rows: ~0.5 s saved); the map is built on first use, and the same either way. A row log
    of an earlier release (no row lists) is still replayed, by id."""
    import json
    import struct
    import zlib

    from soulpass.vectors.rows import RowStore

    data = clustered(10)
    rows = RowStore(tmp_path / "v", DIM)
    rows.append(["a", "b", "c"], data[:3])
    rows.append(["b", "d", "d"], data[3:6])  # b updated; d twice: its first row dies at once
    rows.forget(["c", "zz"])
    rows.append(["e"], data[6:7])
    state = (list(rows.ids), dict(rows.row_of), rows.live_mask().tolist(), rows.live_count)
    assert state == (["a", None, None, "b", None, "d", "e"], {"a": 0, "b": 3, "d": 5, "e": 6},
                     [True, False, False, True, False, True, True], 4)
    rows.close()
    assert _row_log_frames(tmp_path / "v") == [
        {"u": ["a", "b", "c"], "at": 0, "dead": []}, {"u": ["b", "d", "d"], "at": 3, "dead": [1, 4]},
        {"d": ["c"], "rows": [2]}, {"u": ["e"], "at": 6, "dead": []}]

    again = RowStore(tmp_path / "v", DIM)
    assert again._row_of is None  # opening built no map
    assert (list(again.ids), again.live_mask().tolist(), again.live_count) == (state[0], state[2], state[3])
    assert again.row_of == state[1] and again._row_of is not None
    again.append(["a"], data[7:8])  # with the map built, it follows the writes
    assert again.row_of == {"a": 7, "b": 3, "d": 5, "e": 6} and again.live_count == 4
    again.close()

    legacy = tmp_path / "old"
    legacy.mkdir()
    (legacy / "state.json").write_text('{"generation": 0}')
    (legacy / "vectors-0.f32").write_bytes(data[:6].tobytes())
    frames = [{"u": ["a", "b", "c"], "at": 0}, {"u": ["b", "d", "d"], "at": 3}, {"d": ["c"]}]
    with open(legacy / "journal-0.log", "wb") as fh:
        for frame in frames:
            payload = json.dumps(frame).encode()
            fh.write(struct.pack("<II", len(payload), zlib.crc32(payload)) + payload)
    old = RowStore(legacy, DIM)
    assert (list(old.ids), old.row_of, old.live_count) == (["a", None, None, "b", None, "d"],
                                                           {"a": 0, "b": 3, "d": 5}, 3)
    old.close()


def test_row_store_finds_ids_by_its_sorted_checkpoint_without_the_map(tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """Past ``SAVE_MIN_ROWS`` rows (each time they grow by a quarter) the live ids are saved
    sorted with their rows; a fresh open finds ids' rows by binary search there and by a small map
    of the rows after it, never building the whole map. Forgotten, moved and unknown ids come out
    right, and a damaged checkpoint is only ignored."""
    from soulpass.vectors import rows as rows_mod
    from soulpass.vectors.rows import RowStore

    monkeypatch.setattr(rows_mod, "SAVE_MIN_ROWS", 8)
    data = clustered(40)
    folder = tmp_path / "v"
    store = RowStore(folder, DIM)
    store.append([f"id-{n}" for n in range(10)], data[:10])  # 10 rows: a checkpoint of rows [0, 10)
    assert sorted(p.name for p in folder.glob("ids-*")) == ["ids-0-10.at.json", "ids-0-10.keys.npy",
                                                           "ids-0-10.rows.npy"]
    store.append(["id-3", "new-é"], data[10:12])  # id-3 moves on; an id past the checkpoint
    store.forget(["id-5"])
    expected = dict(store.row_of)
    store.close()

    again = RowStore(folder, DIM)
    wanted = ["id-0", "id-3", "id-5", "id-9", "new-é", "nobody", "a-much-longer-id-than-any-stored"]
    assert again.rows_for(wanted) == {i: expected[i] for i in wanted if i in expected}
    assert again.rows_for(wanted) == {"id-0": 0, "id-3": 10, "id-9": 9, "new-é": 11}
    assert again._row_of is None  # found without the map
    again.close()

    (folder / "ids-0-10.keys.npy").write_bytes(b"not an array")  # damaged: ignored, same answers
    damaged = RowStore(folder, DIM)
    assert damaged._checkpoint is None and damaged.rows_for(wanted) == {"id-0": 0, "id-3": 10, "id-9": 9,
                                                                         "new-é": 11}
    damaged.append([f"more-{n}" for n in range(8)], data[12:20])  # grown by more than a quarter: a new one
    assert damaged._checkpoint is not None and damaged._checkpoint[2] == 20
    assert (folder / "ids-0-20.keys.npy").exists() and (folder / "ids-0-20.rows.npy").exists()
    damaged.close()
    last = RowStore(folder, DIM)
    assert last.rows_for(["more-7", "id-3", "id-5"]) == {"more-7": 19, "id-3": 10} and last._row_of is None
    last._save_checkpoint()  # again at the same row count: the files just written stay
    assert (folder / "ids-0-20.keys.npy").exists() and (folder / "ids-0-20.rows.npy").exists()
    assert last.rows_for(["more-7"]) == {"more-7": 19}
    last.close()


def test_row_ids_slices_span_the_checkpoint_and_the_tail() -> None:
    """``RowIds`` (ids by row: a checkpoint's array, then a list) slices like the list of its ids."""
    from soulpass.vectors.row_ids import RowIds

    ids = RowIds(np.array([b"a", b"", "é".encode(), b"c"], dtype="S4"))
    ids.extend(["d", None, "f"])
    ids.kill(0)
    ids.kill(6)
    plain = list(ids)
    assert plain == [None, None, "é", "c", "d", None, None]
    for cut in (slice(None), slice(2, 5), slice(4, None), slice(-3, -1), slice(1, 2), slice(5, 1), slice(0, 7, 2),
                slice(None, None, -1), slice(3, 4), slice(10, 20)):
        assert ids[cut] == plain[cut], cut
    keys, nul = ids.encoded(np.array([2, 3, 4], dtype=np.int64))  # a checkpoint's rows, then the list's
    assert keys.tolist() == ["é".encode(), b"c", b"d"] and not nul
    ids.extend(["tail\0"])
    keys, nul = ids.encoded(np.array([3, 7], dtype=np.int64))
    assert keys.tolist() == [b"c", b"tail"] and nul  # the NUL a fixed-width array drops is reported


def test_a_writer_closing_far_past_its_checkpoint_saves_one(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A writer that closes with at least ``SAVE_MIN_ROWS`` rows (and a 32nd of the covered
    ones) after its checkpoint saves a new one, so the next open replays none of them; fewer rows,
    a reader, or a checkpoint that cannot be written (a full disk) change nothing else: the store
    still closes and lets go of its folder."""
    from soulpass.vectors import rows as rows_mod
    from soulpass.vectors.rows import RowStore

    monkeypatch.setattr(rows_mod, "SAVE_MIN_ROWS", 8)
    data = clustered(60)
    folder = tmp_path / "v"
    store = RowStore(folder, DIM)
    store.append([f"a{n}" for n in range(40)], data[:40])  # a checkpoint of rows [0, 40)
    store.append([f"b{n}" for n in range(7)], data[40:47])  # 7 rows after it: fewer than 8
    store.close()
    assert store._checkpoint is not None and store._checkpoint[2] == 40

    reader_of = RowStore(folder, DIM)  # the writer now
    reader = RowStore(folder, DIM)
    assert reader.read_only
    reader_of.append(["c0"], data[47:48])  # 8 rows after the checkpoint
    reader.close()  # a reader never writes one
    assert not (folder / "ids-0-48.keys.npy").exists()

    def full_disk() -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(reader_of, "_save_checkpoint", full_disk)
    reader_of.close()  # the checkpoint fails: closed all the same, the folder let go
    writer = RowStore(folder, DIM)
    assert not writer.read_only and writer.rows == 48
    writer.close()  # this one saves it
    assert (folder / "ids-0-48.keys.npy").exists() and not (folder / "ids-0-40.keys.npy").exists()
    again = RowStore(folder, DIM)
    assert again._checkpoint is not None and again._checkpoint[2] == 48 and len(again.ids._head) == 48
    assert again.rows_for(["a3", "b6", "c0"]) == {"a3": 3, "b6": 46, "c0": 47}
    again.close()


def test_row_store_opens_from_its_checkpoint_and_replays_only_the_row_log_after_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A checkpoint that says where in the row log it was taken gives the rows it covers (their ids
    decoded when asked for); only later frames are replayed, kills of its rows included. The state
    is the one a full replay gives; a damaged note, changed arrays or a row log that does not follow
    on fall back to replaying it all."""
    from soulpass.vectors import rows as rows_mod
    from soulpass.vectors.rows import RowStore

    monkeypatch.setattr(rows_mod, "SAVE_MIN_ROWS", 8)
    data = clustered(20)
    folder = tmp_path / "v"
    store = RowStore(folder, DIM)
    store.append([f"id-{n}" for n in range(9)] + ["ü-9"], data[:10])  # the checkpoint of rows [0, 10)
    store.append(["id-3", "new"], data[10:12])  # kills row 3 (in the checkpoint) after it
    store.forget(["id-5", "new"])
    full = (list(store.ids), store.live_mask().tolist(), store.live_count, dict(store.row_of))
    store.close()
    assert full[0][:6] == ["id-0", "id-1", "id-2", None, "id-4", None] and full[0][9:] == ["ü-9", "id-3", None]

    def state(store: RowStore) -> tuple[list[str | None], list[bool], int, dict[str, int]]:
        return list(store.ids), store.live_mask().tolist(), store.live_count, dict(store.row_of)

    again = RowStore(folder, DIM)
    assert again.ids[9] == "ü-9" and again.ids[3] is None and again.ids[-1] is None
    assert len(again.ids._head) == 10, "the rows of the checkpoint came from its arrays"
    assert state(again) == full
    again.append(["id-0", "later"], data[12:14])  # writes go on from there
    full = state(again)
    again.close()
    assert state(RowStore(folder, DIM)) == full

    note = folder / "ids-0-10.at.json"
    saved = note.read_bytes()
    for damage in (b"{not json", saved.replace(b'"crc32": ', b'"crc32": 1')):
        note.write_bytes(damage)
        replayed = RowStore(folder, DIM)
        assert len(replayed.ids._head) == 0 and state(replayed) == full
        replayed.close()
    at = json.loads(saved)
    keys, rows = np.load(folder / "ids-0-10.keys.npy"), np.load(folder / "ids-0-10.rows.npy")
    row_log = (folder / "journal-0.log").read_bytes()  # the row log keeps its old file name and key
    for end in (at["journal_end"] - 3, at["journal_end"] + 5):  # vouched for, yet not where a frame starts
        note.write_bytes(json.dumps({"journal_end": end, "crc32": rows_mod._crc(keys, rows, end)}).encode())
        replayed = RowStore(folder, DIM)
        assert len(replayed.ids._head) == 0 and state(replayed) == full
        replayed.close()
        assert (folder / "journal-0.log").read_bytes() == row_log, "the row log is never cut short"


def test_huge_copy_holds_the_files_bytes_where_the_kernel_gives_huge_pages(tmp_path: Path,
                                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    from soulpass.vectors import os_memory as base

    path = tmp_path / "graph.bin"
    path.write_bytes(bytes(range(256)) * 40_000)  # ~10 MB
    assert base.huge_copy(path) is None  # under HUGE_COPY_BYTES: mapped from the file as before
    monkeypatch.setattr(base, "HUGE_COPY_BYTES", 1 << 20)
    copy = base.huge_copy(path)
    if not base.huge_pages_on_request():
        assert copy is None
        return
    assert copy is not None and copy[:] == path.read_bytes()
    assert base.huge_copy(tmp_path / "gone.bin") is None


@pytest.mark.skipif(not HAS_USEARCH, reason="usearch is not installed")
@pytest.mark.parametrize("copied", [False, True], ids=["file", "huge-pages"])
def test_a_graph_opened_memory_mapped_takes_new_rows(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                     copied: bool) -> None:
    """The saved graph is memory-mapped on open (read-only), from the file or, a large one, from its
    copy in huge pages (the threshold lowered here); the first seal after it copies it into memory,
    adds the tail and saves it, and a later open finds every row."""
    from soulpass.vectors import os_memory as base

    if copied:
        if not base.huge_pages_on_request():
            pytest.skip("this kernel gives no transparent huge pages on request: graphs map their files")
        monkeypatch.setattr(base, "HUGE_COPY_BYTES", 1)
    folder = tmp_path / "v"
    data = clustered(1200)
    index = _open_hnsw_graph(folder)
    index.upsert([f"r{i}" for i in range(600)], data[:600])
    index.close()
    index = _open_hnsw_graph(folder)
    assert index.search(data[5], 1)[0][0] == "r5"
    assert isinstance(index, HnswIndex) and index._viewed
    assert hasattr(index._graph, "soulpass_copy") == copied
    index.upsert([f"r{i}" for i in range(600, 1200)], data[600:])  # sealed into the graph
    assert not index._viewed and index._graph_rows == 1200
    assert index.search(data[1100], 1)[0][0] == "r1100" and index.search(data[5], 1)[0][0] == "r5"
    index.close()
    index = _open_hnsw_graph(folder)
    assert [index.search(data[i], 1)[0][0] for i in (7, 700, 1199)] == ["r7", "r700", "r1199"]
    assert isinstance(index, HnswIndex) and index._viewed and index._graph_rows == 1200
    index.close()


@pytest.mark.skipif(not HAS_USEARCH, reason="usearch is not installed")
def test_a_first_search_is_answered_from_the_saved_sign_bits(tmp_path: Path) -> None:
    """A handle's first unfiltered search ranks the rows by their saved sign bits and leaves the
    graph unloaded (a one-question process imports no usearch); the next search loads the graph.
    Both re-score exactly, and the sign-bit answer finds at least what the graph finds."""
    folder, dim = tmp_path / "v", 128
    data = clustered(3000, dim=dim)
    ids = [f"r{i}" for i in range(len(data))]
    index = _open_hnsw_b1(folder, dim=dim)
    assert isinstance(index, HnswIndex)
    index.upsert(ids, data)
    index.delete(["r5"])
    index.prepare_masked(lambda rows: np.ones(rows.rows, dtype=np.bool_))  # packs the sign bits; kept on close
    index.close()
    assert list(folder.glob("signs-*.b1")) and list(folder.glob("graph-*.usearch"))

    queries = clustered(20, dim=dim, sample_seed=9)
    cold_recall: list[float] = []
    graph_recall: list[float] = []
    for query in queries:
        want = set(exact_top(data, ids, query, 10, among=set(ids) - {"r5"}))
        index = _open_hnsw_b1(folder, dim=dim)
        assert isinstance(index, HnswIndex)
        cold = index.search(query, 10)
        assert index._graph is None, "the first search leaves the graph unloaded"
        warm = index.search(query, 10)
        assert index._graph is not None, "the second loads it"
        index.close()
        assert all(score <= 1.0001 for _, score in cold) and "r5" not in {i for i, _ in cold}
        cold_recall.append(len({i for i, _ in cold} & want) / 10)
        graph_recall.append(len({i for i, _ in warm} & want) / 10)
    assert np.mean(cold_recall) >= np.mean(graph_recall) - 0.01 and np.mean(cold_recall) >= 0.9

    script = ("import sys, numpy as np\n"
              "from soulpass.vectors import HnswIndex\n"
              f"index = HnswIndex({str(folder)!r}, model_id={MODEL!r}, dim={dim}, ann_threshold=64, seal_rows=48,"
              " exact_allowed=8, quantization='b1')\n"
              f"hits = index.search(np.load({str(tmp_path / 'q.npy')!r}), 3)\n"
              "print(hits[0][0], 'usearch' in sys.modules, 'onnxruntime' in sys.modules)\n")
    np.save(tmp_path / "q.npy", data[7])
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["r7", "False", "False"]


def _mapped_kib(path: Path) -> int:
    """Resident KiB of this process's mappings of ``path`` (/proc/self/smaps)."""
    total, inside = 0, False
    for line in Path("/proc/self/smaps").read_text().splitlines():
        fields = line.split()
        if fields and "-" in fields[0] and len(fields) >= 5:  # a mapping's header line
            inside = fields[-1] == str(path)
        elif inside and fields[:1] == ["Rss:"]:
            total += int(fields[1])
    return total


@pytest.mark.skipif(not Path("/proc/self/smaps").exists(), reason="needs Linux's /proc/self/smaps")
def test_populate_maps_every_page_of_a_file_mapping(tmp_path: Path) -> None:
    """``base.populate`` faults a file mapping's pages in at once (an array's, or every mapping of a
    file another library made), so searches do not fault their rows in one by one."""
    from soulpass.vectors.os_memory import populate

    path, other = tmp_path / "rows.f32", tmp_path / "graph.bin"
    np.ones((2048, 1024), dtype=np.float32).tofile(path)  # 8 MiB each
    np.ones((2048, 1024), dtype=np.float32).tofile(other)
    mapped = np.memmap(path, dtype=np.float32, mode="r", shape=(2048, 1024)).view(np.ndarray)
    elsewhere = np.memmap(other, dtype=np.float32, mode="r", shape=(2048, 1024))  # found by its file name
    assert _mapped_kib(path) < 1024 and _mapped_kib(other) < 1024
    assert populate(mapped, other)
    assert _mapped_kib(path) >= 8 * 1024 * 0.95 and _mapped_kib(other) >= 8 * 1024 * 0.95
    assert not populate(np.zeros((0, 4), dtype=np.float32)) and not populate(path=tmp_path / "unmapped")
    del elsewhere


@pytest.mark.parametrize("backend", ["exact", "hnsw", "hnsw-graph"])
def test_cosines_after_a_search_take_its_scores_and_see_rows_added_since(tmp_path: Path, backend: str) -> None:
    """A search over every row keeps their scores for its query; the cosines of candidates asked
    next with the same vector come from them, exactly as computed afresh, and rows added since (or
    another query) are computed again."""
    index = OPENERS[backend](tmp_path / "v")
    rng = np.random.default_rng(7)
    vectors = rng.normal(size=(600, DIM)).astype(np.float32)
    ids = [f"r{i}" for i in range(600)]
    index.upsert(ids, vectors)
    unit = vectors / np.linalg.norm(vectors, axis=1, keepdims=True)
    query = rng.normal(size=DIM).astype(np.float32)
    q = query / np.linalg.norm(query)
    index.search(query, 5)
    assert isinstance(index, ScoresRows)
    got = cosines(index, query, ids[:40])
    np.testing.assert_allclose([got[i] for i in ids[:40]], unit[:40] @ q, rtol=1e-5, atol=1e-6)
    added = rng.normal(size=(1, DIM)).astype(np.float32)
    index.upsert(["new"], added)
    got = cosines(index, query, ["new", "r1"])
    np.testing.assert_allclose(got["new"], float(added[0] @ q / np.linalg.norm(added[0])), rtol=1e-5)
    other = rng.normal(size=DIM).astype(np.float32)
    got = cosines(index, other, ids[:3])
    np.testing.assert_allclose([got[i] for i in ids[:3]], unit[:3] @ (other / np.linalg.norm(other)), rtol=1e-5,
                               atol=1e-6)
