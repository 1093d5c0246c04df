"""Soulpass — the Memory & Soul Passport: versioned, portable long-term memory for AI agents."""

from soulpass.consolidation.rules import Rules
from soulpass.engine import (
    Account,
    AlreadyArchived,
    ArchiveResult,
    Committed,
    Planned,
    Sandbox,
    Soulpass,
    Unchanged,
    open,
)
from soulpass.errors import (
    BackendUnavailable,
    ConfigError,
    Conflict,
    Corrupted,
    InvalidInput,
    NotFound,
    SoulpassError,
)
from soulpass.msp import MSP, ConsolidatedData
from soulpass.records import (
    CoreMemory,
    Episode,
    GKSGraph,
    MasterState,
    SemanticFact,
    SensoryRecord,
    SessionBuffer,
    StateBlob,
    TurnLLM,
    TurnUser,
    UserProfile,
)
from soulpass.sessions.buffer import Limits
from soulpass.skynet import MemoryManager

__version__ = "0.1.0"

__all__ = [
    "MSP",
    "Account",
    "AlreadyArchived",
    "ArchiveResult",
    "BackendUnavailable",
    "Committed",
    "ConfigError",
    "Conflict",
    "ConsolidatedData",
    "CoreMemory",
    "Corrupted",
    "Episode",
    "GKSGraph",
    "InvalidInput",
    "Limits",
    "MasterState",
    "MemoryManager",
    "NotFound",
    "Planned",
    "Rules",
    "Sandbox",
    "SemanticFact",
    "SensoryRecord",
    "SessionBuffer",
    "SoulpassError",
    "StateBlob",
    "Soulpass",
    "TurnLLM",
    "TurnUser",
    "Unchanged",
    "UserProfile",
    "__version__",
    "open",
]
