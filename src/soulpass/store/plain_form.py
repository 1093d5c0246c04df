"""An account's plain-file form checked like live input before a backend restores it (a passport).

The digests of a passport prove its files are the ones it was made with, not that they are sane:
a hostile but well-formed passport could carry a log nested so deep that every open of the account
recurses until ``RecursionError``, or a ``VERSION.json`` of 10^30. So every copy is parsed, held
to the depth live input may have (:data:`MAX_DEPTH`), a record to its model, a document of a known
kind to its own; versions are integers from 0 to :data:`MAX_VERSION` (what every backend can
store), no copy is newer than HEAD; and the version log reads whole (sealed lines in order, or an
earlier release's lines) and ends at HEAD. The first thing wrong is ``InvalidInput`` naming the
file; nothing is written.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from pathlib import PurePosixPath
from typing import Any

from soulpass.errors import Corrupted, InvalidInput
from soulpass.store.files.copies import parse_copy
from soulpass.store.files.layout import HISTORY, LOG_FILE
from soulpass.store.files.version_log import encode_log, read_entries
from soulpass.store.fsio import MAX_JSON_DEPTH, check_depth
from soulpass.store.keys import VERSION_FILE, kind_of_id

__all__ = ["MAX_DEPTH", "MAX_VERSION", "check_plain_form", "without_history"]

MAX_DEPTH = MAX_JSON_DEPTH
MAX_VERSION = 2**31 - 1  # PostgreSQL's integer version columns


def check_plain_form(files: Mapping[str, bytes]) -> int:
    """``InvalidInput`` naming the first file of ``files`` (key -> bytes) that live input could not
    have made; HEAD otherwise."""
    head = _head(files.get(VERSION_FILE))
    for key, data in files.items():
        if key.endswith((".json", ".md")) and key.split("/", 1)[0] in ("core", "history"):
            _check_copy(key, data, head)
        elif key.endswith(".json"):
            _parsed(key, data)  # a bulk version's id lists
    _check_log(files.get(LOG_FILE, b""), head)
    return head


def _head(data: bytes | None) -> int:
    if data is None:
        return 0
    doc = _parsed(VERSION_FILE, data)
    version = doc.get("version") if isinstance(doc, dict) else None
    if type(version) is not int or not 0 <= version <= MAX_VERSION:
        raise InvalidInput(f"{VERSION_FILE} says version {str(version)[:40]}: a version is a whole number "
                           f"from 0 to {MAX_VERSION}", path=VERSION_FILE)
    return version


def _check_copy(key: str, data: bytes, head: int) -> None:
    body = _parsed(key, data)
    version = body.get("version", 0)
    if type(version) is not int or not 0 <= version <= head:
        raise InvalidInput(f"{key} says version {str(version)[:40]}, not one from 0 to HEAD ({head})", path=key)
    model = _model_of(key, body)
    if model is None:
        return
    from pydantic import ValidationError

    try:
        model.model_validate(body)
    except (ValidationError, InvalidInput, ValueError) as exc:
        raise InvalidInput(f"{key} does not match the {model.__name__} schema: {str(exc)[:300]}", path=key) from exc


def _model_of(key: str, body: Mapping[str, Any]) -> Any:
    """A record's model (a file under ``core/`` named by its id), or a document's by its kind."""
    from soulpass.records import DOCUMENT_MODELS, RECORD_MODELS

    if key.startswith("core/") and key.endswith(".json"):
        try:
            return RECORD_MODELS[kind_of_id(PurePosixPath(key).stem)]
        except (InvalidInput, KeyError):
            pass  # not a record's file
    kind = body.get("kind")  # the knowledge graph is kept in shards, read by its own code: not "gks"
    return DOCUMENT_MODELS.get(kind) if isinstance(kind, str) and kind != "gks" else None


def _parsed(key: str, data: bytes) -> dict[str, Any]:
    try:
        body = parse_copy(key, data)
    except RecursionError:
        raise InvalidInput(f"{key} is nested more than {MAX_DEPTH} levels deep", path=key) from None
    except Corrupted as exc:
        raise InvalidInput(str(exc), path=key) from exc
    _check_depth(key, body)
    return body


def _check_depth(key: str, value: Any) -> None:
    try:
        check_depth(value, key)
    except InvalidInput as exc:
        raise InvalidInput(str(exc), path=key) from None


def _check_log(data: bytes, head: int) -> None:
    try:
        entries = read_entries(PurePosixPath(LOG_FILE), data, {})
    except Corrupted as exc:
        raise InvalidInput(str(exc), path=LOG_FILE) from exc
    for entry in entries:
        _check_depth(LOG_FILE, entry)
    last = entries[-1]["version"] if entries else 0
    if last != head:
        raise InvalidInput(f"{LOG_FILE} ends at version {last} but {VERSION_FILE} says {head}", path=LOG_FILE)


def without_history(files: Iterable[tuple[str, bytes]]) -> Iterator[tuple[str, bytes]]:
    """An account's plain-file form without its ``history/`` copies, and so without the log's
    digests of them (an account restored from it has none to check)."""
    for key, data in files:
        if key.partition("/")[0] == HISTORY:
            continue
        if key == LOG_FILE:
            data = encode_log(read_entries(PurePosixPath(LOG_FILE), data, {}))
        yield key, data
