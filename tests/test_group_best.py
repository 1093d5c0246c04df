"""One product over every vector row gives each record's best cosine (its own vector's and its
passages'): the nearest records and any candidate's cosine are read off it, the same as the
row-by-row path finds them."""

from __future__ import annotations

import importlib.util
import os
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest

import soulpass
from soulpass import Committed
from soulpass.index import passages
from soulpass.index.dense import LocalDense
from soulpass.vectors import ExactIndex, HnswIndex
from soulpass.vectors.base import IndexMeta
from soulpass.vectors.groups import GroupBest, RowGroups
from soulpass.vectors.shared import open_shared

DIM = 16
# Looked up, not imported: ``import usearch`` before ONNX Runtime segfaults the process at the later
# ``import onnxruntime``; the index loads them in the safe order (``hnsw._usearch_index_class``).
NO_USEARCH = pytest.mark.skipif(importlib.util.find_spec("usearch") is None,
                                reason="usearch is not installed (pip install 'soulpass[search]')")
T0 = datetime(2025, 3, 1, 9, 0, tzinfo=UTC)


def unit(x: npt.NDArray[np.float32]) -> npt.NDArray[np.float32]:
    return (x / np.linalg.norm(x, axis=-1, keepdims=True)).astype(np.float32)


def brute_best(vectors: dict[str, npt.NDArray[np.float32]], query: npt.NDArray[np.float32]) -> dict[str, float]:
    """Each record's best cosine over its own and its passages' vectors, one by one."""
    best: dict[str, float] = {}
    for vid, v in vectors.items():
        rid = passages.record_of(vid)
        score = float(np.float32(unit(v) @ unit(query)))
        best[rid] = max(best.get(rid, -2.0), score)
    return best


def test_row_groups_read_off_the_best_per_group_and_skip_dead_rows() -> None:
    groups = RowGroups(0, passages.record_of)
    groups.extend(["a", "a#0", "b", None, "c#0"])
    groups.extend(["b#0", "a#1"])
    assert groups.keys == [None, "a", "b", "c"] and groups.rows == 7
    rows = np.array([0, 1, 2, 4, 5, 6])  # row 3 is dead
    found = groups.best(rows, np.array([0.1, 0.5, 0.3, 0.3, 0.2, 0.4], dtype=np.float32))
    assert found.of(["a", "b", "c", "zz"]) == pytest.approx({"a": 0.5, "b": 0.3, "c": 0.3})
    assert found.top(10) == ["a", "b", "c"]  # b and c tie: the first grouped first
    assert found.top(1) == ["a"] and found.top(0) == []
    only_b = groups.best(np.array([2]), np.array([0.7], dtype=np.float32))  # the others' rows all dead
    assert only_b.top(5) == ["b"] and only_b.of(["a", "b"]) == pytest.approx({"b": 0.7})
    assert groups.best(np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float32)).top(3) == []
    groups.extend(["d"])  # a group made after ``found`` was: not scored there
    assert found.of(["d", "a"]) == pytest.approx({"a": 0.5})


@pytest.mark.parametrize("backend", ["exact", pytest.param("hnsw", marks=NO_USEARCH)])
def test_group_best_matches_the_records_best_cosines_as_rows_change(tmp_path: Path, backend: str) -> None:
    index = (ExactIndex if backend == "exact" else HnswIndex)(tmp_path / "v", model_id="m", dim=DIM)
    rng = np.random.default_rng(3)
    vectors: dict[str, npt.NDArray[np.float32]] = {}
    for r in range(60):
        vectors[f"r{r}"] = rng.normal(size=DIM).astype(np.float32)
        for n in range(r % 3):
            vectors[passages.passage_id(f"r{r}", n)] = rng.normal(size=DIM).astype(np.float32)
    index.upsert(list(vectors), np.stack(list(vectors.values())))
    query = rng.normal(size=DIM).astype(np.float32)
    assert index.group_best(query, passages.record_of, scan=False) is None  # nothing kept yet: nothing scored

    def check() -> GroupBest:
        found = index.group_best(query, passages.record_of)
        assert found is not None
        expected = brute_best(vectors, query)
        got = found.of(sorted(expected))
        assert got.keys() == expected.keys()
        np.testing.assert_allclose([got[i] for i in expected], list(expected.values()), rtol=1e-5, atol=1e-6)
        order = sorted(expected, key=lambda i: -expected[i])
        assert found.top(10) == order[:10]
        return found

    first = check()
    assert index.group_best(query, passages.record_of, scan=False) is first  # kept for this query
    index.delete(["r5#0", "r7"])  # a passage and a record's own vector die
    del vectors["r5#0"], vectors["r7"]
    assert check() is not first
    extra = {"r100": rng.normal(size=DIM).astype(np.float32), "r2#0": rng.normal(size=DIM).astype(np.float32)}
    index.upsert(list(extra), np.stack(list(extra.values())))  # rows added; r2's passage replaced
    vectors.update(extra)
    check()
    other = rng.normal(size=DIM).astype(np.float32)
    assert index.group_best(other, passages.record_of, scan=False) is None  # another query: not kept
    index.close()


