"""Integrity: things corrupted on purpose are each named by ``audit``; ``index rebuild`` and
``restore`` bring back identical search results with no record lost; ``prune`` never deletes a file."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import pytest
from click.testing import CliRunner

import soulpass
from soulpass.cli.main import cli
from soulpass.integrity import audit, prune
from soulpass.store.fsio import dump_json

pytest.importorskip("onnxruntime", reason="the 'embed' extra is not installed (vectors are part of the audit)")

QUERIES = ["lighthouse keeper refraction", "cat tuna", "Paris", "rye bread recipe", "model swap identity"]
ENV = {"SOULPASS_ACCOUNT": "", "SOULPASS_HOME": ""}


@dataclass
class World:
    home: Path
    repo: Path
    run: Callable[..., str]

    @property
    def account(self) -> Path:
        return self.home / "accounts" / "ann"

    def engine(self) -> soulpass.engine.Soulpass:
        return soulpass.open(self.home)

    def results(self) -> list[list[tuple[str, float]]]:
        acct = self.engine().account("ann")
        try:
            return [[(h.id, round(h.score, 5)) for h in acct.search(q, 5)] for q in QUERIES]
        finally:
            acct.close()

    def records(self) -> dict[str, bytes]:
        return {p.relative_to(self.account).as_posix(): p.read_bytes()
                for p in sorted((self.account / "core").rglob("*")) if p.is_file()}


def _fill(acct: soulpass.engine.Account) -> None:
    sb = acct.create_sandbox("chat")
    t = sb.add_turn("user", "My cat Miso loves tuna and sleeps on the piano")
    sb.add_turn("eva", "Tuna is a treat; cats also like the warm piano lid", reply_to=t)
    sb.write_episode({"summary": {"action_taken": "talked about Miso", "key_outcome": "Miso likes tuna",
                                  "future_implication": "buy tuna"}, "turn_refs": [t]})
    sb.add_fact("Ann", "lives in", "Paris", confidence=0.9)
    sb.add_journal("# Lighthouse\n\nThe lighthouse keeper writes about refraction of light on water.",
                   type="reflection", tags=["sea"], timestamp=datetime(2025, 12, 4, tzinfo=UTC))
    sb.add_journal("A model swap changed the voice, not the identity. Continuity matters.", type="experiment",
                   timestamp=datetime(2025, 12, 5, tzinfo=UTC))
    sb.add_journal("Rye bread recipe: flour, water, salt, patience.", tags=["food"])
    sb.archive()
    acct.journal().add("Second evening. The keeper again watched the light bend.", title="Keeper")


@pytest.fixture
def world(tmp_path: Path) -> Iterator[World]:
    home = tmp_path / "home"
    runner = CliRunner()

    def run(*args: str, code: int = 0) -> str:
        res = runner.invoke(cli, ["--home", str(home), *args], env=ENV)
        assert res.exit_code == code, f"{args}: {res.exit_code}\n{res.output}\n{res.exception!r}"
        return res.output

    w = World(home, tmp_path / "backup", run)
    acct = w.engine().create_account("ann")
    _fill(acct)
    acct.index()  # catalog and vectors up to date
    acct.close()
    yield w


def _checks(report: dict[str, object]) -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}
    findings = report["findings"]
    assert isinstance(findings, list)
    for f in findings:
        out.setdefault(f["check"], set()).add(f["subject"])
    return out


def test_clean_account_passes(world: World) -> None:
    assert "ann: ok" in world.run("audit", "-a", "ann")
    report = audit(world.engine(), "ann")
    assert report.ok and report.catalog_version == report.store_version == 2
    assert report.files > 0 and report.rows_in_force > 0


def test_audit_names_each_problem_and_restore_brings_everything_back(world: World) -> None:
    before, files_before = world.results(), world.records()
    assert all(before)  # every query finds something
    world.run("backup", "-a", "ann", "--to", str(world.repo))
    acct_dir = world.account
    turn = next(p for p in (acct_dir / "core/01_Episodic_memory/turns/user").rglob("TU_*.json"))
    turn.unlink()  # a deleted record file
    journal = next((acct_dir / "core/04_Journal/reflections").glob("*.md"))
    journal.write_text(journal.read_text() + "\nedited by hand\n")  # an edited record file
    vectors = next(p for p in (acct_dir / "index" / "vectors").iterdir() if p.is_dir())
    shutil.rmtree(vectors)  # deleted vector files
    foreign = acct_dir / "index" / "vectors" / "exact-0123456789"
    foreign.mkdir()
    (foreign / "meta.json").write_bytes(dump_json({"format": 1, "backend": "exact", "model_id": "other/model",
                                                   "dim": 8}))
    # A row the catalog lost (its file stays), then a version the index has not caught up with.
    other = soulpass.open(world.home, embedder="none").account("ann")
    episode = next(r for r in other.index().catalog.rows() if r.kind == "episode")
    assert other.index().catalog.delete_rows([(episode.id, episode.version)]) == 1
    other.close()
    sb = other.create_sandbox("late")
    sb.add_turn("user", "A late turn the index has not seen")
    sb.archive()
    txn = acct_dir / "txn" / "00000099" / "files" / "core"
    txn.mkdir(parents=True)
    (txn / "half.json").write_bytes(b'{"vers')  # a half-written, uncommitted txn

    out = world.run("audit", "-a", "ann", code=1)
    for check in ("missing_file", "edited_file", "leftover_txn", "missing_vectors", "foreign_vectors",
                  "unindexed_file"):
        assert check in out, f"audit did not report {check}:\n{out}"
    report = json.loads(world.run("audit", "-a", "ann", "--json", code=1))
    found = _checks(report)
    assert turn.stem in found["missing_file"]
    assert any(s.startswith("JE_") for s in found["edited_file"])
    assert "leftover_txn" not in found  # the first audit's open finished it (discarded, uncommitted)
    assert not (acct_dir / "txn" / "00000099").exists()
    assert "index/vectors/exact-0123456789" in found["foreign_vectors"]
    assert "version_drift" not in found and report["index_lag"] == 1  # lag is said, not a finding
    assert found["unindexed_file"] == {episode.id}  # the late turn counts as lag, not one by one

    world.run("restore", "-a", "ann", "--from", str(world.repo), "--force")
    assert world.records() == files_before  # byte for byte, no record lost
    # The restored account has no index yet (it is derived): the audit says so, a rebuild makes it.
    assert "behind, caught up by the next search" in world.run("audit", "-a", "ann")
    world.run("index", "rebuild", "-a", "ann")
    assert "ann: ok" in world.run("audit", "-a", "ann")
    assert world.results() == before


def test_rebuild_repairs_a_truncated_catalog_and_deleted_vectors(world: World) -> None:
    before = world.results()
    catalog = world.account / "index" / "catalog.sqlite"
    size = catalog.stat().st_size
    with catalog.open("r+b") as fh:
        fh.truncate(size // 2)
    shutil.rmtree(next(p for p in (world.account / "index" / "vectors").iterdir() if p.is_dir()))
    report = json.loads(world.run("audit", "-a", "ann", "--json", code=1))
    assert "index_unreadable" in _checks(report), report
    out = world.run("index", "rebuild", "-a", "ann")
    assert "could not be opened" in out
    assert "ann: ok" in world.run("audit", "-a", "ann")
    assert world.results() == before


def test_rebuild_after_catalog_deleted_and_vectors_lost(world: World) -> None:
    before = world.results()
    for p in (world.account / "index").glob("catalog.sqlite*"):
        p.unlink()
    vec = next(p for p in (world.account / "index" / "vectors").iterdir() if p.is_dir())
    for f in vec.iterdir():
        if f.name != "meta.json":
            f.unlink() if f.is_file() else shutil.rmtree(f)
    report = audit(world.engine(), "ann")
    assert report.checks() == {"missing_vectors"} and report.index_lag == report.store_version
    world.run("index", "rebuild", "-a", "ann")
    assert audit(world.engine(), "ann").ok
    assert world.results() == before


def test_prune_removes_orphan_rows_never_files(world: World) -> None:
    journal = next((world.account / "core/04_Journal/journal").glob("*.md"))
    journal.unlink()
    files = world.records()
    out = world.run("prune", "-a", "ann", "--dry-run", "--json")
    assert len(json.loads(out)["rows_removed"]) == 1
    acct = world.engine().account("ann")
    report = prune(acct)
    acct.close()
    assert [r["path"] for r in report.rows_removed] == [journal.relative_to(world.account).as_posix()]
    assert world.records() == files  # nothing on disk changed
    after = audit(world.engine(), "ann")
    assert after.ok, after.findings
    assert json.loads(world.run("prune", "-a", "ann", "--json"))["rows_removed"] == []


def test_audit_after_an_ordinary_archive_is_ok_and_says_the_lag(tmp_path: Path) -> None:
    """Issue 40 item 20: every CLI archive left the catalog a version behind until a search, and
    ``audit`` exited 1 on it ("version_drift"): a scheduled audit alerted on nothing."""
    from click.testing import CliRunner

    from soulpass.cli.main import cli

    home = tmp_path / "home"

    def run(*args: str, code: int = 0) -> str:
        result = CliRunner().invoke(cli, ["--home", str(home), *args], env={"SOULPASS_ACCOUNT": ""})
        assert result.exit_code == code, result.output
        return result.output

    run("account", "create", "ann")
    for text in ("the first turn", "the second turn"):
        sid = run("sandbox", "create", "chat", "-a", "ann").strip()
        run("write", "turn", sid, "-a", "ann", "--text", text)
        run("archive", sid, "-a", "ann")
        if text == "the first turn":
            run("search", "turn", "-a", "ann")  # the index exists, at version 1
    out = run("audit", "-a", "ann")
    assert "ann: ok" in out and "1 version(s) behind" in out
    report = json.loads(run("audit", "-a", "ann", "--json"))
    assert report["ok"] and report["index_lag"] == 1 and report["findings"] == []


def test_hand_edits_are_named_and_adopted_with_the_original_kept(tmp_path: Path) -> None:
    """Issue 40 item 18: a ``sed -i`` on a journal file and on a record file rewrote history silently
    (audit ok, ``show --at`` the edited text). Now audit names both and ``adopt`` commits them."""
    import subprocess

    from click.testing import CliRunner

    from soulpass.cli.main import cli

    home = tmp_path / "home"
    acct = soulpass.open(home, embedder="none").create_account("ann")
    added = acct.journal().add("Fay prefers morning meetings.", title="Notes")
    sb = acct.create_sandbox("s")
    sb.add_turn("user", "Fay prefers morning coffee.")
    sb.archive()
    turn = next(acct.records("turn_user")).id
    head = acct.head()
    je_file = home / "accounts/ann" / added["path"]
    turn_file = next((home / "accounts/ann/core").rglob(f"{turn}.json"))
    for path in (je_file, turn_file):
        subprocess.run(["sed", "-i", "s/morning/afternoon/g", str(path)], check=True)

    def run(*args: str, code: int = 0) -> str:
        result = CliRunner().invoke(cli, ["--home", str(home), *args], env={"SOULPASS_ACCOUNT": ""})
        assert result.exit_code == code, result.output
        return result.output

    report = json.loads(run("audit", "-a", "ann", "--json", code=1))
    assert _checks(report)["edited_by_hand"] == {added["path"], str(turn_file.relative_to(home / "accounts/ann"))}
    dry = json.loads(run("adopt", "-a", "ann", "--dry-run", "--json"))
    assert {r["id"] for r in dry} == {added["id"], turn} and all(r["version"] is None for r in dry)
    done = json.loads(run("adopt", "-a", "ann", "--json"))
    assert sorted(r["version"] for r in done) == [head + 1, head + 2]
    assert "text" in next(r for r in done if r["id"] == added["id"])["fields"]
    assert acct.show(added["id"]).text == "Fay prefers afternoon meetings."
    assert acct.show(added["id"], at=head).text == "Fay prefers morning meetings."
    assert acct.record(turn).text_excerpt == "Fay prefers afternoon coffee."
    assert acct.record(turn, at=head).text_excerpt == "Fay prefers morning coffee."
    assert [r.version for r in acct.history(turn)][-1] in (head + 1, head + 2)
    assert "ann: ok" in run("audit", "-a", "ann")
    assert json.loads(run("adopt", "-a", "ann", "--json")) == []
