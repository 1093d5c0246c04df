"""Agent memory tiers (Volition 7.0, seed 004): working log, clipboards, sleep and orientation,
scribe, ingest, RAG inbox and context assembly over a sandbox. See docs/agent.md."""

from soulpass.agent.chat import ChatEndpoint, ChatSummariser
from soulpass.agent.inbox import BufferInbox, Inbox, RedisInbox
from soulpass.agent.memory import AgentMemory
from soulpass.agent.scribe import EpisodeDraft, ExtractiveSummariser, Summariser, SummaryFailed, SummaryRequest
from soulpass.agent.types import (
    AgentConfig,
    ClipboardView,
    ContextBlock,
    ContextSection,
    InboxMessage,
    IngestResult,
    LogEntry,
    Orientation,
    RagResult,
    ScribeResult,
)

__all__ = [
    "AgentConfig",
    "AgentMemory",
    "BufferInbox",
    "ChatEndpoint",
    "ChatSummariser",
    "ClipboardView",
    "ContextBlock",
    "ContextSection",
    "EpisodeDraft",
    "ExtractiveSummariser",
    "Inbox",
    "InboxMessage",
    "IngestResult",
    "LogEntry",
    "Orientation",
    "RagResult",
    "RedisInbox",
    "ScribeResult",
    "Summariser",
    "SummaryFailed",
    "SummaryRequest",
]
