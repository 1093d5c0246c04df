"""What a ``postgresql://`` location names, without connecting (no psycopg import here).

A location may carry ``soulpass_cache=<folder>``: where this process keeps what it derives from
the database (each account's index). It is ours, not libpq's, so it is taken off before connecting.
"""

from __future__ import annotations

import re
from pathlib import Path
from urllib.parse import parse_qsl, unquote, urlencode, urlsplit, urlunsplit

__all__ = ["CACHE_PARAM", "is_url", "local_root", "masked", "server_url"]

CACHE_PARAM = "soulpass_cache"
_SCHEMES = ("postgresql://", "postgres://")


def is_url(location: object) -> bool:
    """Whether ``location`` names a PostgreSQL database rather than a home folder."""
    return isinstance(location, str) and location.startswith(_SCHEMES)


def server_url(url: str) -> str:
    """``url`` as libpq takes it: without our own parameters."""
    parts = urlsplit(url)
    query = [(k, v) for k, v in parse_qsl(parts.query, keep_blank_values=True) if k != CACHE_PARAM]
    return urlunsplit(parts._replace(query=urlencode(query)))


def masked(url: str) -> str:
    """``url`` with its password hidden, for messages."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    netloc = parts.netloc.replace(f":{parts.password}@", ":***@", 1)
    return urlunsplit(parts._replace(netloc=netloc))


def local_root(url: str) -> Path:
    """The local folder of what this process derives from the database ``url``: ``soulpass_cache``
    if given, else ``~/.cache/soulpass/postgres/<host>_<port>_<database>[_<search path>]``."""
    parts = urlsplit(url)
    query = dict(parse_qsl(parts.query, keep_blank_values=True))
    if query.get(CACHE_PARAM):
        return Path(query[CACHE_PARAM]).expanduser()
    database = unquote(parts.path.lstrip("/")) or query.get("dbname", "")
    path = re.search(r"search_path=([^\s]+)", unquote(query.get("options", "")))
    name = "_".join(p for p in (parts.hostname or query.get("host", "local"), str(parts.port or 5432), database,
                                path.group(1) if path else "") if p)
    return Path("~/.cache/soulpass/postgres").expanduser() / re.sub(r"[^A-Za-z0-9_.-]", "-", name)
