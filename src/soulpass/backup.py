"""Backups of an account as a git repository: one commit per run, verified both ways.

``backup`` copies the account's source files, its plain-file form as the store hands it out
(``AccountBackend.source_files``: ``core/``, ``history/``, ``log/``; no index, no commit in flight,
no open sandbox), into the work tree of a git repository, together with ``SOULPASS_MANIFEST.json``
(account, version, SHA-256 of every file), and commits them with a message naming the version.
``restore`` streams a commit's files into the store (``Backend.restore``), checking every file
against the manifest: the account appears only if they all match. The index is rebuilt from the
store on first use. Uses the ``git`` command line.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import tarfile
from collections.abc import Generator
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from soulpass.errors import BackendUnavailable, Conflict, Corrupted, InvalidInput, NotFound
from soulpass.ids import check_name, utc_now
from soulpass.store.keys import SOURCE_FOLDERS
from soulpass.store.open import default_backup_dir, remember_backup

if TYPE_CHECKING:
    from soulpass.engine import Soulpass

__all__ = ["MANIFEST", "BackupResult", "RestoreResult", "backup", "restore"]

MANIFEST = "SOULPASS_MANIFEST.json"
_GIT_ID = ["-c", "user.name=soulpass", "-c", "user.email=soulpass@localhost", "-c", "core.autocrlf=false",
           "-c", "commit.gpgsign=false"]


@dataclass(frozen=True)
class BackupResult:
    repo: str
    commit: str
    version: int
    files: int
    message: str


@dataclass(frozen=True)
class RestoreResult:
    account: str
    commit: str
    version: int
    files: int
    replaced_existing: bool


def _git(repo: Path, *args: str, data: bytes | None = None) -> bytes:
    try:
        done = subprocess.run(["git", *_GIT_ID, "-C", str(repo), *args], input=data, capture_output=True,
                              check=False)
    except FileNotFoundError as exc:
        raise BackendUnavailable("backups need the git command line (apt install git)") from exc
    if done.returncode != 0:
        raise BackendUnavailable(f"git {' '.join(args[:2])} failed in {repo}: {done.stderr.decode(errors='replace')}",
                                 path=str(repo))
    return done.stdout


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def backup(sp: Soulpass, name: str, to: str | Path | None = None) -> BackupResult:
    """Snapshot account ``name`` into the git repository ``to`` (default ``<home>/backups/<name>``)."""
    store = sp.backend.open(name)
    repo = Path(to).expanduser() if to is not None else default_backup_dir(sp.home, name)
    if repo.exists() and any(repo.iterdir()) and not (repo / ".git").exists():
        raise InvalidInput(f"{repo} is not empty and not a git repository: choose another --to", path=str(repo))
    repo.mkdir(parents=True, exist_ok=True)
    if not (repo / ".git").exists():
        _git(repo, "init", "-q")
    with store.exclusive():  # no commit moves the account while it is copied
        version = store.head()
        hashes = {}
        for key, data in store.source_files():
            dst = repo / key
            digest = hashlib.sha256(data).hexdigest()
            if not dst.exists() or _sha256(dst) != digest:
                dst.parent.mkdir(parents=True, exist_ok=True)
                dst.write_bytes(data)
            hashes[key] = digest
    for top in SOURCE_FOLDERS:  # what the account no longer has leaves the snapshot too (git keeps it)
        for dirpath, _dirs, names in os.walk(repo / top):
            for n in names:
                rel = Path(dirpath, n).relative_to(repo).as_posix()
                if rel not in hashes:
                    Path(dirpath, n).unlink()
    manifest = {"account": name, "version": version, "created_at": utc_now().isoformat(), "files": hashes}
    (repo / MANIFEST).write_bytes((json.dumps(manifest, indent=1, sort_keys=True) + "\n").encode("utf-8"))
    for rel, digest in hashes.items():  # verify the work tree before committing it
        if _sha256(repo / rel) != digest:
            raise Corrupted(f"backup copy of {rel} does not match the account file", path=str(repo / rel))
    message = f"soulpass backup of {name}: version {version} ({len(hashes)} files)"
    _git(repo, "add", "-A")
    _git(repo, "commit", "-q", "--allow-empty", "-m", message)
    commit = _git(repo, "rev-parse", "HEAD").decode().strip()
    remember_backup(sp.home, name, repo)
    return BackupResult(repo=str(repo), commit=commit, version=version, files=len(hashes), message=message)


def restore(sp: Soulpass, name: str, source: str | Path | None = None, *, ref: str = "HEAD",
            force: bool = False) -> RestoreResult:
    """Bring account ``name`` back from the backup repository ``source`` at commit ``ref``.

    Every file is checked against the manifest before the account is touched; an existing account
    is replaced only with ``force``."""
    check_name(name, "account name")
    repo = Path(source).expanduser() if source is not None else default_backup_dir(sp.home, name)
    if not (repo / ".git").exists():
        raise NotFound(f"{repo} is not a backup repository", path=str(repo))
    if ref.startswith("-"):
        raise InvalidInput(f"ref {ref!r} must not start with '-'", field="ref")
    commit = _git(repo, "rev-parse", "--verify", f"{ref}^{{commit}}").decode().strip()
    try:
        manifest: dict[str, Any] = json.loads(_git(repo, "show", f"{commit}:{MANIFEST}"))
    except ValueError as exc:
        raise Corrupted(f"{MANIFEST} at {commit[:12]} is not JSON", path=str(repo)) from exc
    if name in sp.accounts() and not force:
        raise Conflict(f"account {name!r} exists in {sp.home}: restore into another home, or pass force",
                       account=name)
    with closing(_verified(repo, commit, manifest)) as files:
        replaced = sp.backend.restore(name, files, replace=force)
    return RestoreResult(account=name, commit=commit, version=int(manifest["version"]),
                         files=len(manifest["files"]), replaced_existing=replaced)


def _verified(repo: Path, commit: str, manifest: dict[str, Any]) -> Generator[tuple[str, bytes], None, None]:
    """The commit's files, and after the last one ``Corrupted`` unless they are the manifest's."""
    have: dict[str, str] = {}
    for key, data in _archived(repo, commit):
        if not any(part.startswith(".") for part in key.split("/")):  # temp files are not in the manifest
            have[key] = hashlib.sha256(data).hexdigest()
        yield key, data
    want: dict[str, str] = manifest["files"]
    missing = sorted(set(want) - set(have))
    extra = sorted(set(have) - set(want))
    bad = sorted(rel for rel in set(want) & set(have) if have[rel] != want[rel])
    if missing or extra or bad:
        raise Corrupted(f"backup does not match its manifest: missing {missing[:5]}, extra {extra[:5]}, "
                        f"changed {bad[:5]}", missing=missing, extra=extra, changed=bad)


def _archived(repo: Path, commit: str) -> Generator[tuple[str, bytes], None, None]:
    """The files of ``git archive`` of the commit's account folders, one at a time (never all in memory)."""
    cmd = ["git", *_GIT_ID, "-C", str(repo), "archive", "--format=tar", commit, "--", *_present(repo, commit)]
    with subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE) as proc:
        assert proc.stdout is not None
        try:
            with tarfile.open(fileobj=proc.stdout, mode="r|") as tar:
                for member in tar:
                    got = tar.extractfile(member) if member.isfile() and member.name != MANIFEST else None
                    if got is not None:
                        yield member.name, got.read()
        except tarfile.TarError as exc:
            raise Corrupted(f"git archive of {commit[:12]} in {repo} is not a readable tar: {exc}") from exc
        err = proc.stderr.read() if proc.stderr else b""
    if proc.returncode != 0:
        raise BackendUnavailable(f"git archive failed in {repo}: {err.decode(errors='replace')}", path=str(repo))


def _present(repo: Path, commit: str) -> list[str]:
    names = _git(repo, "ls-tree", "--name-only", commit).decode().split("\n")
    return [n for n in names if n in SOURCE_FOLDERS]
