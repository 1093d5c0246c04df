"""Request and response bodies of the REST API (frozen pydantic models, unknown fields refused)."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictInt

from soulpass.consolidation.preview import PreviewItem
from soulpass.ids import MAX_NAME_LENGTH
from soulpass.index.relevance import relevance
from soulpass.index.results import SearchResults
from soulpass.index.search import Hit
from soulpass.server.keys import DEFAULT_ROLE, Role
from soulpass.sessions.sandbox import SandboxInfo

__all__ = [
    "NAME_PATTERN",
    "AccountDeletedOut",
    "AccountIn",
    "AccountOut",
    "ApproveIn",
    "ArchiveIn",
    "ArchiveOut",
    "CoreIn",
    "ErrorOut",
    "FactIn",
    "HitOut",
    "KeyIn",
    "KeyOut",
    "NewKeyOut",
    "RollbackIn",
    "SandboxIn",
    "SandboxOut",
    "SearchIn",
    "SearchOut",
    "SensoryIn",
    "StateIn",
    "TurnIn",
    "VersionOut",
    "WrittenOut",
]

NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._-]*$"
Name = Field(pattern=NAME_PATTERN, min_length=1, max_length=MAX_NAME_LENGTH)


class _In(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class _Out(BaseModel):
    model_config = ConfigDict(frozen=True)


class ErrorOut(_Out):
    """Every error: the error's type, one line naming the problem, and the ids involved."""

    error: str = Field(description="NotFound, Conflict, InvalidInput, Unauthorized, Forbidden, TooLarge, ...")
    message: str
    details: dict[str, Any] = Field(default_factory=dict)


class AccountIn(_In):
    name: str = Name


class AccountOut(_Out):
    account: str
    version: int
    sandboxes: int


class AccountDeletedOut(_Out):
    """The tombstone of a deleted account, and the backups outside the home that still hold it."""

    account: str
    deleted_at: str
    by: str | None
    version: int
    keys_revoked: int
    backups_holding: list[str]


class KeyIn(_In):
    label: str = Field(default="", max_length=200)
    role: Role = Field(default=DEFAULT_ROLE, description="agent: reads, searches, writes to sandboxes and archives "
                                                         "them; owner: also rolls back, edits, forgets, exports, "
                                                         "imports (docs/rest.md, Roles)")


class KeyOut(_Out):
    key_id: str
    account: str | None
    admin: bool
    role: Literal["agent", "owner", "admin"]
    created_at: str
    label: str


class NewKeyOut(KeyOut):
    key: str = Field(description="The API key itself: shown this once, only its hash is stored.")


class SandboxIn(_In):
    name: str = Field(min_length=1, max_length=200)
    sandbox_id: str | None = Field(default=None, pattern=NAME_PATTERN, max_length=MAX_NAME_LENGTH)


class SandboxOut(_Out):
    sandbox_id: str
    name: str
    account: str
    parent_version: int
    created_at: datetime
    archived_as: int | None = None

    @classmethod
    def of(cls, info: SandboxInfo) -> SandboxOut:
        return cls(sandbox_id=info.sandbox_id, name=info.name, account=info.account,
                   parent_version=info.parent_version, created_at=info.created_at, archived_as=info.archived_as)


class WrittenOut(_Out):
    """What a write appended to the session buffer (temporary ids until archived)."""

    id: str | None = None
    warning: str | None = Field(default=None, description="Set when what was written will be rejected at archive, "
                                                          "and why (a fact's confidence under the rules' minimum)")


class TurnIn(_In):
    speaker: str = Field(default="user", description="'user', or the agent's name for an agent turn")
    text: str
    fields: dict[str, Any] = Field(default_factory=dict,
                                   description="More turn fields (intent, emotion_signal, confidence, ...)")


class FactIn(_In):
    subject: str | None = None
    predicate: str | None = None
    object: str | None = None
    content: str | None = Field(default=None, description="Free text such as 'User likes coffee'")
    confidence: float = Field(ge=0.0, le=1.0)
    source_refs: list[str] = Field(default_factory=list)