@NO_USEARCH
def test_group_best_follows_a_compaction_and_is_none_where_a_graph_answers(tmp_path: Path) -> None:
    rng = np.random.default_rng(5)
    index = ExactIndex(tmp_path / "e", model_id="m", dim=DIM)
    ids = [f"r{i}" for i in range(50)]
    index.upsert(ids, rng.normal(size=(50, DIM)).astype(np.float32))
    query = rng.normal(size=DIM).astype(np.float32)
    assert index.group_best(query, passages.record_of) is not None
    index.delete(ids[:40])
    index._rows.compact()  # a new generation: rows renumbered
    found = index.group_best(query, passages.record_of)
    assert found is not None and sorted(found.of(ids)) == sorted(ids[40:])
    index.close()
    graph = HnswIndex(tmp_path / "g", model_id="m", dim=DIM, ann_threshold=64, seal_rows=48, quantization="f16")
    graph.upsert([f"g{i}" for i in range(200)], rng.normal(size=(200, DIM)).astype(np.float32))
    assert graph.search(query, 5) and graph.group_best(query, passages.record_of) is None  # a graph answers
    graph.close()
    shared = open_shared(tmp_path / "s", IndexMeta(backend="exact", model_id="m", dim=DIM),
                         lambda folder: ExactIndex(folder, model_id="m", dim=DIM))
    shared.upsert(["x", "x#0"], rng.normal(size=(2, DIM)).astype(np.float32))
    groups = shared.abilities.groups  # an exact index has the ability; a Chroma one would not
    assert groups is not None
    got = groups.group_best(query, passages.record_of)
    assert got is not None and got.top(5) == ["x"]
    shared.close()


def test_a_search_by_group_best_returns_what_the_row_by_row_path_does(tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """Same hits, same order, the same cosines, with the real model and an account of turns of
    several sentences (their passages have vectors of their own)."""
    pytest.importorskip("onnxruntime", reason="the embed extra is not installed: no model to search with")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(os, "fsync", lambda fd: None)
    acct = soulpass.open(tmp_path).account("ann", create=True)
    topics = ["the garden", "my sister's wedding", "a car accident", "the new puppy", "a trip to Lisbon",
              "the band's concert", "a broken laptop", "learning to swim"]
    for s in range(4):
        sb = acct.create_sandbox(f"chat{s}")
        for i in range(12):
            topic = topics[(s * 3 + i) % len(topics)]
            text = (f"Yesterday I thought about {topic}. It took most of the day. " if i % 2
                    else f"Any news about {topic}?")
            sb.write_turn({"kind": "turn_user", "text_excerpt": text, "agent": "ann" if i % 2 else "bob",
                           "created_at": T0 + timedelta(days=s, minutes=i)})
        assert isinstance(sb.archive(), Committed)
    questions = ["what happened with the car", "when is the wedding", "how is the puppy", "Lisbon trip",
                 "did the laptop break", "swimming lessons", "concert tickets"]
    grouped = {q: [(h.id, h.parts.get("dense"), h.score) for h in acct.search(q, k=8)] for q in questions}
    dense = acct.index().dense
    assert isinstance(dense, LocalDense) and dense._groups is not None
    calls: list[bool] = []
    groups = dense._groups

    class Counting:
        def group_best(self, vector: object, group_of: Any, *, scan: bool = True) -> GroupBest | None:
            found = groups.group_best(vector, group_of, scan=scan)
            calls.append(found is not None)
            return found
    monkeypatch.setattr(dense, "_groups", Counting())
    acct.index().search("something else entirely", k=8)  # the hybrid search alone (no tagged statements' lookup)
    assert calls and all(calls)  # the grouped path was the one taken
    monkeypatch.setattr(dense, "_groups", None)  # the row-by-row path: cosines of the candidates' rows
    for q in questions:
        assert [(h.id, h.parts.get("dense"), h.score) for h in acct.search(q, k=8)] == grouped[q]
    acct.close()
