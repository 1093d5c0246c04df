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
from soulpass.store.keys import record_path
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
    keys = _lines(tmp_path)[2]["keys"]
    assert isinstance(keys, dict)
    key = next(iter(keys))
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


def _same_as_the_files(home: Path, store: MasterStore, tags: set[str]) -> None:
    """At every version, the note's answer is the one every record file gives (note moved aside)."""
    note, aside = home / "accounts/ann" / TAGS_FILE, home / "aside.jsonl"
    head = store.head()
    noted = [store.snapshot(v).tags_carried(tags) for v in range(head + 1)]
    if note.exists():
        note.replace(aside)
    files = [store.snapshot(v).tags_carried(tags) for v in range(head + 1)]
    if aside.exists():
        aside.replace(note)
    assert noted == files


def test_after_an_import_a_rollback_an_adopted_hand_edit_and_a_forget_the_note_says_what_the_files_say(
        tmp_path: Path) -> None:
    from soulpass import open as open_home
    from soulpass.importers.sources import import_text

    sp = open_home(tmp_path, embedder="none")
    acct = sp.create_account("ann")
    lines = [json.dumps({"conversation": "c1", "role": role, "text": text, "id": f"m{n}",
                         "timestamp": 1_700_000_000 + n})
             for n, (role, text) in enumerate([("user", "I moved to Lisbon"), ("assistant", "Welcome!"),
                                              ("user", "I like tiles")])]
    first = import_text(acct, "jsonl", "\n".join(lines[:2]))
    assert first.imported["turn"] == 2
    tags = {t for r in [*acct.records("turn_user"), *acct.records("turn_llm")] for t in r.tags}
    assert any(t.startswith("import:") for t in tags)
    import_text(acct, "jsonl", "\n".join(lines))  # one more turn
    tags |= {t for r in acct.records("turn_user") for t in r.tags}
    acct.rollback(first.versions[-1])  # retires the third turn
    again = import_text(acct, "jsonl", "\n".join(lines))
    assert again.imported["turn"] == 1 and again.duplicates["turn"] == 2
    _same_as_the_files(tmp_path, acct.store, tags)
    turn = next(r for r in acct.records("turn_user") if r.text_excerpt == "I moved to Lisbon")
    path = tmp_path / "accounts/ann" / record_path(turn.id)
    edited = path.with_name("edited.tmp")  # as an editor saves: a new file renamed over the old
    edited.write_text(path.read_text().replace("I moved to Lisbon", "I moved to Porto"))
    edited.replace(path)
    assert [row["version"] for row in acct.adopt()] == [acct.head()]
    _same_as_the_files(tmp_path, acct.store, tags)
    before = acct.head()
    acct.forget([turn.id])
    # deleted by the forget (its tags may name what was forgotten), rebuilt by the version after
    assert int(str(_lines(tmp_path)[0]["version"])) >= before
    _same_as_the_files(tmp_path, acct.store, tags)
    assert import_text(acct, "jsonl", "\n".join(lines)).imported["turn"] == 0
