"""Layer order of DESIGN §9: records/ids/errors -> store -> vectors -> index/embed ->
sessions/consolidation -> engine -> cli/server/mcp/worker. Imports point one way (relative, lazy and
type-only imports count), no two modules import each other even through others (a type-only import
between two modules of one package excepted: see ``import_graph``), nothing outside ``store/``
imports a backend (files, PostgreSQL) or joins paths into an account, nothing outside ``index/``
reaches into an index folder, consolidation plans without the index, the vector store stands alone
(of the store it takes only ``store.fsio``), and only entry points read the
environment."""

from __future__ import annotations

import ast
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src" / "soulpass"

# Named layers, bottom to top: a module may import its own layer and the layers below it. Each
# top-level module or package of src/soulpass is listed by name ("" is the package root itself).
LAYERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("foundation", ("errors", "ids", "sentences", "records", "prose", "side_threads")),
    ("store", ("store",)),
    # The vector store (ids -> unit vectors in a folder, nearest search): no accounts, records or catalogs.
    ("vectors", ("vectors",)),
    ("index", ("index", "embed")),
    # retrieval: reading questions and standing instructions, and plans over the index's public search.
    ("sessions", ("sessions", "consolidation", "retrieval")),
    # The library API, one package: soulpass.open -> Account -> Sandbox, Journal, forget, editing,
    # deleting and listing (its modules may name each other's classes in type hints: see
    # ``import_graph``); and the pool of open handles a server keeps.
    ("engine", ("engine", "pool")),
    # Built on the library API only: integrity and backup tools, importers, the seeds' facades
    # (MSP, MemoryManager), the agent tiers and the benchmarks.
    ("library", ("integrity", "backup", "passport", "migrate", "mira", "importers", "facades", "agent", "bench")),
    ("package", ("",)),  # soulpass/__init__: the public names
    # ... and the framework adapters (LangGraph, OpenAI Agents SDK, Pydantic AI), over the library API.
    ("entry points", ("cli", "server", "mcp", "worker", "integrations")),
)
LAYER_NAMES = tuple(name for name, _ in LAYERS)
ENTRY_POINTS = ("soulpass.cli", "soulpass.server", "soulpass.mcp", "soulpass.worker")
FILES_BACKEND = "soulpass.store.files"
BACKENDS = (FILES_BACKEND, "soulpass.store.postgres")  # only soulpass.store names them
VECTORS = "soulpass.vectors"
VECTORS_MAY_IMPORT = ("soulpass.store.fsio",)  # besides itself and the foundation layer


def layer_of(module: str) -> int:
    """The index in LAYERS of a ``soulpass`` module, by its top-level name."""
    parts = module.split(".")
    assert parts[0] == "soulpass", module
    top = parts[1] if len(parts) > 1 else ""
    for n, (_, tops) in enumerate(LAYERS):
        if top in tops:
            return n
    raise AssertionError(f"soulpass.{top} is in no layer: give it a named place in LAYERS in this test")


