"""Record and document schemas: every value that crosses a boundary, as frozen pydantic models.

Records (episodes, turns, facts, sensory inputs) are immutable once committed and stored one per
file. Documents (core memory, user profile, knowledge graph, named states) are replaced whole and
their earlier contents kept under ``history/``. All carry the common envelope of DESIGN §2.
"""

from __future__ import annotations

import hashlib
import re
import string
from datetime import UTC, datetime
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator, model_validator

from soulpass.ids import EPOCH, check_name, check_record_id, is_permanent_id, is_temp_id, utc_now

__all__ = [
    "DOCUMENT_MODELS",
    "EPOCH",
    "RECORD_MODELS",
    "SCHEMA_VERSION",
    "BufferEvent",
    "CoreMemory",
    "CoreProposal",
    "Document",
    "Episode",
    "GKSEdge",
    "GKSGraph",
    "GKSNode",
    "MasterState",
    "ProfileUpdate",
    "Record",
    "SemanticCandidate",
    "SemanticFact",
    "SensoryRecord",
    "SessionBuffer",
    "SituationContext",
    "StateBlob",
    "StateDelta",
    "StructuredSummary",
    "TurnLLM",
    "TurnUser",
    "UserProfile",
    "normalize_text",
    "semantic_hash",
]

SCHEMA_VERSION = 1

_PUNCT = re.compile(f"[{re.escape(string.punctuation)}]")
_SPACE = re.compile(r"\s+")

Confidence = Annotated[float, Field(ge=0.0, le=1.0)]
EventType = Literal[
    "turn", "episode", "semantic_candidate", "state_delta", "core_proposal", "profile_update", "sensory",
    "clipboard_op", "wake", "inbox",  # agent tiers (soulpass.agent): only clipboard ops reach the master
    "journal",  # a prose record (soulpass.prose.JournalEntry)
]


def normalize_text(text: str) -> str:
    """Lowercase, strip punctuation, collapse whitespace (the Mira normalisation)."""
    return _SPACE.sub(" ", _PUNCT.sub("", text.lower())).strip()


def semantic_hash(text: str) -> str:
    """SHA-256 of the normalised text, hex."""
    return hashlib.sha256(normalize_text(text).encode("utf-8")).hexdigest()


class _Frozen(BaseModel):
    # defer_build: a model's validator is built when it is first used, not at import (a process that
    # only searches never builds most of them: ~0.07 s of a cold start)
    model_config = ConfigDict(frozen=True, extra="forbid", populate_by_name=True, allow_inf_nan=False,
                              defer_build=True)


def _utc(value: datetime) -> datetime:
    if value.tzinfo is None:
        return value.replace(tzinfo=UTC)
    return value.astimezone(UTC)


class Record(_Frozen):
    """The common envelope. ``version`` is the master version that wrote this copy (0 = buffer)."""

    id: str
    kind: str
    version: int = Field(default=0, ge=0)
    created_at: datetime = Field(default_factory=utc_now)
    session_id: str | None = None
    agent: str | None = None
    tags: tuple[str, ...] = ()
    text: str = ""
    semantic_hash: str = ""
    schema_version: int = SCHEMA_VERSION

    @field_validator("id")
    @classmethod
    def _check_id(cls, value: str) -> str:
        return check_record_id(value)

    @field_validator("created_at")
    @classmethod
    def _check_time(cls, value: datetime) -> datetime:
        return _utc(value)

    @field_validator("session_id", "agent")
    @classmethod
    def _check_names(cls, value: str | None) -> str | None:
        return None if value is None else check_name(value, "session_id/agent")

    def core_text(self) -> str:
        """The text the semantic hash is taken over."""
        return self.text

    @model_validator(mode="after")
    def _fill_hash(self) -> Record:
        if not self.semantic_hash:
            object.__setattr__(self, "semantic_hash", semantic_hash(self.core_text()))
        if not self.text:
            object.__setattr__(self, "text", self.core_text())
        return self

    @property
    def is_committed(self) -> bool:
        return is_permanent_id(self.id) and self.version > 0


class SituationContext(_Frozen):
    interaction_mode: str | None = None
    location_context: str | None = None
    agent_role: str | None = None
    mission_goal: str | None = None


class StructuredSummary(_Frozen):
    action_taken: str = ""
    key_outcome: str = ""
    future_implication: str = ""


