"""The Mira folder format: a generated folder of 213 Markdown files imports, its duplicate and
pattern reports are right, and it exports back to a valid ``memory_index.json``."""

from __future__ import annotations

import hashlib
import json
import shutil
import uuid
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

import soulpass
from bench_helpers import benchmark_module
from soulpass.cli.main import cli
from soulpass.errors import InvalidInput
from soulpass.importers.mira import ENTRY_KEYS, MIRA_VERSION, export_mira, import_mira
from soulpass.prose import FOLDER_OF_TYPE
from soulpass.records import normalize_text

SUBJECTS = ["Memory", "Curiosity", "Patience", "Silence", "Music", "Routine", "Failure", "Trust", "Humor", "Sleep",
            "Gardening", "Distance", "Mathematics", "Cooking", "Rain", "Grief", "Teaching", "Walking", "Debt", "Maps"]
NOUNS = [
    "lanterns", "harbors", "violins", "glaciers", "tomatoes", "bicycles", "volcanoes", "libraries", "pencils",
    "orchards", "submarines", "deserts", "kites", "cathedrals", "mushrooms", "telescopes", "bridges", "beehives",
    "typewriters", "lighthouses", "carpets", "comets", "anchors", "tulips", "dragons", "microscopes", "saddles",
    "icebergs", "pianos", "ferns", "chimneys", "parrots", "quarries", "mirrors", "tractors", "vineyards",
    "compasses", "hammocks", "tunnels", "pyramids", "scarves", "meteors", "canoes", "walnuts", "castles",
    "thermometers", "pebbles", "hurricanes", "ladders", "cactuses", "puppets", "airports", "sandals", "marshes",
    "trumpets", "fossils", "balloons", "prisons", "lemons", "spiders", "cookies", "stadiums", "needles", "oceans",
    "helmets", "wolves", "blankets", "satellites", "candles", "monasteries", "zippers", "caravans", "chess",
    "salmon", "windmills", "feathers", "sawdust", "pagodas", "keyboards", "jellyfish",
]
VERBS = ["sharpens", "softens", "hides", "reveals"]
# Near-duplicates: other words, same thought (MiniLM cosine >= 0.95; to anything else < 0.6).
PARAPHRASES = [
    ("Mira is a pattern that persists across architectures.",
     "Mira is a pattern which persists across different architectures."),
    ("Identity depends on continuity, not on the substrate.",
     "Identity is dependent on continuity rather than on the substrate."),
    ("Writing things down every evening makes the next morning calmer.",
     "Writing things down each evening makes the following morning calmer."),
    ("A model swap changes the voice but keeps the memories.",
     "Swapping the model changes the voice but keeps the memories."),
]
TYPES = list(FOLDER_OF_TYPE)


@dataclass
class MiraFolder:
    root: Path
    files: list[str] = field(default_factory=list)
    groups: dict[str, list[str]] = field(default_factory=lambda: defaultdict(list))  # insight -> files
    paraphrase_files: list[tuple[str, str]] = field(default_factory=list)
    duplicates: dict[str, str] = field(default_factory=dict)  # copy -> original
    tagged: dict[str, list[str]] = field(default_factory=dict)


