"""The library API: ``soulpass.open(home)`` -> accounts -> sandboxes -> versions.

Every other interface (the MSP and SKYNET facades, the CLI, REST and MCP) is a thin adapter over
this. One module per concept: ``home`` (open, :class:`Soulpass`), ``account``, ``sandbox``,
``journal`` (the Markdown journal), ``forget``, ``editing``, ``deleting`` and ``listing``; the last
five load when first used, so a search never imports them.
"""

from __future__ import annotations

from soulpass.consolidation.outcomes import (
           AlreadyArchived,
           ArchiveResult,
           AwaitingReview,
           Committed,
           Planned,
           Unchanged,
)
from soulpass.engine.account import Account
from soulpass.engine.home import EmbedderChoice, Indexing, LateChoice, RerankerChoice, Soulpass, open
from soulpass.engine.sandbox import Sandbox

__all__ = ["Account", "AlreadyArchived", "ArchiveResult", "AwaitingReview", "Committed", "EmbedderChoice", "Indexing",
           "LateChoice", "Planned", "RerankerChoice", "Sandbox", "Soulpass", "Unchanged", "open"]
