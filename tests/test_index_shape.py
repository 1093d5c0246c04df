"""The index's shape holds (ADR 0008): the search orchestrator knows few index modules, abilities
are declared rather than probed, and nothing outside the index names an index file."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from soulpass.vectors import ExactIndex, HnswIndex
from soulpass.vectors.abilities import abilities_of

SRC = Path(__file__).resolve().parents[1] / "src" / "soulpass"
ORCHESTRATOR_INDEX_IMPORTS = 8


def _index_modules_imported(path: Path) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text("utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("soulpass.index"):
            found.add(node.module)
    return found


def test_the_search_orchestrator_imports_at_most_eight_index_modules() -> None:
    imported = _index_modules_imported(SRC / "index" / "search.py")
    assert len(imported) <= ORCHESTRATOR_INDEX_IMPORTS, sorted(imported)
    assert not {m for m in imported if m.startswith(("soulpass.index.pg", "soulpass.vectors"))}, (
        "the orchestrator knows no backend")


def test_no_capability_is_probed_with_getattr_or_hasattr() -> None:
    """An optional ability is a Protocol checked where the index opens, never ``getattr(x, "m", None)``."""
    probe = re.compile(r"\b(getattr|hasattr)\(\s*[\w.]+\s*,\s*\"(cosines|cosine_array|group_best|rebuild_graph|"
                       r"read_only|inner|search_masked|prepare_masked|vectors_of|born|filter_mask)\"")
    found = [f"{p.relative_to(SRC)}:{n}" for p in SRC.rglob("*.py")
             for n, line in enumerate(p.read_text("utf-8").splitlines(), 1) if probe.search(line)]
    assert found == []


def test_no_index_file_is_named_outside_the_index() -> None:
    names = re.compile(r"catalog\.sqlite|\.embedded\.sqlite|catalog-rows\.npz|catalog_path|catalog_file|"
                       r"remove_catalog|VECTORS_DIR")
    found = [f"{p.relative_to(SRC)}:{n}" for p in SRC.rglob("*.py") if not p.is_relative_to(SRC / "index")
             and not p.is_relative_to(SRC / "store")
             for n, line in enumerate(p.read_text("utf-8").splitlines(), 1) if names.search(line)]
    assert found == []


def test_abilities_are_read_from_what_an_index_is(tmp_path: Path) -> None:
    exact = ExactIndex(tmp_path / "e", model_id="m", dim=4)
    got = abilities_of(exact)
    assert got.rows is exact and got.groups is exact and got.masked is exact and got.shared is exact
    assert got.vectors is exact and got.graph is None  # no graph to rebuild in exact search
    exact.close()
    graph = HnswIndex(tmp_path / "h", model_id="m", dim=4)  # usearch is imported only for a graph
    assert abilities_of(graph).graph is graph
    graph.close()
    assert abilities_of(object()) == abilities_of(None)  # nothing declared: every ability None