class StateIn(_In):
    data: dict[str, Any]


class CoreIn(_In):
    section: Literal["identity", "values", "worldview"]
    key: str | None = None
    value: Any
    confidence: float = Field(ge=0.0, le=1.0)
    reason: str


class SensoryIn(_In):
    content: str
    source: str | None = None
    modality: str = "text"
    media_type: str = "text/plain"


class ArchiveIn(_In):
    dry_run: StrictBool = False  # strict: "yes" or 1 is an error, not a dry run
    exclude: list[str] = Field(default_factory=list, max_length=10_000, description=(
        "Item ids (the preview's `items[].id`) to leave out: they reach nothing (master, index, vectors); "
        "the version entry names them with who and why. Needs a key that may approve"))
    reason: str | None = Field(default=None, max_length=2_000, description="Why the items are excluded")


class ApproveIn(_In):
    exclude: list[str] = Field(default_factory=list, max_length=10_000,
                               description="Item ids to leave out of the approved archive")
    reason: str | None = Field(default=None, max_length=2_000, description="Why the items are excluded")


class ArchiveOut(_Out):
    status: Literal["committed", "planned", "already_archived", "unchanged", "awaiting_review"] = Field(
        description="unchanged: the sandbox held nothing to store, no version was committed (version is HEAD); "
                    "awaiting_review (HTTP 202): the review policy holds items for a person, nothing was "
                    "committed, the sandbox stays open; `items` is the preview, `needs_review` the held ids")
    version: int
    summary: dict[str, Any] | None = None
    items: list[PreviewItem] | None = Field(default=None, description="What the archive does, item by item")
    needs_review: list[str] | None = Field(default=None, description="Ids of the items awaiting a person")
    warning: str | None = Field(default=None, description=(
        "committed, but a step after the commit point failed (a full disk): the version is durable and "
        "recovery finishes the rest (files into place, the sandbox removed) at the next commit or open"))


class RollbackIn(_In):
    version: StrictInt = Field(ge=0)  # strict: true or "1" is an error, not version 1


class VersionOut(_Out):
    version: int


class SearchIn(_In):
    query: str = Field(max_length=10_000)
    k: int = Field(default=10, ge=1, le=200)
    kinds: list[str] = Field(default_factory=list)
    agent: str | None = None
    tags: list[str] = Field(default_factory=list)
    since: datetime | None = None
    until: datetime | None = None
    session_id: str | None = None
    persona_id: str | None = None
    event_id: str | None = None
    source: str | None = Field(default=None, description="Only what this importer or tool brought in "
                                                         "(tag `source:<source>`: chatgpt, claude, mem0, …)")
    at: int | None = Field(default=None, ge=0, description="Search as of this version (account search only)")
    min_score: float | None = Field(default=None, ge=0.0, le=1.0,
                                    description="Only hits of at least this relevance (0 to 1)")


class HitOut(_Out):
    id: str
    kind: str
    version: int
    path: str = Field(description="Where the record lives, relative to the account folder")
    text: str
    relevance: float = Field(description="How well the hit matches the query by itself, 0 to 1: the share of the "
                                         "query's words it holds, or its cosine similarity, the larger")
    score: float = Field(description="The ranking's score, relative to the other hits (can be 0 or negative)")
    parts: dict[str, float] = Field(default_factory=dict)

    @classmethod
    def of(cls, hit: Hit, query: str) -> HitOut:
        return cls(id=hit.id, kind=hit.kind, version=hit.version, path=hit.path, text=hit.text,
                   relevance=relevance(query, hit), score=hit.score, parts=hit.parts)


class SearchOut(_Out):
    hits: list[HitOut]
    pending_embeddings: int = Field(default=0, description="Committed records without a vector yet")
    incomplete: bool = Field(default=False, description="True when records not embedded yet may be missing")

    @classmethod
    def of(cls, hits: SearchResults, query: str) -> SearchOut:
        pending = hits.pending_embeddings
        return cls(hits=[HitOut.of(h, query) for h in hits], pending_embeddings=pending, incomplete=pending > 0)
