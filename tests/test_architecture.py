"""Layer order of DESIGN §9: records/ids/errors -> store -> index/embed -> sessions/consolidation
-> engine -> cli/server/mcp/worker. Imports point one way; only entry points read the environment."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src" / "soulpass"

LAYERS: list[tuple[int, tuple[str, ...]]] = [
    (0, ("soulpass.errors", "soulpass.ids", "soulpass.records", "soulpass.prose")),
    (1, ("soulpass.store",)),
    (2, ("soulpass.index", "soulpass.embed")),
    (3, ("soulpass.sessions", "soulpass.consolidation")),
    (4, ("soulpass.engine", "soulpass.msp", "soulpass.skynet", "soulpass.bench", "soulpass.agent", "soulpass")),
    (5, ("soulpass.cli", "soulpass.server", "soulpass.mcp", "soulpass.worker")),
]
ENTRY_POINTS = ("soulpass.cli", "soulpass.server", "soulpass.mcp", "soulpass.worker")


def layer_of(module: str) -> int:
    best: tuple[int, int] | None = None  # (prefix length, layer)
    for layer, prefixes in LAYERS:
        for p in prefixes:
            if (module == p or module.startswith(p + ".")) and (best is None or len(p) > best[0]):
                best = (len(p), layer)
    assert best is not None, f"{module} is in no layer: add it to LAYERS in this test"
    return best[1]


def modules() -> list[tuple[str, Path]]:
    out = []
    for path in sorted(SRC.rglob("*.py")):
        rel = path.relative_to(SRC.parent).with_suffix("")
        parts = list(rel.parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out.append((".".join(parts), path))
    return out


def imports_of(module: str, path: Path) -> list[tuple[int, str]]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(node.lineno, a.name) for a in node.names if a.name.split(".")[0] == "soulpass"]
        elif (isinstance(node, ast.ImportFrom) and node.module and node.level == 0
              and node.module.split(".")[0] == "soulpass"):
            found.append((node.lineno, node.module))
    return found


@pytest.mark.parametrize(("module", "path"), modules(), ids=[m for m, _ in modules()])
def test_imports_point_one_way(module: str, path: Path) -> None:
    mine = layer_of(module)
    bad = [f"{path.name}:{line} imports {target} (layer {layer_of(target)} > {mine})"
           for line, target in imports_of(module, path) if layer_of(target) > mine]
    assert not bad, "\n".join(bad)


@pytest.mark.parametrize(("module", "path"), modules(), ids=[m for m, _ in modules()])
def test_only_entry_points_read_environment(module: str, path: Path) -> None:
    if module.startswith(ENTRY_POINTS):
        return
    tree = ast.parse(path.read_text(encoding="utf-8"))
    hits = [n.lineno for n in ast.walk(tree)
            if isinstance(n, ast.Attribute) and n.attr in ("environ", "getenv")]
    assert not hits, f"{module} reads the environment at lines {hits}; only entry points may"


def test_layer_map_catches_a_violation(tmp_path: Path) -> None:
    bad = tmp_path / "bad.py"
    bad.write_text("from soulpass.engine import Soulpass\n", encoding="utf-8")
    assert [layer_of(t) for _, t in imports_of("soulpass.store.bad", bad)] == [4]
    assert layer_of("soulpass.store.bad") == 1
