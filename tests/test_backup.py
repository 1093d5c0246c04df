"""Backups into a git repository (one commit per run) and verified restores."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest
from click.testing import CliRunner

import soulpass
from soulpass.backup import MANIFEST, backup, restore
from soulpass.cli.main import cli
from soulpass.errors import Conflict, Corrupted, InvalidInput, NotFound
from treehash import digest

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="the git command line is not installed")
PARTS = ("core", "history", "log")


def _files(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for part in PARTS for p in sorted((root / part).rglob("*"))
            if p.is_file()}


def _git_log(repo: Path) -> list[str]:
    return subprocess.run(["git", "-C", str(repo), "log", "--format=%s"], capture_output=True, text=True,
                          check=True).stdout.splitlines()


@pytest.fixture
def sp(tmp_path: Path) -> soulpass.engine.Soulpass:
    s = soulpass.open(tmp_path / "home", embedder="none")
    acct = s.create_account("ann")
    sb = acct.create_sandbox("s")
    sb.add_turn("user", "I moved to Lyon last spring")
    sb.add_fact("Ann", "lives in", "Lyon", confidence=0.9)
    sb.update_state("mood", {"valence": 0.4})
    sb.add_journal("# Moving\n\nBoxes everywhere. Home is where the notes are.", tags=["move"])
    sb.archive()
    sb = acct.create_sandbox("t")
    sb.add_fact("Ann", "lives in", "Paris", confidence=0.95)  # supersedes: history/ gets a copy
    sb.propose_core("values", "curiosity", confidence=0.95, reason="stated")
    sb.archive()
    return s


def test_backup_then_restore_into_an_empty_home_is_byte_identical(sp: soulpass.engine.Soulpass,
                                                                   tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    res = backup(sp, "ann", repo)
    assert res.version == 2 and res.message.endswith(f"version 2 ({res.files} files)")
    assert _git_log(repo) == [res.message]
    empty = soulpass.open(tmp_path / "elsewhere", embedder="none")
    got = restore(empty, "ann", repo)
    assert got.version == 2 and got.files == res.files and not got.replaced_existing
    src, dst = sp.home / "accounts/ann", empty.home / "accounts/ann"
    assert _files(dst) == _files(src)
    assert digest(dst, PARTS) == digest(src, PARTS)
    assert (src / "history").is_dir()  # the superseded fact's old copy came along
    restored = empty.account("ann")
    assert restored.head() == 2 and [f.object for f in restored.records("fact")] == ["Lyon", "Paris"]
    assert restored.search("Lyon")[0].kind in ("turn_user", "fact")
    assert len(restored.journal().find(tags=["move"])) == 1


def test_one_commit_per_run_and_restore_of_an_older_one(sp: soulpass.engine.Soulpass, tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    first = backup(sp, "ann", repo)
    old_files = _files(sp.home / "accounts/ann")
    acct = sp.account("ann")
    acct.journal().add("A later thought. Written after the first backup.")
    acct.rollback(1)  # retires things too: they leave the snapshot, git keeps them
    second = backup(sp, "ann", repo)
    third = backup(sp, "ann", repo)  # nothing changed: still one commit for the run
    assert [second.version, third.version] == [4, 4]
    assert _git_log(repo) == [third.message, second.message, first.message]
    manifest = json.loads((repo / MANIFEST).read_text())
    assert manifest["version"] == 4 and set(manifest["files"]) == set(_files(sp.home / "accounts/ann"))
    other = soulpass.open(tmp_path / "other", embedder="none")
    assert restore(other, "ann", repo, ref=first.commit).version == 2
    assert _files(other.home / "accounts/ann") == old_files
    # Restoring over an existing account needs force, and then replaces it whole.
    with pytest.raises(Conflict):
        restore(other, "ann", repo)
    assert restore(other, "ann", repo, force=True).replaced_existing
    assert _files(other.home / "accounts/ann") == _files(sp.home / "accounts/ann")
    assert not [p for p in (other.home / "accounts").iterdir() if p.name.startswith(".")]


def test_a_tampered_backup_is_refused_and_nothing_is_touched(sp: soulpass.engine.Soulpass, tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    backup(sp, "ann", repo)
    fact = next(p for p in (repo / "core/02_Semantic_memory").rglob("SF_*.json") if "Lyon" in p.read_text())
    fact.write_text(fact.read_text().replace("Lyon", "Rome"))
    subprocess.run(["git", "-C", str(repo), "-c", "user.name=x", "-c", "user.email=x@x", "commit", "-qam", "edit"],
                   check=True)
    target = soulpass.open(tmp_path / "target", embedder="none")
    with pytest.raises(Corrupted, match="changed"):
        restore(target, "ann", repo)
    assert not (target.home / "accounts" / "ann").exists()
    assert not [p for p in (target.home / "accounts").iterdir()]  # no staging left behind


def test_bad_targets(sp: soulpass.engine.Soulpass, tmp_path: Path) -> None:
    full = tmp_path / "full"
    full.mkdir()
    (full / "x.txt").write_text("not a repo")
    with pytest.raises(InvalidInput, match="not a git repository"):
        backup(sp, "ann", full)
    with pytest.raises(NotFound):
        restore(sp, "ann", tmp_path / "nothing")
    with pytest.raises(NotFound):
        backup(sp, "nobody", tmp_path / "r")
    backup(sp, "ann", tmp_path / "r")
    with pytest.raises(InvalidInput):
        restore(sp, "ann", tmp_path / "r", ref="--output=/tmp/x")


def test_cli_backup_and_restore(sp: soulpass.engine.Soulpass, tmp_path: Path) -> None:
    runner = CliRunner()
    env = {"SOULPASS_ACCOUNT": "", "SOULPASS_HOME": ""}

    def run(home: Path, *args: str, code: int = 0) -> str:
        res = runner.invoke(cli, ["--home", str(home), *args], env=env)
        assert res.exit_code == code, res.output
        return res.output

    out = json.loads(run(sp.home, "backup", "-a", "ann", "--json"))
    assert Path(out["repo"]) == sp.home / "backups" / "ann" and out["version"] == 2
    assert "version 2" in run(sp.home, "backup", "-a", "ann")
    fresh = tmp_path / "fresh"
    assert "verified" in run(fresh, "restore", "-a", "ann", "--from", out["repo"])
    run(fresh, "restore", "-a", "ann", "--from", out["repo"], code=4)  # exists: Conflict
    assert _files(fresh / "accounts/ann") == _files(sp.home / "accounts/ann")


def test_restore_fsyncs_what_it_wrote_not_the_machine(sp: soulpass.engine.Soulpass, tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    repo = tmp_path / "repo"
    res = backup(sp, "ann", repo)
    synced: list[str] = []
    real_fsync = os.fsync

    def fsync(fd: int) -> None:
        synced.append(os.readlink(f"/proc/self/fd/{fd}"))
        real_fsync(fd)

    def machine_wide() -> None:
        raise AssertionError("os.sync() flushes the whole machine")

    monkeypatch.setattr(os, "sync", machine_wide)
    monkeypatch.setattr(os, "fsync", fsync)
    empty = soulpass.open(tmp_path / "elsewhere", embedder="none")
    assert restore(empty, "ann", repo).files == res.files
    staged = {p.split("/.restore-ann-", 1)[1].partition("/")[2] for p in synced if "/.restore-ann-" in p}
    restored = set(_files(empty.home / "accounts" / "ann"))
    assert len(restored) == res.files and restored <= staged  # every file fsynced before the move
