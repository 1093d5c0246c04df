"""Who speaks a turn, as ranking reads it: whether a query names the speaker, and each speaker's mean."""

from __future__ import annotations

import re
from collections.abc import Collection

from soulpass.index.catalog import Traits

__all__ = ["is_users", "mean_by_speaker", "names_speaker", "speaker", "speaks_first_person"]


def speaker(t: Traits) -> tuple[str, str | None]:
    return t.kind, t.agent


def mean_by_speaker(values: dict[str, float], traits: dict[str, Traits]) -> dict[tuple[str, str | None], float]:
    """The mean of ``values`` over each speaker's candidates: a long-winded speaker (an assistant's
    replies) is compared with itself, not with the terse one."""
    groups: dict[tuple[str, str | None], list[float]] = {}
    for i, v in values.items():
        groups.setdefault(speaker(traits[i]), []).append(v)
    return {s: sum(vs) / len(vs) for s, vs in groups.items()}


def is_users(t: Traits) -> bool:
    """A turn the user wrote (a ``turn_user`` with no other speaker named)."""
    return t.kind == "turn_user" and t.agent in (None, "user")


_FIRST_PERSON = re.compile(r"\b(i|me|my|mine|myself)\b", re.IGNORECASE)


def speaks_first_person(query: str) -> bool:
    """Whether the query speaks as the user ("what did I say about …", "my deadline"): in a chat
    between a user and an assistant that names the user as the speaker it asks about, just as
    "What did Caroline say" names Caroline."""
    return _FIRST_PERSON.search(query) is not None


def names_speaker(agent: str | None, terms: Collection[str]) -> bool:
    """Whether the query's terms name ``agent`` (every word of it: "ann_lee" needs "ann" and "lee")."""
    words = [w for w in re.split(r"[^0-9a-z]+", (agent or "").lower()) if w]
    return bool(words) and all(w in terms for w in words)
