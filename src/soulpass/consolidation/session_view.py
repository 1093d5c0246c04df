"""What a sandbox's own facts do to its search: a committed fact the session's proposed facts
will supersede at archive ("Ann lives in Paris", when the session says "Ann lives in Lyon") does
not outrank the fact that supersedes it.

The ranking itself is the index's and is not touched: the superseded hits only move down.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import Field, replace
from datetime import datetime
from typing import Any, ClassVar, Protocol, TypeVar

from soulpass.consolidation.plan import plan_consolidation
from soulpass.consolidation.rules import Rules
from soulpass.ids import is_temp_id
from soulpass.records import BufferEvent
from soulpass.sessions.sandbox import SandboxInfo
from soulpass.store.contract import Snapshot

__all__ = ["RankedHit", "demote_superseded", "holds_committed_fact", "superseded_in_session"]


class RankedHit(Protocol):
    """A search hit as a sandbox's search ranks it (``soulpass.index.search.Hit``): planning sits
    below the index, so it names what it reads of a hit, not the index's class."""

    __dataclass_fields__: ClassVar[dict[str, Field[Any]]]  # moved hits are copies (dataclasses.replace)

    @property
    def id(self) -> str: ...

    @property
    def kind(self) -> str: ...

    @property
    def score(self) -> float: ...

    @property
    def parts(self) -> dict[str, float]: ...


H = TypeVar("H", bound=RankedHit)


def superseded_in_session(head: Snapshot, sandbox: SandboxInfo, events: Sequence[BufferEvent], rules: Rules,
                          now: datetime) -> dict[str, str]:
    """Committed fact id -> the temporary id of the session's fact that supersedes it at archive
    (the archive's own plan, made for the session's proposed facts alone; nothing is written)."""
    facts = [e for e in events if e.type == "semantic_candidate"]
    if not facts:
        return {}
    plan = plan_consolidation(head, sandbox, facts, rules, now)
    temp_of = {permanent: temp for temp, permanent in plan.id_map.items()}
    return {s["fact"]: temp_of[s["by"]] for s in plan.superseded if s["by"] in temp_of}


def demote_superseded(hits: Sequence[H], superseded: Mapping[str, str]) -> list[H]:
    """``hits`` (best first) with each superseded fact that outranks its superseder moved just
    below it, or to the end when the superseder is not among the hits. A moved hit takes the
    score of the hit now above it (scores stay in order) and ``parts["superseded"] = 1``."""
    out = list(hits)
    for stale in [h for h in hits if h.id in superseded]:
        ids = [h.id for h in out]
        by = superseded[stale.id]
        if by in ids and ids.index(by) < ids.index(stale.id):
            continue  # already below it
        out.remove(stale)
        ids.remove(stale.id)
        at = ids.index(by) + 1 if by in ids else len(out)
        score = min(stale.score, out[at - 1].score) if at else stale.score
        out.insert(at, replace(stale, score=score, parts={**stale.parts, "superseded": 1.0}))
    return out


def holds_committed_fact(hits: Sequence[RankedHit]) -> bool:
    """Whether hits hold a committed fact at all (else none can be superseded in the session)."""
    return any(h.kind == "fact" and not is_temp_id(h.id) for h in hits)
