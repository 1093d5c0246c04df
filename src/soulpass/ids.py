"""Identifiers: validation of every name that becomes a path, and the id formats of the spec.

Permanent record ids follow the MSP spec: ``EP_YYYYMMDD_NNN`` (episode), ``TU_…`` (user turn),
``TL_…`` (LLM turn), ``SF_…`` (semantic fact), ``SR_…`` (sensory record); ``JE_…`` names a journal
entry (prose record). Records in a session buffer carry temporary ids (``ep_temp_<hex>`` …) until
consolidation assigns permanent ones.
"""

from __future__ import annotations

import re
import secrets
from datetime import UTC, datetime

from soulpass.errors import InvalidInput

__all__ = [
    "EPOCH",
    "IMPORT_TAG_PREFIX",
    "MAX_NAME_LENGTH",
    "PERMANENT_PREFIXES",
    "TEMP_PREFIXES",
    "check_name",
    "check_record_id",
    "is_permanent_id",
    "is_temp_id",
    "new_sandbox_id",
    "new_temp_id",
    "permanent_id",
    "record_date",
    "utc_now",
]

# The tag an importer gives each record: ``import:`` and the content identity of the item it came
# from (soulpass.importers.conversations); a forget keeps the identities (soulpass.engine.forget).
IMPORT_TAG_PREFIX = "import:"

MAX_NAME_LENGTH = 128

# Record kind -> permanent id prefix.
PERMANENT_PREFIXES: dict[str, str] = {
    "episode": "EP",
    "turn_user": "TU",
    "turn_llm": "TL",
    "fact": "SF",
    "sensory": "SR",
    "journal": "JE",  # prose records (journal, experiment, reflection, conversation entries)
}
TEMP_PREFIXES: dict[str, str] = {kind: f"{p.lower()}_temp_" for kind, p in PERMANENT_PREFIXES.items()}

_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
_PERMANENT_RE = re.compile(r"^(EP|TU|TL|SF|SR|JE)_(\d{8})_(\d{3,9})$")
_TEMP_RE = re.compile(r"^(ep|tu|tl|sf|sr|je)_temp_[0-9a-f]{6,32}$")


EPOCH = datetime(1970, 1, 1, tzinfo=UTC)  # updated_at of a document that was never written


def utc_now() -> datetime:
    return datetime.now(UTC)


def check_name(value: object, what: str = "name") -> str:
    """Return ``value`` if it is safe as one path component, else raise ``InvalidInput``.

    Refused: non-strings, empty, ``.``/``..``, separators, NUL and control characters,
    anything outside ``[A-Za-z0-9._-]`` (first character alphanumeric), over-long names.
    """
    if not isinstance(value, str):
        raise InvalidInput(f"{what} must be a string, got {type(value).__name__}", field=what)
    if not value:
        raise InvalidInput(f"{what} is empty", field=what)
    if len(value) > MAX_NAME_LENGTH:
        raise InvalidInput(
            f"{what} is {len(value)} characters long (limit {MAX_NAME_LENGTH})", field=what
        )
    if any(ord(c) < 32 or ord(c) == 127 for c in value):
        raise InvalidInput(f"{what} {value!r} contains a control character or NUL", field=what)
    if "/" in value or "\\" in value or value in (".", ".."):
        raise InvalidInput(f"{what} {value!r} contains a path separator or is a dot name", field=what)
    if not _NAME_RE.match(value) or ".." in value:
        raise InvalidInput(
            f"{what} {value!r} may only contain letters, digits, '.', '_' and '-' "
            "and must start with a letter or digit",
            field=what,
        )
    return value


def is_permanent_id(value: str) -> bool:
    m = _PERMANENT_RE.match(value)
    if not m:
        return False
    try:
        datetime.strptime(m.group(2), "%Y%m%d")
    except ValueError:
        return False
    return True


def is_temp_id(value: str) -> bool:
    return bool(_TEMP_RE.match(value))


def check_record_id(value: object, what: str = "record id") -> str:
    """Validate a record id (permanent or temporary); it later becomes a file name."""
    name = check_name(value, what)
    if not (is_permanent_id(name) or is_temp_id(name)):
        raise InvalidInput(
            f"{what} {name!r} is neither a permanent id (EP_YYYYMMDD_NNN, TU_…, TL_…, SF_…, SR_…) "
            "nor a temporary id (ep_temp_<hex> …)",
            field=what,
        )
    return name


def record_date(record_id: str) -> tuple[str, str, str]:
    """``EP_20260128_001`` -> ``("2026", "01", "28")``; raises for non-permanent ids."""
    m = _PERMANENT_RE.match(record_id)
    if not m or not is_permanent_id(record_id):
        raise InvalidInput(f"{record_id!r} is not a permanent record id", field="record id")
    day = m.group(2)
    return day[:4], day[4:6], day[6:8]


def permanent_id(kind: str, day: str, number: int) -> str:
    """``permanent_id("episode", "20260128", 1) -> "EP_20260128_001"``."""
    return f"{PERMANENT_PREFIXES[kind]}_{day}_{number:03d}"


def new_temp_id(kind: str) -> str:
    return TEMP_PREFIXES[kind] + secrets.token_hex(6)


def new_sandbox_id(now: datetime | None = None) -> str:
    stamp = (now or utc_now()).strftime("%Y%m%d_%H%M%S")
    return f"sb_{stamp}_{secrets.token_hex(3)}"
