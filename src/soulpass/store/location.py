"""Where a home keeps its accounts, named without opening anything: what the layers above the
store ask of a ``--home`` (a folder or a ``postgresql://`` URL) instead of parsing it themselves."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from soulpass.store.postgres.url import is_url, local_root, masked

__all__ = ["StoreLocation", "locate"]


@dataclass(frozen=True)
class StoreLocation:
    """``kind``: which backend keeps the accounts; ``name``: how messages name it (the folder, or the
    URL with its password hidden); ``local``: this process's local folder (the home folder itself,
    or the cache beside a database: indexes kept locally, the server's key file)."""

    kind: Literal["files", "postgresql"]
    name: str
    local: Path

    @property
    def masked_url(self) -> str | None:
        """The database's URL without its password (None for a home folder)."""
        return self.name if self.kind == "postgresql" else None


def locate(home: Path | str) -> StoreLocation:
    """The location ``home`` names: a ``postgresql://`` URL, else a folder (``~`` expanded)."""
    if is_url(home):
        return StoreLocation("postgresql", masked(str(home)), local_root(str(home)))
    folder = Path(home).expanduser()
    return StoreLocation("files", str(folder), folder)
