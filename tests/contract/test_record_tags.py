"""The files backend's note of which tags each record carries (``record_tags.jsonl``): what an
importer's "already imported?" reads, kept by the commits, rebuilt when missing or damaged."""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent / "contract"))

from contract_changes import change, episode

from soulpass.store.contract import MasterStore
from soulpass.store.files.record_tags import TAGS_FILE
from soulpass.store.open import open_backend

WANTED = {"import:1", "import:2", "import:3"}


def _store(home: Path, versions: int) -> MasterStore:
    store = open_backend(home).open("ann", create=True)
    for v in range(1, versions + 1):
        store.commit(change(v, records=(episode(v, v).model_copy(update={"tags": (f"import:{v}",)}),)), parent=v - 1)
    return store


def _lines(home: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in (home / "accounts/ann" / TAGS_FILE).read_text().splitlines()]


def test_each_commit_adds_its_line_and_the_lookup_reads_the_note(tmp_path: Path) -> None:
    store = _store(tmp_path, 2)
    assert [line["version"] for line in _lines(tmp_path)] == [0, 1, 2]
    # a hand edit that adds a tag counts once committed (adopt): the lookup reads the note, not the file
    key = next(k for k in _lines(tmp_path)[2]["keys"])  # type: ignore[attr-defined]
    path = tmp_path / "accounts/ann" / key
    path.write_text(path.read_text().replace('"import:2"', '"import:2", "import:3"'))
    assert store.snapshot().tags_carried(WANTED) == {"import:1", "import:2"}


def test_a_missing_or_damaged_note_falls_back_to_the_files_and_the_next_commit_rebuilds_it(tmp_path: Path) -> None:
    store = _store(tmp_path, 2)
    note = tmp_path / "accounts/ann" / TAGS_FILE
    lines = note.read_bytes().split(b"\n")
    note.write_bytes(b"\n".join([lines[0], b"{not json", *lines[2:]]))
    assert store.snapshot().tags_carried(WANTED) == {"import:1", "import:2"}
    assert not note.exists()  # a reader that finds it damaged deletes it
    assert store.snapshot(1).tags_carried(WANTED) == {"import:1"}
    store.commit(change(3, records=(episode(3, 3).model_copy(update={"tags": ("import:3",)}),)), parent=2)
    assert [line["version"] for line in _lines(tmp_path)] == [2, 3]  # rebuilt at HEAD 2, then version 3's line
    assert store.snapshot().tags_carried(WANTED) == WANTED
    assert store.snapshot(1).tags_carried(WANTED) == {"import:1"}  # before the rebuild: read from the files
    note.write_bytes(note.read_bytes()[:-5])  # a torn end
    assert store.snapshot().tags_carried(WANTED) == WANTED  # reaches 2 only: HEAD 3 is read from the files