def modules() -> list[tuple[str, Path]]:
    out = []
    for path in sorted(SRC.rglob("*.py")):
        parts = list(path.relative_to(SRC.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out.append((".".join(parts), path))
    return out


MODULES = modules()
KNOWN = frozenset(m for m, _ in MODULES)
IDS = [m for m, _ in MODULES]


@dataclass(frozen=True)
class Import:
    line: int
    target: str  # a soulpass module (the deepest one the statement names)
    type_only: bool = False  # under ``if TYPE_CHECKING:``: a name for type hints, never imported at run time


def _resolve(name: str, known: frozenset[str]) -> str:
    """The deepest known module that ``name`` starts with (``soulpass.x.y.Name`` -> ``soulpass.x.y``)."""
    parts = name.split(".")
    while len(parts) > 1 and ".".join(parts) not in known:
        parts.pop()
    return ".".join(parts)


def imports_of(module: str, path: Path, known: frozenset[str] = KNOWN) -> list[Import]:
    """Every ``soulpass`` import of a module: absolute and relative, top-level, lazy and type-only."""
    is_package = path.name == "__init__.py"
    tree = ast.parse(path.read_text(encoding="utf-8"))
    typing_only = {id(n) for block in ast.walk(tree) if isinstance(block, ast.If) and _is_type_checking(block.test)
                   for stmt in block.body for n in ast.walk(stmt)}
    found: list[Import] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [Import(node.lineno, _resolve(a.name, known), id(node) in typing_only) for a in node.names
                      if a.name.split(".")[0] == "soulpass"]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                package = module.split(".") if is_package else module.split(".")[:-1]
                base = ".".join(package[: len(package) - node.level + 1] + ([node.module] if node.module else []))
            else:
                base = node.module or ""
            if base.split(".")[0] != "soulpass":
                continue
            found += [Import(node.lineno, _resolve(f"{base}.{a.name}", known), id(node) in typing_only)
                      for a in node.names]
    return found


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _package(module: str) -> str:
    """The top-level package or module of ``soulpass`` a module belongs to (``soulpass.engine``)."""
    return ".".join(module.split(".")[:2])


def import_graph(sources: Iterable[tuple[str, Path]], known: frozenset[str] = KNOWN) -> dict[str, set[str]]:
    """Who imports whom. A type-only import between two modules of one package is left out: the
    modules of a package (``soulpass.engine``: Account calls forget, forget takes an Account) may
    name each other's classes in type hints, which never import anything at run time; across
    packages, and for any import that runs, a cycle is a cycle."""
    return {m: {i.target for i in imports_of(m, p, known)
                if i.target != m and not (i.type_only and _package(i.target) == _package(m))}
            for m, p in sources}


def find_cycles(graph: Mapping[str, set[str]]) -> list[list[str]]:
    """One shortest cycle per group of modules that import each other (Tarjan's strongly connected
    components), each as ``[a, b, ..., a]``."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups: list[set[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = set()
            while True:
                w = stack.pop()
                on_stack.discard(w)
                group.add(w)
                if w == v:
                    break
            if len(group) > 1:
                groups.append(group)

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return [_shortest_cycle(graph, group) for group in groups]


def _shortest_cycle(graph: Mapping[str, set[str]], group: set[str]) -> list[str]:
    start = min(group)
    paths = {start: [start]}
    frontier = [start]
    while frontier:
        nxt = []
        for v in frontier:
            for w in sorted(graph.get(v, set()) & group):
                if w == start:
                    return [*paths[v], start]
                if w not in paths:
                    paths[w] = [*paths[v], w]
                    nxt.append(w)
        frontier = nxt
    raise AssertionError(f"no cycle through {start}")  # pragma: no cover - a component of size > 1 has one


ACCOUNT_FOLDERS = frozenset({"accounts", "sandboxes", "history", "core", "txn", "index", "log"})
_FOLDER_PREFIX = re.compile(r"^(?:\./)?(?:sandboxes|history|core|txn|log|index|accounts)/")


def _docstrings(tree: ast.AST) -> set[int]:
    return {id(n.body[0].value) for n in ast.walk(tree)
            if isinstance(n, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef)
            and n.body and isinstance(n.body[0], ast.Expr) and isinstance(n.body[0].value, ast.Constant)}


def account_paths(source: str) -> list[str]:
    """Where code builds a path into an account: ``<x>.path / ...`` joins, ``/ "sandboxes"``-style
    joins with an account folder name, and string literals like ``"history/..."``."""
    tree = ast.parse(source)
    docstrings = _docstrings(tree)
    hits = []
    for node in ast.walk(tree):
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div):
            if _is_path_attr(node.left):
                hits.append(f"line {node.lineno}: joins onto .path")
            hits += [f"line {node.lineno}: joins {side.value!r}" for side in (node.left, node.right)
                     if isinstance(side, ast.Constant) and side.value in ACCOUNT_FOLDERS]
        elif isinstance(node, ast.Call) and any(_is_path_attr(a) for a in _path_parts(node)):
            hits.append(f"line {node.lineno}: builds a path from .path")
        elif (isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings
              and _FOLDER_PREFIX.match(node.value)):
            hits.append(f"line {node.lineno}: literal {node.value!r}")
    return hits


def _path_parts(call: ast.Call) -> list[ast.expr]:
    """What ``Path(...)``, ``os.path.join(...)`` or ``<x>.joinpath(...)`` builds a path from."""
    func = call.func
    if isinstance(func, ast.Name) and func.id in ("Path", "PurePath"):
        return list(call.args)
    if isinstance(func, ast.Attribute) and func.attr == "join" and ast.unparse(func.value) == "os.path":
        return list(call.args)
    if isinstance(func, ast.Attribute) and func.attr == "joinpath":
        return [func.value]
    return []


def _is_path_attr(node: ast.expr) -> bool:
    return isinstance(node, ast.Attribute) and node.attr == "path"


# Only soulpass.index knows what is inside an index folder (the store only says where it is). A
# path into one, outside index/ and store/, is any of: a string literal naming an index file, an
# import of the names the index builds its paths with, or the folder itself taken from the store's
# IndexLocation (``index_location().folder``) or the old ``index_dir()``.
INDEX_FILE_NAMES = ("catalog.sqlite", ".embedded.sqlite", ".catalog-rows.npz", ".columns.npz", "/vectors/")
INDEX_PATH_NAMES = frozenset({"CATALOG_NAME", "VECTORS_DIR", "catalog_path", "carried_name",
                              "account_vectors_folder"})


def index_paths(module: str, source: str) -> list[str]:
    """Where a module outside ``index/`` and ``store/`` reaches into an index folder (see above)."""
    if module.startswith(("soulpass.index.", "soulpass.store.")) or module in ("soulpass.index", "soulpass.store"):
        return []
    tree = ast.parse(source)
    docstrings = _docstrings(tree)
    hits = []
    for node in ast.walk(tree):
        if (isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings
                and any(name in node.value for name in INDEX_FILE_NAMES)):
            hits.append(f"line {node.lineno}: literal {node.value!r}")
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("soulpass.index"):
            hits += [f"line {node.lineno}: imports {a.name}" for a in node.names if a.name in INDEX_PATH_NAMES]
        elif isinstance(node, ast.Attribute) and node.attr == "index_dir":
            hits.append(f"line {node.lineno}: asks for index_dir")
        elif (isinstance(node, ast.Attribute) and node.attr == "folder" and isinstance(node.value, ast.Call)
              and isinstance(node.value.func, ast.Attribute) and node.value.func.attr == "index_location"):
            hits.append(f"line {node.lineno}: takes the index folder (index_location().folder)")
    return hits


# --- the rules over the real tree -----------------------------------------------------------------


def test_every_top_level_module_has_a_named_layer() -> None:
    tops = {p.stem for p in SRC.glob("*.py") if p.stem != "__init__"} | {p.name for p in SRC.iterdir()
                                                                        if (p / "__init__.py").exists()}
    placed = {top for _, names in LAYERS for top in names}
    assert not tops - placed, f"top-level modules in no layer: {sorted(tops - placed)}"


@pytest.mark.parametrize(("module", "path"), MODULES, ids=IDS)
def test_imports_point_one_way(module: str, path: Path) -> None:
    mine = layer_of(module)
    bad = [f"{path.name}:{i.line} imports {i.target} ({LAYER_NAMES[layer_of(i.target)]} is above "
           f"{LAYER_NAMES[mine]})" for i in imports_of(module, path) if layer_of(i.target) > mine]
    assert not bad, "\n".join(bad)


def test_no_import_cycles() -> None:
    cycles = find_cycles(import_graph(MODULES))
    assert not cycles, "import cycles:\n" + "\n".join(" -> ".join(c) for c in cycles)


def backend_imports(module: str, path: Path, known: frozenset[str] = KNOWN) -> list[str]:
    """The imports of a store backend (``store.files``, ``store.postgres``) by a module outside ``store/``."""
    if module == "soulpass.store" or module.startswith("soulpass.store."):
        return []
    return [f"{path.name}:{i.line} imports {i.target}" for i in imports_of(module, path, known)
            if any(i.target == b or i.target.startswith(b + ".") for b in BACKENDS)]


@pytest.mark.parametrize(("module", "path"), MODULES, ids=IDS)
def test_only_store_imports_a_backend(module: str, path: Path) -> None:
    bad = backend_imports(module, path)
    assert not bad, ("only soulpass.store may import a backend (ask soulpass.store.location or the "
                     "contract instead):\n" + "\n".join(bad))


def index_imports(module: str, path: Path, known: frozenset[str] = KNOWN) -> list[str]:
    """The imports of ``soulpass.index`` by a consolidation module (a commit is planned on a snapshot)."""
    if not (module == "soulpass.consolidation" or module.startswith("soulpass.consolidation.")):
        return []
    return [f"{path.name}:{i.line} imports {i.target}" for i in imports_of(module, path, known)
            if i.target == "soulpass.index" or i.target.startswith("soulpass.index.")]


@pytest.mark.parametrize(("module", "path"), MODULES, ids=IDS)
def test_consolidation_plans_without_the_index(module: str, path: Path) -> None:
    bad = index_imports(module, path)
    assert not bad, ("consolidation may not import the index: derived state never decides what is "
                     "committed (read the Snapshot):\n" + "\n".join(bad))


def vector_store_imports(module: str, path: Path, known: frozenset[str] = KNOWN) -> list[str]:
    """The imports by a ``soulpass.vectors`` module of anything but the vector store itself, the
    foundation layer and ``VECTORS_MAY_IMPORT``."""
    if not (module == VECTORS or module.startswith(VECTORS + ".")):
        return []
    foundation = LAYER_NAMES.index("foundation")
    return [f"{path.name}:{i.line} imports {i.target}" for i in imports_of(module, path, known)
            if not (i.target == VECTORS or i.target.startswith(VECTORS + ".") or i.target in VECTORS_MAY_IMPORT
                    or layer_of(i.target) == foundation)]


@pytest.mark.parametrize(("module", "path"), MODULES, ids=IDS)
def test_the_vector_store_stands_alone(module: str, path: Path) -> None:
    bad = vector_store_imports(module, path)
    assert not bad, ("soulpass.vectors knows no accounts, records, catalogs or store backends (it may "
                     f"import only itself, the foundation and {', '.join(VECTORS_MAY_IMPORT)}):\n" + "\n".join(bad))


@pytest.mark.parametrize(("module", "path"), MODULES, ids=IDS)
def test_no_account_paths_outside_store(module: str, path: Path) -> None:
    if module == "soulpass.store" or module.startswith("soulpass.store."):
        return
    hits = account_paths(path.read_text(encoding="utf-8"))
    assert not hits, (f"{module} builds paths into an account (only store/ knows the layout; use the "
                      "library API):\n" + "\n".join(hits))


@pytest.mark.parametrize(("module", "path"), MODULES, ids=IDS)
def test_no_paths_into_an_index_folder_outside_index(module: str, path: Path) -> None:
    hits = index_paths(module, path.read_text(encoding="utf-8"))
    assert not hits, (f"{module} reaches into an index folder (only soulpass.index knows its files; "
                      "ask an index function):\n" + "\n".join(hits))


@pytest.mark.parametrize(("module", "path"), MODULES, ids=IDS)
def test_only_entry_points_read_environment(module: str, path: Path) -> None:
    if module.startswith(ENTRY_POINTS):
        return
    tree = ast.parse(path.read_text(encoding="utf-8"))
    hits = [n.lineno for n in ast.walk(tree)
            if isinstance(n, ast.Attribute) and n.attr in ("environ", "getenv")]
    assert not hits, f"{module} reads the environment at lines {hits}; only entry points may"


# --- the checker fails on synthetic violations ------------------------------------------------------


def _write(folder: Path, name: str, text: str) -> Path:
    path = folder / name
    path.write_text(text, encoding="utf-8")
    return path


def test_layer_map_catches_a_violation(tmp_path: Path) -> None:
    bad = _write(tmp_path, "bad.py", "from soulpass.engine import Soulpass\n")
    assert [layer_of(i.target) for i in imports_of("soulpass.store.bad", bad)] == [LAYER_NAMES.index("engine")]
    assert layer_of("soulpass.store.bad") == LAYER_NAMES.index("store")


def test_relative_imports_count(tmp_path: Path) -> None:
    bad = _write(tmp_path, "bad.py", "from ..engine import Soulpass\nfrom . import keys\n")
    targets = [i.target for i in imports_of("soulpass.store.bad", bad)]
    assert targets == ["soulpass.engine", "soulpass.store.keys"]
    assert layer_of(targets[0]) > layer_of("soulpass.store.bad")


def test_an_unplaced_top_level_module_fails() -> None:
    with pytest.raises(AssertionError, match=r"soulpass\.newthing is in no layer"):
        layer_of("soulpass.newthing.x")


def test_the_cycle_check_names_the_cycle(tmp_path: Path) -> None:
    a = _write(tmp_path, "a.py", "from soulpass.fake_b import f\n")
    b = _write(tmp_path, "b.py",
               "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from soulpass.fake_c import g\n")
    c = _write(tmp_path, "c.py", "def h():\n    from soulpass.fake_a import x\n")
    d = _write(tmp_path, "d.py", "from soulpass.fake_a import x\n")
    known = frozenset({"soulpass.fake_a", "soulpass.fake_b", "soulpass.fake_c", "soulpass.fake_d"})
    graph = import_graph([("soulpass.fake_a", a), ("soulpass.fake_b", b), ("soulpass.fake_c", c),
                          ("soulpass.fake_d", d)], known)
    assert find_cycles(graph) == [["soulpass.fake_a", "soulpass.fake_b", "soulpass.fake_c", "soulpass.fake_a"]]
    assert find_cycles({"x": {"y"}, "y": set()}) == []


def test_a_type_hint_inside_one_package_is_no_cycle(tmp_path: Path) -> None:
    """Account calls forget (an import that runs), forget names Account in its hints: no cycle; the
    same hint across packages, or an import that runs, still is one."""
    calls = _write(tmp_path, "account.py", "def forget():\n    from soulpass.pkg.forget import forget\n")
    hints = _write(tmp_path, "forget.py", "import typing\nif typing.TYPE_CHECKING:\n"
                                          "    from soulpass.pkg.account import Account\n")
    runs = _write(tmp_path, "runs.py", "from soulpass.pkg.account import Account\n")
    known = frozenset({"soulpass.pkg.account", "soulpass.pkg.forget", "soulpass.other.forget"})
    assert [i.type_only for i in imports_of("soulpass.pkg.forget", hints, known)] == [True]
    same = import_graph([("soulpass.pkg.account", calls), ("soulpass.pkg.forget", hints)], known)
    assert find_cycles(same) == []
    across = import_graph([("soulpass.pkg.account", calls), ("soulpass.other.forget", hints)], known)
    assert across["soulpass.other.forget"] == {"soulpass.pkg.account"}
    running = import_graph([("soulpass.pkg.account", calls), ("soulpass.pkg.forget", runs)], known)
    assert find_cycles(running) == [["soulpass.pkg.account", "soulpass.pkg.forget", "soulpass.pkg.account"]]


def test_the_files_backend_rule_catches_an_import(tmp_path: Path) -> None:
    bad = _write(tmp_path, "bad.py", "from soulpass.store.files.layout import CORE\nimport soulpass.store.files\n")
    known = KNOWN | {"soulpass.store.files", "soulpass.store.files.layout"}
    targets = [i.target for i in imports_of("soulpass.engine", bad, known)]
    assert targets == ["soulpass.store.files.layout", "soulpass.store.files"]
    assert all(t == FILES_BACKEND or t.startswith(FILES_BACKEND + ".") for t in targets)


def test_the_backend_rule_catches_a_postgres_import(tmp_path: Path) -> None:
    bad = _write(tmp_path, "bad.py", "from soulpass.store.postgres.url import masked\n"
                                     "from soulpass.store.location import locate\n")
    known = KNOWN | {"soulpass.store.postgres.url"}
    assert backend_imports("soulpass.cli.bad", bad, known) == ["bad.py:1 imports soulpass.store.postgres.url"]
    assert backend_imports("soulpass.store.bad", bad, known) == []


def test_the_planning_rule_catches_an_index_import(tmp_path: Path) -> None:
    bad = _write(tmp_path, "bad.py", "def f():\n    from soulpass.index.catalog import Catalog\n")
    assert index_imports("soulpass.consolidation.bad", bad) == ["bad.py:2 imports soulpass.index.catalog"]
    assert index_imports("soulpass.engine", bad) == []


@pytest.mark.parametrize("code", [
    "from soulpass.index.tuning import SAVE_MIN_ROWS\n",
    "from soulpass.store.contract import LocalIndex\n",
    "from soulpass.engine import Soulpass\n",
    "from soulpass.consolidation.archive import plan\n",
    "def f():\n    from soulpass.store.postgres.url import masked\n",
    "from ..index import tuning\n",
])
def test_the_vector_store_rule_catches_an_import(tmp_path: Path, code: str) -> None:
    bad = _write(tmp_path, "bad.py", code)
    known = KNOWN | {"soulpass.store.postgres.url"}
    assert vector_store_imports("soulpass.vectors.bad", bad, known)
    assert vector_store_imports("soulpass.index.bad", bad, known) == []


def test_the_vector_store_rule_lets_it_use_fsio_and_the_foundation(tmp_path: Path) -> None:
    ok = _write(tmp_path, "ok.py", "from soulpass.errors import Corrupted\n"
                                   "from soulpass.store.fsio import atomic_write\n"
                                   "from soulpass.vectors.base import VectorIndex\nfrom . import rows\n")
    assert vector_store_imports("soulpass.vectors.ok", ok) == []


@pytest.mark.parametrize("code", [
    "p = folder / 'catalog.sqlite'\n",
    "from soulpass.index.opening import VECTORS_DIR\n",
    "from soulpass.index.carried import carried_name\n",
    "folder = store.index_location().folder\n",
    "folder = acct.store.index_dir()\n",
    "state = folder.with_name(folder.name + '.embedded.sqlite')\n",
])
def test_the_index_path_rule_catches_a_reach_into_an_index_folder(code: str) -> None:
    assert index_paths("soulpass.passport.bad", code)
    assert index_paths("soulpass.index.bad", code) == []


def test_the_index_path_rule_ignores_docstrings_and_the_location_itself() -> None:
    code = ('"""The catalog (catalog.sqlite) lives where the store says."""\n'
            'where = store.index_location()\nfrom soulpass.index.opening import drop_index\n')
    assert index_paths("soulpass.engine", code) == []


@pytest.mark.parametrize("code", [
    "root = store.path / 'index' / 'vectors'\n",
    "p = acct.store.path / rel\n",
    "p = home / 'accounts' / name / 'sandboxes' / sid\n",
    "rel = 'history/' + name\n",
    "rel = f'core/{kind}/x.json'\n",
    "BACKED_UP = ('sandboxes/x',)\n",
    "p = os.path.join(store.path, name)\n",
    "p = Path(acct.store.path, 'x')\n",
    "p = store.path.joinpath('x')\n",
])
def test_the_path_rule_catches_a_join_into_an_account(code: str) -> None:
    assert account_paths(code)


def test_the_path_rule_ignores_docstrings_and_other_paths() -> None:
    code = ('"""Writes core/ and history/."""\n\n'
            'def f(folder):\n    """Reads sandboxes/."""\n    return folder / "x.json"\n')
    assert account_paths(code) == []
