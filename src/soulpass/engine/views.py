"""What :meth:`Account.log`, :meth:`~Account.diff` and :meth:`~Account.history` return: frozen
models (``show`` returns the record or document model itself).

Each has ``to_json()``: the document ``soulpass log|diff|history --json``, REST and MCP send
(``tests/test_views_json.py`` pins it). Models are built when first used (``defer_build``): a
search never needs them.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from soulpass.store.contract import VersionDiff, VersionEntry

__all__ = ["Diff", "DocumentChange", "FieldChanges", "HistoryStep", "KeyChanges", "LogEntry"]


class _View(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)


class LogEntry(BaseModel):
    """One version of the log (a bulk version's id lists left out). The fields every kind of
    version may have are typed; the rest varies by kind (an archive's id map and rejections, an
    edit's fields, a forget's tombstone ...) and is kept as logged (``model_extra``)."""

    model_config = ConfigDict(frozen=True, extra="allow", defer_build=True)

    version: int
    parent: int | None = None
    timestamp: str | None = None  # ISO 8601, as logged
    kind: str = ""  # archive, edit, rollback, forget, bulk, import ... ("" for version 0)
    source_sandbox: str | None = None  # the sandbox an archive committed
    sandbox_name: str | None = None
    counts: dict[str, int] = Field(default_factory=dict)  # the account's totals at this version
    added: dict[str, list[str]] = Field(default_factory=dict)  # record ids by kind
    superseded: list[dict[str, Any]] = Field(default_factory=list)  # {"fact", "by"}
    replaced: list[str] = Field(default_factory=list)
    retired: list[str] = Field(default_factory=list)
    edited_as: str | None = None  # an edit: the id to read now (a superseding fact's)
    rolled_back_to: int | None = None
    forgotten: list[str] = Field(default_factory=list)
    reason: str | None = None
    by: str | None = None

    @classmethod
    def of(cls, entry: VersionEntry) -> LogEntry:
        return cls.model_validate(entry.fields)

    def to_json(self) -> dict[str, Any]:
        """The entry as logged: the fields it holds, none added."""
        return self.model_dump(mode="json", exclude_unset=True)


class KeyChanges(_View):
    """Dotted key paths (``data.mood``) added, changed and removed inside a document."""

    added: list[str]
    changed: list[str]
    removed: list[str]


class DocumentChange(_View):
    path: str
    change: Literal["created", "changed", "removed"]
    keys: KeyChanges


class Diff(_View):
    """What changed from version ``from_version`` to ``to_version``: records added (by kind;
    prose entries by path), facts superseded, copies replaced and retired, sandboxes rebased,
    conflicts, and the documents created, changed or removed with the keys inside."""

    from_version: int = Field(serialization_alias="from")
    to_version: int = Field(serialization_alias="to")
    added: dict[str, list[str]]
    superseded: list[dict[str, str]]  # {"fact", "by"}
    replaced: list[str]
    retired: list[str]
    rebases: list[dict[str, Any]]
    conflicts: list[dict[str, Any]]
    documents: list[DocumentChange]

    @classmethod
    def of(cls, net: VersionDiff, documents: list[dict[str, Any]]) -> Diff:
        return cls(from_version=net.from_version, to_version=net.to_version,
                   added={k: list(v) for k, v in net.added.items()},
                   superseded=[{"fact": s.fact, "by": s.by} for s in net.superseded],
                   replaced=list(net.replaced), retired=list(net.retired),
                   rebases=[dict(r) for r in net.rebases], conflicts=[dict(c) for c in net.conflicts],
                   documents=[DocumentChange.model_validate(d) for d in documents])

    def to_json(self) -> dict[str, Any]:
        return self.model_dump(mode="json", by_alias=True)


class FieldChanges(_View):
    """What changed from one copy of a record to the next: fields added (with their values),
    changed (``[old, new]``) and removed."""

    added: dict[str, Any]
    changed: dict[str, list[Any]]
    removed: list[str]


class HistoryStep(_View):
    """A version that wrote a record: ``present`` False when it retired it (then ``changes`` is None)."""

    version: int
    kind: str | None
    timestamp: str | None
    present: bool
    changes: FieldChanges | None
    reason: str | None = None  # set only when the version gave one

    def to_json(self) -> dict[str, Any]:
        return self.model_dump(mode="json", exclude_unset=True)