class Episode(Record):
    """Episodic memory V3 (MSP spec §2). ``episode_id`` always equals ``id``."""

    kind: Literal["episode"] = "episode"
    episode_id: str = ""
    turn_refs: tuple[str, ...] = ()
    persona_id: str | None = None
    event_id: str | None = None
    situation_context: SituationContext = Field(default_factory=SituationContext)  # not built at import
    summary: StructuredSummary = Field(default_factory=StructuredSummary)
    RI_global: float | None = None
    encoding_level: str | None = None
    annotations: dict[str, Any] = Field(default_factory=dict)

    @model_validator(mode="before")
    @classmethod
    def _align_ids(cls, data: Any) -> Any:
        if isinstance(data, dict):
            data = dict(data)
            eid, rid = data.get("episode_id"), data.get("id")
            if eid and not rid:
                data["id"] = eid
            elif rid and not eid:
                data["episode_id"] = rid
            elif eid and rid and eid != rid:
                raise ValueError(f"episode_id {eid!r} differs from id {rid!r}")
        return data

    @field_validator("turn_refs")
    @classmethod
    def _check_refs(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        return tuple(check_record_id(v, "turn_ref") for v in value)

    def core_text(self) -> str:
        s = self.summary
        parts = [s.action_taken, s.key_outcome, s.future_implication]
        return " ".join(p for p in parts if p) or self.text


class TurnUser(Record):
    """What the user said (MSP spec §3.1)."""

    kind: Literal["turn_user"] = "turn_user"
    text_excerpt: str
    emotion_signal: str | None = None
    salience_anchor: tuple[str, ...] = ()
    intent: str | None = None
    episode_ref: str | None = None

    @field_validator("episode_ref")
    @classmethod
    def _check_ref(cls, value: str | None, info: ValidationInfo) -> str | None:
        return None if value is None else check_record_id(value, str(info.field_name))

    def core_text(self) -> str:
        return self.text_excerpt


class TurnLLM(Record):
    """What the agent answered (MSP spec §3.2)."""

    kind: Literal["turn_llm"] = "turn_llm"
    text_excerpt: str
    epistemic_mode: Literal["assert", "reflect", "hypothesize", "caution"] = "assert"
    confidence: Confidence = 1.0
    reply_to: str | None = None
    episode_ref: str | None = None

    @field_validator("episode_ref", "reply_to")
    @classmethod
    def _check_ref(cls, value: str | None, info: ValidationInfo) -> str | None:
        return None if value is None else check_record_id(value, str(info.field_name))

    def core_text(self) -> str:
        return self.text_excerpt


class SemanticFact(Record):
    """A subject-predicate-object fact. Never edited: a newer fact supersedes it."""

    kind: Literal["fact"] = "fact"
    subject: str = Field(min_length=1)
    predicate: str = Field(min_length=1)
    object: str
    confidence: Confidence
    source_refs: tuple[str, ...] = ()
    valid_from_version: int = Field(default=0, ge=0)
    superseded_by: str | None = None
    valid_to_version: int | None = None
    supersedes: tuple[str, ...] = ()

    @field_validator("source_refs", "supersedes")
    @classmethod
    def _check_refs(cls, value: tuple[str, ...], info: ValidationInfo) -> tuple[str, ...]:
        return tuple(check_record_id(v, str(info.field_name)) for v in value)

    @field_validator("superseded_by")
    @classmethod
    def _check_ref(cls, value: str | None) -> str | None:
        return None if value is None else check_record_id(value, "superseded_by")

    def core_text(self) -> str:
        return f"{self.subject} {self.predicate} {self.object}"

    @model_validator(mode="after")
    def _spo_hash(self) -> SemanticFact:
        # Facts are deduplicated by their normalised SPO, whatever free text came with them.
        object.__setattr__(self, "semantic_hash", semantic_hash(self.core_text()))
        return self


class SensoryRecord(Record):
    """A raw input kept verbatim (a page, a file, a message) with its provenance."""

    kind: Literal["sensory"] = "sensory"
    modality: str = "text"
    source: str | None = None
    media_type: str = "text/plain"
    content: str
    content_sha256: str = ""
    size_bytes: int = 0

    def core_text(self) -> str:
        return self.content

    @model_validator(mode="after")
    def _content_hash(self) -> SensoryRecord:
        raw = self.content.encode("utf-8")
        object.__setattr__(self, "content_sha256", hashlib.sha256(raw).hexdigest())
        object.__setattr__(self, "size_bytes", len(raw))
        return self


RECORD_MODELS: dict[str, type[Record]] = {
    "episode": Episode,
    "turn_user": TurnUser,
    "turn_llm": TurnLLM,
    "fact": SemanticFact,
    "sensory": SensoryRecord,
}


# --- documents -----------------------------------------------------------------------------


class Document(_Frozen):
    """A document replaced whole; ``version`` is the master version that wrote this copy."""

    kind: str
    version: int = Field(default=0, ge=0)
    updated_at: datetime = Field(default_factory=utc_now)
    schema_version: int = SCHEMA_VERSION


class CoreMemory(Document):
    kind: Literal["core_memory"] = "core_memory"
    identity: dict[str, Any] = Field(default_factory=dict)
    values: tuple[str, ...] = ()
    worldview: dict[str, Any] = Field(default_factory=dict)


class UserProfile(Document):
    kind: Literal["user_profile"] = "user_profile"
    fields: dict[str, Any] = Field(default_factory=dict)
    key_times: dict[str, datetime] = Field(default_factory=dict)


class StateBlob(Document):
    """A named internal state (ire, ehm, rms, ri, qualia or any other name)."""

    kind: Literal["state"] = "state"
    name: str
    data: dict[str, Any] = Field(default_factory=dict)
    key_times: dict[str, datetime] = Field(default_factory=dict)

    @field_validator("name")
    @classmethod
    def _check_state_name(cls, value: str) -> str:
        return check_name(value, "state name")


class GKSNode(_Frozen):
    id: str
    label: str
    fact_refs: tuple[str, ...] = ()


class GKSEdge(_Frozen):
    source: str
    source_label: str = ""
    predicate: str
    target: str
    target_label: str = ""
    fact_refs: tuple[str, ...] = ()


class GKSGraph(Document):
    """The Genesis Knowledge System: nodes, edges and the facts behind them.

    On disk only edges are stored, sharded by source node
    (``09_Genesis_Knowledge_System/shards/<xxx>.json``) so a commit rewrites only the shards its
    facts touch; nodes (with the facts they take part in) are derived; ``GKS_data.json`` holds
    the totals.
    """

    kind: Literal["gks"] = "gks"
    nodes: tuple[GKSNode, ...] = ()
    edges: tuple[GKSEdge, ...] = ()


DOCUMENT_MODELS: dict[str, type[Document]] = {
    "core_memory": CoreMemory,
    "user_profile": UserProfile,
    "state": StateBlob,
    "gks": GKSGraph,
}


# --- buffer payloads -----------------------------------------------------------------------


class SemanticCandidate(_Frozen):
    """A fact proposed during a session; ``content`` alone is split into SPO at consolidation."""

    id: str = ""
    type: Literal["fact"] = "fact"
    content: str | None = None
    subject: str | None = None
    predicate: str | None = None
    object: str | None = None
    confidence: Confidence = 0.0
    source_refs: tuple[str, ...] = ()

    @field_validator("source_refs")
    @classmethod
    def _check_refs(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        return tuple(check_record_id(v, "source_ref") for v in value)

    @model_validator(mode="after")
    def _has_content(self) -> SemanticCandidate:
        spo = (self.subject, self.predicate, self.object)
        if not self.content and not all(x is not None and x != "" for x in spo[:2]):
            raise ValueError("a semantic candidate needs 'content' or subject and predicate")
        if self.id and not is_temp_id(self.id):
            raise ValueError(f"candidate id {self.id!r} must be a temporary id (sf_temp_…)")
        return self


class StateDelta(_Frozen):
    name: str
    data: dict[str, Any]

    @field_validator("name")
    @classmethod
    def _check_state_name(cls, value: str) -> str:
        return check_name(value.removesuffix("_state") or value, "state name")


class CoreProposal(_Frozen):
    """A proposed change to core memory, applied only with high confidence (careful_merge)."""

    section: Literal["identity", "values", "worldview"]
    key: str | None = None
    value: Any
    confidence: Confidence
    reason: str = Field(min_length=1)

    @model_validator(mode="after")
    def _key_rules(self) -> CoreProposal:
        if self.section != "values" and not self.key:
            raise ValueError(f"a core proposal for {self.section!r} needs a key")
        if self.section == "values" and not isinstance(self.value, str):
            raise ValueError("a core proposal for 'values' adds one string value")
        return self


class ProfileUpdate(_Frozen):
    data: dict[str, Any]


class BufferEvent(_Frozen):
    """One line of ``session_buffer.jsonl``."""

    event_id: str
    type: EventType
    at: datetime
    agent: str | None = None
    data: dict[str, Any]

    @field_validator("at")
    @classmethod
    def _check_time(cls, value: datetime) -> datetime:
        return _utc(value)


class SessionBuffer(_Frozen):
    """The seed's session-buffer view of a sandbox (MSP versioning, "Session Buffer Schema")."""

    model_config = ConfigDict(frozen=True, extra="allow", defer_build=True)

    sandbox_id: str
    created_at: datetime
    parent_version: int
    new_episodes: tuple[dict[str, Any], ...] = ()
    new_turns: tuple[dict[str, Any], ...] = ()
    semantic_candidates: tuple[dict[str, Any], ...] = ()
    state_deltas: dict[str, dict[str, Any]] = Field(default_factory=dict)
    core_proposals: tuple[dict[str, Any], ...] = ()
    profile_updates: dict[str, Any] = Field(default_factory=dict)
    sensory: tuple[dict[str, Any], ...] = ()
    metadata: dict[str, Any] = Field(default_factory=dict)


class MasterState(_Frozen):
    """The seed's whole-master view (MSP versioning, "Master State Schema")."""

    version: int
    timestamp: datetime | None = None
    user_id: str
    episodic_memory: tuple[dict[str, Any], ...] = ()
    semantic_memory: dict[str, Any] = Field(default_factory=dict)
    sensory_memory: tuple[dict[str, Any], ...] = ()
    core_memory: dict[str, Any] = Field(default_factory=dict)
    user_profile: dict[str, Any] = Field(default_factory=dict)
    states: dict[str, dict[str, Any]] = Field(default_factory=dict)
    metadata: dict[str, Any] = Field(default_factory=dict)
