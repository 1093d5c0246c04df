"""Write an account as a passport file (format in ``passport.format``)."""

from __future__ import annotations

import os
import sys
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from soulpass.errors import InvalidInput
from soulpass.ids import check_name, utc_now
from soulpass.index.carried import carried_bytes
from soulpass.index.export_vectors import collect
from soulpass.passport.format import (
    FORMAT,
    FORMAT_VERSION,
    MANIFEST,
    MANIFEST_DIGEST,
    PREFIX,
    VECTORS,
    canonical,
    sha256,
    tree_digest,
)
from soulpass.store.plain_form import without_history

if TYPE_CHECKING:
    from soulpass.engine import Soulpass


@dataclass(frozen=True)
class ExportResult:
    path: str
    account: str
    head: int
    files: int
    bytes: int
    history: bool
    manifest_sha256: str
    tree_sha256: str
    vectors: int | None = None  # embedded texts whose vectors the passport carries


def export_account(sp: Soulpass, name: str, path: str | Path, *, history: bool = False, vectors: bool = False,
                   progress: bool = False) -> ExportResult:
    """Write account ``name`` to ``path``: the files in force at HEAD and the log, with ``history``
    every superseded copy too, and with ``vectors`` the account's vectors (``soulpass.index.carried``)
    so an import embeds nothing again. Written to a temporary name, renamed when complete."""
    check_name(name, "account name")
    store = sp.backend.open(name)
    carried = _carried(sp, name) if vectors else None
    target = Path(path).expanduser()
    tmp = target.with_name(f".{target.name}.partial")
    entries: list[dict[str, Any]] = []
    try:
        with zipfile.ZipFile(tmp, "w", compression=zipfile.ZIP_DEFLATED) as zf, store.exclusive():
            head = store.head()
            files = store.source_files()
            for key, data in files if history else without_history(files):
                zf.writestr(PREFIX + key, data)
                entries.append({"name": key, "sha256": sha256(data), "size": len(data)})
                if progress and len(entries) % 500 == 0:
                    print(f"exported {len(entries)} files", file=sys.stderr)
            tree = tree_digest(entries)
            manifest = {"format": FORMAT, "format_version": FORMAT_VERSION, "account": name, "head": head,
                        "history": history, "created_at": utc_now().isoformat(),
                        "embedder": _embedder_id(sp), "tree_sha256": tree, "entries": entries}
            if carried is not None:
                key, data, count = carried
                zf.writestr(VECTORS, data)
                manifest["vectors"] = {"name": VECTORS, "sha256": sha256(data), "size": len(data), "key": key,
                                       "count": count}
            body = canonical(manifest)
            digest = sha256(body)
            zf.writestr(MANIFEST, body)
            zf.writestr(MANIFEST_DIGEST, digest + "\n")
            zf.comment = f"soulpass passport manifest sha256 {digest}".encode()
        os.replace(tmp, target)
    finally:
        tmp.unlink(missing_ok=True)
    return ExportResult(path=str(target), account=name, head=head, files=len(entries),
                        bytes=sum(e["size"] for e in entries), history=history, manifest_sha256=digest,
                        tree_sha256=tree, vectors=None if carried is None else carried[2])


def _carried(sp: Soulpass, name: str) -> tuple[str, bytes, int]:
    """The account's vectors to carry, as a file: (embedder and recipe, bytes, how many)."""
    found = collect(sp.account(name).index())
    if found is None:
        raise InvalidInput("--vectors needs an embedder and vectors in soulpass's own index (hnsw or exact, "
                           "not chroma)", field="vectors")
    key, vectors = found
    return key, carried_bytes(key, vectors), len(vectors)


def _embedder_id(sp: Soulpass) -> str | None:
    """The embedder the account's vectors came from, so an importer knows whether to re-embed."""
    embedder = sp.embedder()
    return embedder.model_id if embedder is not None else None
