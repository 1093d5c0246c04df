"""Lists a page at a time (issue 16): the records of one kind, newest first, and the version log.

Used by the REST routes (``GET …/records``, ``GET …/versions``) and the MCP tools; a page is
bounded (``MAX_LIMIT``) whatever the caller asks.
"""

from __future__ import annotations

import sys
from collections import deque
from typing import TYPE_CHECKING, Any

from soulpass.errors import InvalidInput

if TYPE_CHECKING:
    from soulpass.engine.account import Account
    from soulpass.engine.views import LogEntry

__all__ = ["LISTED_KINDS", "MAX_LIMIT", "log_page", "record_page"]

LISTED_KINDS = ("episode", "turn_user", "turn_llm", "fact", "sensory")
MAX_LIMIT = 1000


def _bounds(limit: int, offset: int = 0) -> None:
    if type(limit) is not int or not 1 <= limit <= MAX_LIMIT:
        raise InvalidInput(f"limit must be an integer from 1 to {MAX_LIMIT}, not {limit!r}", field="limit")
    if type(offset) is not int or offset < 0:
        raise InvalidInput(f"offset must be an integer from 0, not {offset!r}", field="offset")


def record_page(acct: Account, kind: str, limit: int = 20, offset: int = 0, at: int | None = None) -> dict[str, Any]:
    """Records of ``kind`` as of ``at`` (default HEAD), newest first: ``items`` (each whole),
    ``total``, and ``next_offset`` (None on the last page)."""
    if kind not in LISTED_KINDS:
        raise InvalidInput(f"kind must be one of {', '.join(LISTED_KINDS)}, not {kind!r}", field="kind")
    _bounds(limit, offset)
    version = acct.check_version(at)
    newest: deque[Any] = deque(maxlen=min(offset + limit, sys.maxsize))  # an offset past any count: no page
    total = 0
    for rec in acct.records(kind, version):  # in id order: oldest first
        newest.append(rec)
        total += 1
    page = list(reversed(newest))[offset:offset + limit]
    return {"kind": kind, "version": version, "offset": offset, "limit": limit, "total": total,
            "items": [r.model_dump(mode="json") for r in page],
            "next_offset": offset + limit if total > offset + limit else None}


def log_page(acct: Account, since: int = 0, limit: int = 100) -> tuple[list[LogEntry], int | None]:
    """The log entries of the versions after ``since``, oldest first, at most ``limit``; and the
    ``since`` of the next page (None when this one reaches HEAD)."""
    _bounds(limit)
    if type(since) is not int or since < 0:
        raise InvalidInput(f"since must be a version number, not {since!r}", field="since")
    from soulpass.engine.views import LogEntry
    logged = acct.store.log(since)[:limit + 1]
    entries = [LogEntry.of(e) for e in logged[:limit]]
    return entries, (entries[-1].version if len(logged) > limit and entries else None)
