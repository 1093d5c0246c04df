"""Soulpass — the Memory & Soul Passport: versioned, portable long-term memory for AI agents.

The names below are imported when first used (PEP 562), so ``import soulpass`` and the CLI's
``--help`` do not pay for the engine, pydantic models and numpy until something needs them.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from soulpass.consolidation.preview import ArchivePreview, PreviewItem
    from soulpass.consolidation.rules import Rules
    from soulpass.engine import (
        Account,
        AlreadyArchived,
        ArchiveResult,
        AwaitingReview,
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
        StorageFull,
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

_WHERE = {
    "Rules": "soulpass.consolidation.rules",
    **dict.fromkeys(("ArchivePreview", "PreviewItem"), "soulpass.consolidation.preview"),
    **dict.fromkeys(("Account", "AlreadyArchived", "ArchiveResult", "AwaitingReview", "Committed", "Planned",
                     "Sandbox", "Soulpass", "Unchanged", "open"), "soulpass.engine"),
    **dict.fromkeys(("BackendUnavailable", "ConfigError", "Conflict", "Corrupted", "InvalidInput", "NotFound",
                     "SoulpassError", "StorageFull"), "soulpass.errors"),
    **dict.fromkeys(("MSP", "ConsolidatedData"), "soulpass.msp"),
    **dict.fromkeys(("CoreMemory", "Episode", "GKSGraph", "MasterState", "SemanticFact", "SensoryRecord",
                     "SessionBuffer", "StateBlob", "TurnLLM", "TurnUser", "UserProfile"), "soulpass.records"),
    "Limits": "soulpass.sessions.buffer",
    "MemoryManager": "soulpass.skynet",
}


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module 'soulpass' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # once: later lookups are plain attribute reads
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_WHERE})

__version__ = "0.1.0"

__all__ = [
    "MSP",
    "Account",
    "AlreadyArchived",
    "ArchivePreview",
    "ArchiveResult",
    "AwaitingReview",
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
    "PreviewItem",
    "Rules",
    "Sandbox",
    "SemanticFact",
    "SensoryRecord",
    "SessionBuffer",
    "SoulpassError",
    "StateBlob",
    "StorageFull",
    "Soulpass",
    "TurnLLM",
    "TurnUser",
    "Unchanged",
    "UserProfile",
    "__version__",
    "open",
]