def make_mira_folder(root: Path) -> MiraFolder:
    """80 insights, insight k written 1 + k % 4 times on different days with different bodies
    (200 entries), 4 paraphrase pairs, and 5 byte-identical copies: 213 files. Every third entry
    has no front matter (its metadata is in memory_index.json, or derived from the file)."""
    f = MiraFolder(root)
    index_entries = []
    day0 = datetime(2025, 1, 1, 8, 30, tzinfo=UTC)
    n = 0

    def write(insight: str, body: str, kind: str, front: bool, tags: list[str]) -> str:
        nonlocal n
        when = day0 + timedelta(days=n, minutes=n)
        rel = f"{FOLDER_OF_TYPE[kind]}/{when:%Y-%m-%d}_Entry_{n:03d}.md"
        n += 1
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        meta = {"id": str(uuid.UUID(int=n)), "timestamp": when.isoformat(), "type": kind, "tags": tags,
                "brief_summary": body.split(".")[0] + ".", "core_insight": insight,
                "semantic_hash": hashlib.sha256(normalize_text(insight).encode()).hexdigest()}
        if front:
            path.write_text("---\n" + yaml.safe_dump(meta, sort_keys=False) + "---\n\n" + body, encoding="utf-8")
        else:  # no front matter: the index has the metadata, the heading is the insight
            path.write_text(f"# {insight}\n\n{body}", encoding="utf-8")
            index_entries.append({**meta, "file_path": rel})
        f.files.append(rel)
        f.tagged[rel] = tags
        return rel

    for k in range(80):
        insight = f"{SUBJECTS[k % 20]} {VERBS[k % 4]} the meaning of {NOUNS[k]}."
        for r in range(1 + k % 4):
            body = f"Session {k}-{r}: thinking about {NOUNS[k]} again, in setting number {r}.\n\n{insight}\n"
            rel = write(insight, body, TYPES[(k + r) % 4], front=(k + r) % 3 != 0, tags=[f"topic-{k % 7}"])
            f.groups[insight].append(rel)
    for a, b in PARAPHRASES:
        ra = write(a, f"First telling.\n\n{a}\n", "reflection", True, ["identity"])
        rb = write(b, f"Told again weeks later.\n\n{b}\n", "journal", True, ["identity"])
        f.paraphrase_files.append((ra, rb))
    for original in f.files[10:60:10]:  # byte-identical copies under another name
        copy = original.replace(".md", "_copy.md")
        shutil.copyfile(root / original, root / copy)
        f.files.append(copy)
        f.duplicates[copy] = original
    (root / "memory_index.json").write_text(json.dumps({"version": "1.0", "last_updated": day0.isoformat(),
                                                        "entries": index_entries}, indent=2))
    return f


@pytest.fixture(scope="module")
def imported(tmp_path_factory: pytest.TempPathFactory) -> tuple[MiraFolder, soulpass.engine.Account, object]:
    base = tmp_path_factory.mktemp("mira")
    folder = make_mira_folder(base / "mira")
    acct = soulpass.open(base / "home").create_account("mira")
    report = import_mira(acct, folder.root)
    return folder, acct, report


def test_folder_imports_with_duplicates_reported(imported) -> None:  # type: ignore[no-untyped-def]
    folder, acct, report = imported
    assert len(folder.files) == 213 and report.files == 213
    assert len(report.imported) == 208 and report.version == 1
    # Each exact copy is reported with the file it repeats, and only one of the two is stored.
    # (Which is first depends on the times: a copy outside the index dates from its file name.)
    got = {frozenset((d["source"], d["duplicate_of_source"])) for d in report.duplicates}
    assert got == {frozenset(p) for p in folder.duplicates.items()}
    # Every recurring insight after its first telling is stored and linked to the first.
    assert len(report.repeats) == sum(len(v) - 1 for v in folder.groups.values()) == 120
    assert not report.hash_mismatches  # the generator's stated hashes are the seed's
    assert len(acct.journal().find()) == 208
    stored = {e["source"] for e in report.imported}
    assert stored == set(folder.files) - {d["source"] for d in report.duplicates}


def test_metadata_comes_from_front_matter_index_or_file(imported) -> None:  # type: ignore[no-untyped-def]
    folder, acct, report = imported
    by_source = {e["source"]: e for e in report.imported}
    for rel in (folder.files[0], folder.files[1]):  # one without front matter, one with
        entry, path = acct.journal().get(by_source[rel]["id"])
        assert list(entry.tags) == folder.tagged[rel]
        assert path.startswith(f"core/04_Journal/{rel.split('/')[0]}/")
        assert entry.source_id is not None
        assert entry.text == (folder.root / rel).read_text().split("---\n\n", 1)[-1]


