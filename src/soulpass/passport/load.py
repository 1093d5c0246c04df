"""Read a passport file back into an account: every check first, then one atomic restore."""

from __future__ import annotations

import json
import sys
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from soulpass.errors import Conflict, Corrupted, InvalidInput, NotFound
from soulpass.ids import check_name
from soulpass.index.carried import embedding_key, load_carried, place_carried
from soulpass.passport.format import (
    FORMAT,
    FORMAT_VERSION,
    MANIFEST,
    MANIFEST_DIGEST,
    MAX_ENTRY_BYTES,
    MAX_MANIFEST_BYTES,
    MAX_TOTAL_BYTES,
    PREFIX,
    VECTORS,
    check_member,
    read_limited,
    sha256,
    tree_digest,
)
from soulpass.store.plain_form import check_plain_form

if TYPE_CHECKING:
    from soulpass.engine import Soulpass


@dataclass(frozen=True)
class ImportResult:
    account: str
    head: int
    files: int
    history: bool
    manifest_sha256: str
    tree_sha256: str
    vectors: str | None = None  # what became of the vectors the passport carried (None: it had none)


def import_account(sp: Soulpass, path: str | Path, *, as_name: str | None = None,
                   max_entry: int = MAX_ENTRY_BYTES, max_total: int = MAX_TOTAL_BYTES,
                   progress: bool = False) -> ImportResult:
    """Create an account from the passport at ``path`` (named as in it, or ``as_name``).

    Every entry is read and checked against the manifest, and its content as live input is
    (:func:`soulpass.store.plain_form.check_plain_form`), before anything is written; ``Conflict``
    if the account exists. ``max_entry``/``max_total`` bound one file and the whole account in bytes;
    ``progress`` counts verified files on stderr."""
    source = Path(path).expanduser()
    if not source.is_file():
        raise NotFound(f"no passport file at {source}", path=str(source))
    try:
        zf = zipfile.ZipFile(source)
    except (zipfile.BadZipFile, OSError) as exc:
        raise Corrupted(f"{source} is not a passport (zip) file: {exc}", path=str(source)) from exc
    with zf:
        manifest, digest = _manifest(zf, max_entry)
        name = check_name(as_name or str(manifest.get("account", "")), "account name")
        if name in sp.accounts():
            raise Conflict(f"account {name!r} exists: import it under another name with --as", account=name)
        files = {}
        for key, data in _verified(zf, manifest, max_entry, max_total):
            files[key] = data
            if progress and len(files) % 500 == 0:
                print(f"verified {len(files)} files", file=sys.stderr)
        head = check_plain_form(files)  # the content too, as live input is, before anything is written
        if head != manifest.get("head"):
            raise InvalidInput(f"passport manifest says HEAD {str(manifest.get('head'))[:40]}, its files {head}",
                               entry=MANIFEST)
        carried = _vectors(zf, manifest, max_total)
        sp.backend.restore(name, iter(sorted(files.items())))
    return ImportResult(account=name, head=int(manifest["head"]), files=len(files), history=bool(manifest["history"]),
                        manifest_sha256=digest, tree_sha256=manifest["tree_sha256"],
                        vectors=None if carried is None else _place_carried(sp, name, manifest["vectors"], carried))


def _vectors(zf: zipfile.ZipFile, manifest: dict[str, Any], limit: int) -> bytes | None:
    """The verified vectors file the manifest lists under ``vectors`` (None: it lists none)."""
    listed = manifest.get("vectors")
    if listed is None:
        return None
    if not isinstance(listed, dict) or listed.get("name") != VECTORS or VECTORS not in zf.namelist():
        raise Corrupted(f"passport manifest's vectors entry does not name {VECTORS!r} in the file", entry=VECTORS)
    data = read_limited(zf, zf.getinfo(VECTORS), limit)
    if len(data) != int(listed.get("size", -1)) or sha256(data) != listed.get("sha256"):
        raise Corrupted(f"passport entry {VECTORS!r} does not match its size or SHA-256", entry=VECTORS)
    load_carried(data, str(listed.get("key")))  # readable, or Corrupted naming it
    return data


