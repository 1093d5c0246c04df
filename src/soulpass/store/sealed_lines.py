"""Sealed JSONL lines: each line carries its sequence number and a checksum chained to the line before.

A sealed line is a JSON object whose last two members are ``"seq"`` and ``"chain"``::

    {...,"seq":7,"chain":"1a2b3c4d"}

``chain`` is the CRC-32 of the line up to and with its ``seq`` member, continued from the chain of
the line before it (from 0 for the first line). So a line changed in place, lost, repeated or moved
breaks the chain or the sequence at a line that can be named, and a line whose seal was stripped
breaks the next line's chain. Lines written before sealing (no ``seq``/``chain``) still read: they
may open a file (a legacy prefix, continued by sealed lines once a new release appends), but once a
file holds a sealed line every later line must be sealed.

Used by the session buffer (``seq`` counts its lines from 1) and the version log (``seq`` is the
version). Neutral: it knows nothing of what the lines hold.
"""

from __future__ import annotations

import re
import zlib
from dataclasses import dataclass
from pathlib import PurePath

from soulpass.errors import Corrupted

__all__ = ["ChainCheck", "Seal", "link_of", "seal", "seal_of", "unsealed"]

_SEAL = re.compile(rb',"seq":(\d{1,19}),"chain":"([0-9a-f]{8})"\}\s*$')
START = "00000000"


@dataclass(frozen=True)
class Seal:
    """The sequence number and chain value a line ends with."""

    seq: int
    chain: str


def seal(line: bytes, seq: int, previous: str) -> bytes:
    """``line`` (one JSON object, no newline) sealed as number ``seq`` after a line whose link is
    ``previous`` (:func:`link_of`; ``START`` for the first line)."""
    covered = line.rstrip()[:-1] + b',"seq":%d' % seq
    return covered + b',"chain":"%08x"}' % zlib.crc32(covered, int(previous, 16))


def seal_of(raw: bytes) -> Seal | None:
    """The seal ``raw`` ends with; None for an unsealed line."""
    found = _SEAL.search(raw)
    return None if found is None else Seal(int(found.group(1)), found.group(2).decode("ascii"))


def link_of(raw: bytes) -> str:
    """What the line after ``raw`` chains to: a sealed line's chain, an unsealed line's own CRC-32."""
    found = seal_of(raw)
    return found.chain if found is not None else format(zlib.crc32(raw.strip()), "08x")


def unsealed(raw: bytes) -> bytes:
    """``raw`` without its seal (the JSON object as it was before sealing); unsealed lines as they are."""
    found = _SEAL.search(raw)
    return raw if found is None else raw[:found.start()] + b"}"


@dataclass
class ChainCheck:
    """Verifies the lines of one file in order: :meth:`open` each whole line with the sequence
    number it must carry. ``what`` names the file in messages (``"session buffer"``)."""

    path: PurePath
    what: str
    remedy: str
    link: str = START
    sealed: bool = False

    def open(self, raw: bytes, n: int, seq: int) -> bytes:
        """Line ``n`` (1-based, of the file) without its seal; ``Corrupted`` naming ``path:n`` when
        it is not the line number ``seq`` that follows the lines before it."""
        found = _SEAL.search(raw)
        if found is None:
            if self.sealed:
                raise self._bad(n, "has no sequence number or checksum although the lines before it have "
                                   "(its seal was stripped, or a line from elsewhere was put in)")
            self.link = format(zlib.crc32(raw.strip()), "08x")
            return raw
        got = int(found.group(1))
        if got != seq:
            if got < seq:
                why = (f"carries sequence number {got} where {seq} was due: a line repeated or moved "
                       f"(lines up to {seq - 1} were read already)")
            else:
                missing = str(seq) if got == seq + 1 else f"{seq} to {got - 1}"
                why = f"carries sequence number {got} where {seq} was due: line(s) {missing} are missing"
            raise self._bad(n, why)
        if format(zlib.crc32(raw[:found.end(1)], int(self.link, 16)), "08x") != found.group(2).decode("ascii"):
            raise self._bad(n, "is damaged: its checksum does not match (the line, or the one before it, "
                               "was changed)")
        self.link, self.sealed = found.group(2).decode("ascii"), True
        return raw[:found.start()] + b"}"

    def _bad(self, n: int, why: str) -> Corrupted:
        return Corrupted(f"{self.path}:{n} {why}: the {self.what} cannot be read whole; {self.remedy}",
                         path=str(self.path), line=n)
