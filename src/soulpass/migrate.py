"""Move accounts between stores — a home folder, a PostgreSQL database — with their whole history.

Each account goes as its plain-file form (``AccountBackend.source_files``: every version, the log,
every history copy), read inside the source's exclusive section so it is all of one version, and
lands through ``Backend.restore`` all at once; the destination is then read back and its digest
compared with the source's. Derived indexes are not moved: the destination rebuilds them on first
use. Open sandboxes are not part of an account's plain-file form, so an account with one is refused
(archive or discard it first) rather than migrated without it. A sandbox kept for its history (an
archive that left items out) is closed and holds nothing the versions need: it stays behind in the
source, where its history is still read, and the result names it (``kept_behind``).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from soulpass.errors import Conflict, Corrupted, NotFound
from soulpass.store.contract import AccountBackend

if TYPE_CHECKING:
    from soulpass.engine import Soulpass

__all__ = ["Migrated", "migrate", "tree_digest"]

Progress = Callable[[str, int], None]  # (account, files moved so far)


@dataclass(frozen=True)
class Migrated:
    """One account moved: its HEAD, how many files and bytes, and the digest both stores agree on."""

    account: str
    version: int
    files: int
    bytes: int
    digest: str
    replaced: bool
    kept_behind: tuple[str, ...] = ()  # sandboxes kept for their history: they stay in the source

    def to_dict(self) -> dict[str, Any]:
        return {"account": self.account, "version": self.version, "files": self.files, "bytes": self.bytes,
                "digest": self.digest, "replaced": self.replaced, "kept_behind": list(self.kept_behind)}


class _Tally:
    """The digest, file count and size of a stream of (key, bytes), computed as it passes."""

    def __init__(self) -> None:
        self._hash = hashlib.sha256()
        self.files = self.bytes = 0

    def feed(self, files: Iterable[tuple[str, bytes]], progress: Callable[[int], None] | None = None,
             ) -> Iterator[tuple[str, bytes]]:
        for key, data in files:
            self._hash.update(key.encode("utf-8") + b"\0" + hashlib.sha256(data).digest())
            self.files += 1
            self.bytes += len(data)
            if progress is not None and self.files % 500 == 0:
                progress(self.files)
            yield key, data

    @property
    def digest(self) -> str:
        return self._hash.hexdigest()


def tree_digest(files: Iterable[tuple[str, bytes]]) -> str:
    """SHA-256 over the keys (sorted, as ``source_files`` yields them) and the SHA-256 of each file."""
    tally = _Tally()
    for _ in tally.feed(files):
        pass
    return tally.digest


def migrate(src: Soulpass, dst: Soulpass, accounts: Sequence[str] = (), *, replace: bool = False,
            progress: Progress | None = None) -> list[Migrated]:
    """Copy ``accounts`` (default: all of ``src``'s) from ``src`` to ``dst``, whole history included.

    Everything is checked before anything is written: an unknown account is ``NotFound``; one that
    ``dst`` already has is a ``Conflict`` unless ``replace``; one with an open sandbox a
    ``Conflict``. A digest that differs after the copy is ``Corrupted`` (naming the account)."""
    names = list(dict.fromkeys(accounts)) or src.backend.accounts()
    have = set(src.backend.accounts())
    missing = [n for n in names if n not in have]
    if missing:
        raise NotFound(f"no account {', '.join(missing)} in {src.location}", accounts=missing)
    taken = sorted(set(names) & set(dst.backend.accounts()))
    if taken and not replace:
        raise Conflict(f"{dst.location} already has account {', '.join(taken)}: pass replace to overwrite",
                       accounts=taken)
    for name in names:
        _refuse_open_sandboxes(src.backend.open(name))
    return [_move(src, dst, name, replace, progress) for name in names]


def _refuse_open_sandboxes(store: AccountBackend) -> None:
    live = [s.sandbox_id for s in store.sandboxes.list() if s.archived_as is None]
    if live:
        raise Conflict(f"account {store.name} has open sandboxes ({', '.join(live)}): archive or discard them "
                       "first (a sandbox's buffer is not part of the account's plain-file form)",
                       account=store.name, sandboxes=live)


def _move(src: Soulpass, dst: Soulpass, name: str, replace: bool, progress: Progress | None) -> Migrated:
    store = src.backend.open(name)
    sent = _Tally()
    with store.exclusive():
        version = store.head()
        report = None if progress is None else (lambda n: progress(name, n))
        replaced = dst.backend.restore(name, sent.feed(store.source_files(), report), replace=replace)
    landed = dst.backend.open(name)
    with landed.exclusive():
        got = tree_digest(landed.source_files())
    if got != sent.digest:
        raise Corrupted(f"account {name} differs after the copy to {dst.location} (digest {got[:12]} != "
                        f"{sent.digest[:12]}): run `soulpass audit` there", account=name)
    if progress is not None:
        progress(name, sent.files)
    kept = tuple(s.sandbox_id for s in store.sandboxes.list() if s.kept)
    return Migrated(name, version, sent.files, sent.bytes, sent.digest, replaced, kept)