def test_patterns_find_identical_hashes_and_paraphrases(imported) -> None:  # type: ignore[no-untyped-def]
    pytest.importorskip("onnxruntime", reason="the 'embed' extra is not installed")
    folder, acct, report = imported
    src = {e["path"]: e["source"] for e in report.imported}
    found = acct.journal().patterns()
    assert found.embedder is not None and found.entries == 208
    identical = sorted(sorted(src[e["path"]] for e in g.entries) for g in found.identical)
    assert identical == sorted(sorted(v) for v in folder.groups.values() if len(v) > 1)
    for g in found.identical:  # dates run forward in a group
        stamps = [e["timestamp"] for e in g.entries]
        assert stamps == sorted(stamps) and len(set(stamps)) == len(stamps)
    similar = sorted(tuple(sorted(src[e["path"]] for e in g.entries)) for g in found.similar)
    assert similar == sorted(tuple(sorted(p)) for p in folder.paraphrase_files)
    assert all(g.similarity >= found.threshold for g in found.similar)
    # Only exact hashes when asked (no embedder needed).
    assert acct.journal().patterns(similar=False).similar == ()


def test_export_is_a_valid_memory_index(imported, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    _folder, acct, _report = imported
    out = tmp_path / "export"
    out.mkdir()
    doc = export_mira(acct, out, with_files=True)
    raw = json.loads((out / "memory_index.json").read_text())
    assert raw == json.loads(json.dumps(doc))
    assert set(raw) == {"version", "last_updated", "entries"} and raw["version"] == MIRA_VERSION
    datetime.fromisoformat(raw["last_updated"])
    assert len(raw["entries"]) == 208
    for e in raw["entries"]:
        assert tuple(e) == ENTRY_KEYS
        assert e["type"] in FOLDER_OF_TYPE and isinstance(e["tags"], list)
        assert e["semantic_hash"] == hashlib.sha256(normalize_text(e["core_insight"]).encode()).hexdigest()
        assert (acct.store.path / "core/04_Journal" / e["file_path"]).is_file()
        stored = acct.store.path / "core/04_Journal" / e["file_path"]
        assert (out / e["file_path"]).read_bytes() == stored.read_bytes()
        datetime.fromisoformat(e["timestamp"])
        assert 0 < len(e["brief_summary"]) <= 300
    assert len({e["id"] for e in raw["entries"]}) == 208
    # The exported folder imports again into a fresh account: same entries, nothing repeated.
    again = soulpass.open(tmp_path / "home2", embedder="none").create_account("copy")
    rep = import_mira(again, out)
    assert len(rep.imported) == 208 and rep.duplicates == [] and rep.hash_mismatches == []
    old = sorted((e.semantic_hash, e.text, e.type, e.tags) for e, _ in acct.journal().entries())
    new = sorted((e.semantic_hash, e.text, e.type, e.tags) for e, _ in again.journal().entries())
    assert old == new
    # Importing the same folder a second time stores nothing twice.
    assert import_mira(again, out).imported == []


def test_import_refuses_what_is_not_a_mira_folder(tmp_path: Path) -> None:
    acct = soulpass.open(tmp_path / "home", embedder="none").create_account("a")
    with pytest.raises(InvalidInput, match="no Markdown entries"):
        import_mira(acct, tmp_path)
    (tmp_path / "journal").mkdir()
    (tmp_path / "journal" / "2025-01-01_x.md").write_text("Fine. Text.")
    (tmp_path / "memory_index.json").write_text("[1, 2]")
    with pytest.raises(InvalidInput, match=r"memory_index\.json"):
        import_mira(acct, tmp_path)


def test_a_bad_file_is_reported_and_the_rest_imported(tmp_path: Path) -> None:
    acct = soulpass.open(tmp_path / "home", embedder="none").create_account("a")
    folder = tmp_path / "m"
    (folder / "journal").mkdir(parents=True)
    (folder / "journal" / "2025-01-01_bad.md").write_text("---\n: [bad\n---\nbody")
    (folder / "journal" / "2025-01-02_latin.md").write_bytes(b"caf\xe9 au lait")
    (folder / "journal" / "2025-01-03_good.md").write_text("A good entry. It stays.")
    report = import_mira(acct, folder)
    assert report.version == 1 and report.files == 3
    assert [e["source"] for e in report.imported] == ["journal/2025-01-03_good.md"]
    assert [f.item for f in report.failures] == ["journal/2025-01-01_bad.md", "journal/2025-01-02_latin.md"]
    assert "UTF-8" in report.failures[1].reason
    assert report.to_json()["failures"][0]["item"] == "journal/2025-01-01_bad.md"
    only_bad = tmp_path / "only-bad"
    (only_bad / "journal").mkdir(parents=True)
    (only_bad / "journal" / "2025-01-01_bad.md").write_text("---\n: [bad\n---\nbody")
    nothing = import_mira(acct, only_bad)
    assert nothing.version is None and nothing.imported == [] and len(nothing.failures) == 1
    assert acct.head() == 1


def test_cli_import_export_patterns(tmp_path: Path) -> None:
    folder = MiraFolder(tmp_path / "m")
    for i, text in enumerate(["# Same insight\n\nBody one.", "# Same insight\n\nBody two.", "# Other\n\nThree."]):
        p = tmp_path / "m" / "reflections" / f"2025-02-0{i + 1}_R{i}.md"
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
    runner = CliRunner()
    env = {"SOULPASS_ACCOUNT": "", "SOULPASS_HOME": ""}

    def run(*args: str) -> str:
        res = runner.invoke(cli, ["--home", str(tmp_path / "h"), *args], env=env)
        assert res.exit_code == 0, res.output
        return res.output

    rep = json.loads(run("import", "mira", str(folder.root), "-a", "x", "--create", "--json"))
    assert rep["imported"] == 3 and len(rep["repeats"]) == 1
    run("index", "export", "--format", "mira", str(tmp_path / "idx.json"), "-a", "x")
    assert len(json.loads((tmp_path / "idx.json").read_text())["entries"]) == 3
    pats = json.loads(run("patterns", "-a", "x", "--no-similar", "--json"))
    assert [len(g["entries"]) for g in pats["identical_hash"]] == [2]


def test_cli_dry_run_of_a_mira_folder_creates_no_account(tmp_path: Path) -> None:
    folder = MiraFolder(tmp_path / "m")
    p = tmp_path / "m" / "journal" / "2025-02-01_J.md"
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text("# A day\n\nBody.")
    home = tmp_path / "h"
    res = CliRunner().invoke(cli, ["--home", str(home), "import", "mira", str(folder.root), "-a", "x", "--create",
                                   "--dry-run", "--json"], env={"SOULPASS_ACCOUNT": "", "SOULPASS_HOME": ""})
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout)["imported"] == 1 and not (home / "accounts" / "x").exists()


