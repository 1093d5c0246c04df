"""What every importer is: a reader of a source that yields items one at a time, where an item it
cannot take is yielded as a :class:`Failure` (its id in the source and why) instead of stopping
the whole import. The caller stores the good items and reports the failures."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Protocol, TypeVar

from soulpass.errors import SoulpassError

__all__ = ["Failure", "Importer", "failure", "split"]

ItemT = TypeVar("ItemT")
ItemT_co = TypeVar("ItemT_co", covariant=True)


@dataclass(frozen=True)
class Failure:
    """One item a bulk import did not take: ``item`` names it in its source (a file, a dialog id),
    ``reason`` says why (the refusal's message)."""

    item: str
    reason: str

    def to_json(self) -> dict[str, str]:
        return {"item": self.item, "reason": self.reason}


class Importer(Protocol[ItemT_co]):
    """A source read as items; a bad item is yielded as a :class:`Failure`, never raised. Errors
    about the source as a whole (it does not exist, it is not of this format) are raised."""

    def items(self) -> Iterator[ItemT_co | Failure]:
        """The source's items in order, with a :class:`Failure` in place of each bad one."""
        ...


def failure(item: str, exc: SoulpassError) -> Failure:
    """The failure of ``item`` refused with ``exc``."""
    return Failure(item, str(exc))


def split(results: Iterable[ItemT | Failure]) -> tuple[list[ItemT], list[Failure]]:
    """Items and failures apart, each in source order."""
    items: list[ItemT] = []
    failures: list[Failure] = []
    for r in results:
        if isinstance(r, Failure):
            failures.append(r)
        else:
            items.append(r)
    return items, failures
