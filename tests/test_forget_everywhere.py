"""Forget leaves no trace anywhere a test can look (issue 15, item 4 and "Done when"): episodes that
summarise a forgotten turn, journal entries (content and file name), the version log's details,
other handles' indexes, re-imports, backups named, and every PostgreSQL table."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

import soulpass
from postgres_helpers import postgres_url
from soulpass.backup import backup
from soulpass.engine import Account, Soulpass
from soulpass.importers import import_from
from soulpass.passport import export_account
from soulpass.store.redact import FORGOTTEN

SECRET = "Zanzibar"


def _holders(root: Path, needle: str = SECRET) -> list[str]:
    """Files under ``root`` whose bytes or name hold ``needle``."""
    return sorted(str(p.relative_to(root)) for p in root.rglob("*")
                  if needle in p.name or (p.is_file() and needle.encode() in p.read_bytes()))


def _seed(sp: Soulpass) -> tuple[Account, dict[str, Any]]:
    """One archive: a turn quoting the secret, an episode summarising it, a journal entry whose
    file name holds it, a rejected fact about it; and a second turn that must survive."""
    a = sp.create_account("ann")
    sb = a.create_sandbox("s")
    t1 = sb.add_turn("user", f"I moved to {SECRET} last week")
    t2 = sb.add_turn("assistant", "how is the weather there?")
    sb.write_episode({"summary": {"action_taken": f"Ann talked about {SECRET}"}, "turn_refs": [t1, t2]})
    sb.add_journal(f"Dear diary, {SECRET} is hot")
    sb.add_fact("ann", "visited", SECRET, confidence=0.1)  # rejected: only the log's details quote it
    sb.archive()
    return a, a.log()[-1].to_json()


def test_forget_a_turn_takes_the_episode_that_summarises_it(tmp_path: Path) -> None:
    a, entry = _seed(soulpass.open(tmp_path / "home", embedder="none"))
    turn, episode, other = entry["added"]["turn_user"][0], entry["added"]["episode"][0], entry["added"]["turn_llm"][0]
    dry = a.forget([turn], dry_run=True)
    assert dry.ids == sorted([turn, episode])  # the dry run names the episode too
    a.forget([turn], reason="asked")
    shown = a.show(episode, at=1)
    assert SECRET not in shown.model_dump_json() and shown.text == FORGOTTEN
    assert a.record(other).text_excerpt == "how is the weather there?"  # the other turn stays


def test_forget_a_journal_entry_erases_its_text_and_its_name(tmp_path: Path) -> None:
    home = tmp_path / "home"
    a, entry = _seed(soulpass.open(home, embedder="none"))
    (je,) = [j["id"] for j in entry["journal"]]
    old_path = entry["journal"][0]["path"]
    assert SECRET in old_path
    result = a.forget([je], reason="asked")
    (new_path,) = result.rewritten
    assert SECRET not in new_path and je in new_path
    assert a.show(je, at=1).text == FORGOTTEN
    assert a.log()[0].journal == [{"id": je, "path": new_path}]  # the log names the new file
    assert a.store.audit() == []
    assert je not in [h.id for h in a.search("diary", 10)]
    assert not [h for h in _holders(home) if "journal" in h.lower() and "sandboxes" not in h]


def test_forget_by_subject_redacts_the_logs_details(tmp_path: Path) -> None:
    home = tmp_path / "home"
    a, _entry = _seed(soulpass.open(home, embedder="none"))
    sb = a.create_sandbox("t")
    sb.add_fact("ann", "lives_in", SECRET, confidence=0.9)
    sb.archive()
    sb = a.create_sandbox("u")
    sb.add_fact("ann", "lives_in", SECRET, confidence=0.95)  # a duplicate: the log quotes it
    sb.archive()
    a.forget(subject="ann", reason="asked")
    log = json.dumps([e.to_json() for e in a.log()])
    assert "visited" not in log  # the rejected candidate about ann
    rejected = a.log()[0].rejected[0]
    assert rejected["why"].startswith("confidence") and rejected["data"]["object"] == FORGOTTEN


def test_every_trace_leaves_the_home_and_later_backups_and_exports(tmp_path: Path) -> None:
    home = tmp_path / "home"
    sp = soulpass.open(home)
    a, entry = _seed(sp)
    other_handle = soulpass.open(home).account("ann")  # another process's index, opened before
    assert SECRET in " ".join(h.text for h in other_handle.search(SECRET, 10))
    before = tmp_path / "before"
    if subprocess.run(["git", "--version"], capture_output=True).returncode == 0:
        backup(sp, "ann", before)
    ids = [entry["added"]["turn_user"][0], entry["journal"][0]["id"]]
    result = a.forget(ids, subject="ann", reason="asked", by="ann")
    if before.exists():
        assert str(before.resolve()) in result.backups_holding  # a backup made before it is named
        assert a.log()[-1].backups_holding == result.backups_holding
    assert not [h for h in other_handle.search(SECRET, 10) if SECRET in h.text]
    assert _holders(home) == []  # files, history, log, catalog, full text, vectors
    export_account(sp, "ann", tmp_path / "after.soulpass", history=True)
    assert SECRET.encode() not in (tmp_path / "after.soulpass").read_bytes()
    if before.exists():
        backup(sp, "ann", tmp_path / "after-backup")
        assert _holders(tmp_path / "after-backup") == []


def test_a_forgotten_import_is_not_imported_again(tmp_path: Path) -> None:
    a = soulpass.open(tmp_path / "home", embedder="none").create_account("ann")
    path = tmp_path / "chat.jsonl"
    path.write_text("\n".join(json.dumps({"conversation_id": "c", "role": r, "text": t, "timestamp": 1.7e9 + n})
                              for n, (r, t) in enumerate([("user", f"my code is {SECRET}"), ("assistant", "ok")]))
                    + "\n", encoding="utf-8")
    assert import_from(a, "jsonl", path).imported["turn"] == 2
    (secret_turn,) = [t.id for t in a.records("turn_user")]
    a.forget([secret_turn], reason="asked")
    assert a.log()[-1].import_digests and SECRET not in json.dumps(a.log()[-1].to_json())
    again = import_from(a, "jsonl", path)
    assert again.imported["turn"] == 0 and again.forgotten["turn"] == 1 and again.duplicates["turn"] == 1
    assert list(a.records("turn_user")) == []


def test_forget_on_postgresql_leaves_no_row_holding_it(tmp_path: Path) -> None:
    psycopg = pytest.importorskip("psycopg")
    for url in postgres_url(tmp_path):
        a, entry = _seed(soulpass.open(url, embedder="none"))
        a.search(SECRET, 5)
        a.forget([entry["added"]["turn_user"][0], entry["journal"][0]["id"]], subject="ann", reason="asked")
        with psycopg.connect(url.split("&soulpass_cache")[0]) as conn:
            tables = [r[0] for r in conn.execute(
                "SELECT table_name FROM information_schema.tables WHERE table_schema = current_schema()")]
            assert {"versions", "records", "documents"} <= set(tables)
            holding = {t: conn.execute(f"SELECT count(*) FROM {t} AS x WHERE x::text LIKE %s",  # names from the catalog
                                       (f"%{SECRET}%",)).fetchone()[0] for t in tables}
        # What an open sandbox buffers is new memory, not the forgotten records: none here.
        assert {t: n for t, n in holding.items() if n} == {}
        assert _holders(tmp_path / "pg") == []  # the local index cache
        a.close()