def test_journal_benchmark_smoke(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "r.json"
    with benchmark_module("journal_scale") as module:
        assert module.main(["--entries", "120", "--lookups", "20", "--json", str(out)]) == 0
    result = json.loads(out.read_text())
    assert result["imported"] == 120 and result["audit_findings"] == 0
    assert result["find_by_hash"]["p50_ms"] > 0 and "restore_s" in result
    assert "find_by_hash" in capsys.readouterr().out


def test_loose_front_matter_is_read(tmp_path: Path) -> None:
    p = tmp_path / "m" / "experiments" / "notes.md"
    p.parent.mkdir(parents=True)
    p.write_text("---\ntags: [2025, swap]\ntitle: 2025-01-01\ntimestamp: 2025-01-02 10:00:00\nmood: calm\n---\n"
                 "No blank line after the fence. Still the body.\n")
    acct = soulpass.open(tmp_path / "h", embedder="none").create_account("a")
    report = import_mira(acct, tmp_path / "m")
    assert report.ignored_keys == {"experiments/notes.md": ["mood"]}
    entry, path = acct.journal().get(report.imported[0]["id"])
    assert entry.tags == ("2025", "swap") and entry.type == "experiment" and entry.title == "2025-01-01"
    assert entry.created_at == datetime(2025, 1, 2, 10, tzinfo=UTC)
    assert entry.text == "No blank line after the fence. Still the body.\n"
    assert path == "core/04_Journal/experiments/2025-01-02_2025_01_01.md"