def _place_carried(sp: Soulpass, name: str, listed: dict[str, Any], data: bytes) -> str:
    """The carried vectors beside the new account's index when this home embeds as the exporter did."""
    embedder = sp.embedder()
    if embedder is None or listed["key"] != embedding_key(embedder.model_id):
        here = "no embedder" if embedder is None else embedding_key(embedder.model_id)
        return f"ignored: made by {listed['key']}, this home embeds with {here} (records are embedded again)"
    place_carried(sp.backend.open(name), embedder.model_id, data)
    return f"used: {listed.get('count', 0)} vectors"


def _manifest(zf: zipfile.ZipFile, max_entry: int) -> tuple[dict[str, Any], str]:
    infos = zf.infolist()
    seen: set[str] = set()
    for info in infos:
        check_member(info, max_entry)
        if info.filename in seen:
            raise InvalidInput(f"passport entry {info.filename!r} appears twice", entry=info.filename)
        seen.add(info.filename)
    if MANIFEST not in seen or MANIFEST_DIGEST not in seen:
        raise Corrupted(f"passport has no {MANIFEST} or {MANIFEST_DIGEST}", entry=MANIFEST)
    body = read_limited(zf, zf.getinfo(MANIFEST), MAX_MANIFEST_BYTES)
    digest = sha256(body)
    stated = read_limited(zf, zf.getinfo(MANIFEST_DIGEST), 200).decode(errors="replace").strip()
    if stated != digest:
        raise Corrupted(f"passport entry {MANIFEST!r} does not match {MANIFEST_DIGEST}", entry=MANIFEST)
    try:
        manifest: dict[str, Any] = json.loads(body)
    except ValueError as exc:
        raise Corrupted(f"passport entry {MANIFEST!r} is not JSON", entry=MANIFEST) from exc
    if manifest.get("format") != FORMAT or manifest.get("format_version") != FORMAT_VERSION:
        raise InvalidInput(f"passport format {manifest.get('format')!r} version {manifest.get('format_version')!r} "
                           f"is not {FORMAT} {FORMAT_VERSION}: upgrade soulpass", entry=MANIFEST)
    return manifest, digest


def _verified(zf: zipfile.ZipFile, manifest: dict[str, Any], entry_limit: int,
              total_limit: int) -> Iterator[tuple[str, bytes]]:
    """Every listed file, each checked for size and hash; the archive holds nothing else."""
    entries: list[dict[str, Any]] = manifest.get("entries", [])
    want = {PREFIX + str(e["name"]) for e in entries}
    have = {i.filename for i in zf.infolist() if i.filename.startswith(PREFIX)}
    for extra in sorted(have - want):
        raise Corrupted(f"passport entry {extra!r} is not in the manifest", entry=extra)
    if len(want) != len(entries):
        raise InvalidInput("passport manifest lists a name twice", entry=MANIFEST)
    if sum(int(e["size"]) for e in entries) > total_limit:
        raise InvalidInput(f"passport declares more than the limit of {total_limit} bytes", entry=MANIFEST)
    if tree_digest(entries) != manifest.get("tree_sha256"):
        raise Corrupted("passport manifest's tree_sha256 does not match its entries", entry=MANIFEST)
    for e in entries:
        member = PREFIX + str(e["name"])
        if member not in have:
            raise Corrupted(f"passport entry {member!r} is missing", entry=member)
        data = read_limited(zf, zf.getinfo(member), entry_limit)
        if len(data) != int(e["size"]) or sha256(data) != e["sha256"]:
            raise Corrupted(f"passport entry {member!r} does not match its size or SHA-256", entry=member)
        yield str(e["name"]), data
