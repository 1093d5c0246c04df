"""What a ``postgresql://`` location names, without connecting (no psycopg import here).

A location may carry ``soulpass_cache=<folder>``: where this process keeps what it derives from
the database locally, and ``soulpass_index=local``: keep each account's index in that folder instead
of in the database (the default, ``database``, shares one index between every process and host).
Both are ours, not libpq's, so they are taken off before connecting.
"""

from __future__ import annotations

import re
from pathlib import Path
from urllib.parse import parse_qsl, unquote, urlencode, urlsplit, urlunsplit

__all__ = ["CACHE_PARAM", "INDEX_PARAM", "index_in_database", "is_url", "local_root", "masked", "server_url"]

CACHE_PARAM = "soulpass_cache"
INDEX_PARAM = "soulpass_index"
_INDEX_PLACES = ("database", "local")
_SCHEMES = ("postgresql://", "postgres://")


def is_url(location: object) -> bool:
    """Whether ``location`` names a PostgreSQL database rather than a home folder."""
    return isinstance(location, str) and location.startswith(_SCHEMES)


def server_url(url: str) -> str:
    """``url`` as libpq takes it: without our own parameters."""
    parts = urlsplit(url)
    query = [(k, v) for k, v in parse_qsl(parts.query, keep_blank_values=True) if k not in (CACHE_PARAM, INDEX_PARAM)]
    return urlunsplit(parts._replace(query=urlencode(query)))


def index_in_database(url: str) -> bool:
    """Whether the accounts' indexes live in the database (``soulpass_index``, default ``database``)."""
    place = dict(parse_qsl(urlsplit(url).query)).get(INDEX_PARAM, "database")
    if place not in _INDEX_PLACES:
        from soulpass.errors import InvalidInput

        raise InvalidInput(f"{INDEX_PARAM} must be one of {', '.join(_INDEX_PLACES)}, not {place!r}", field=INDEX_PARAM)
    return place == "database"


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
