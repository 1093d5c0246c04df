"""``validate_and_merge`` for semantic facts: threshold, dedupe, contradiction, supersession."""

from __future__ import annotations

import functools
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from soulpass.consolidation.gks import GKSWorkingSet, node_id
from soulpass.consolidation.rules import SemanticRule
from soulpass.records import SemanticCandidate, SemanticFact, normalize_text, semantic_hash

__all__ = ["FactOutcome", "SemanticMerge", "functional_base", "split_spo"]

_COMMON_VERBS = (
    "likes", "dislikes", "loves", "hates", "is", "are", "was", "has", "have", "prefers", "wants",
    "needs", "uses", "knows", "owns", "enjoys", "speaks", "visited", "lives in", "works at",
    "works as", "is named", "is married to", "was born in", "plans to", "likes to",
)


def split_spo(content: str, rule: SemanticRule) -> tuple[str, str, str]:
    """Split free text such as "User likes coffee" into (subject, predicate, object).

    The first known predicate (optionally negated) after the first word splits the text; text
    with no known predicate becomes ``("note", "states", text)`` so nothing is lost.
    """
    verbs = sorted({*_COMMON_VERBS, *rule.functional_predicates, *rule.antonyms,
                    *rule.antonyms.values()}, key=len, reverse=True)
    negs = sorted(rule.negation_prefixes, key=len, reverse=True)
    neg = "|".join(re.escape(n) for n in negs)
    verb = "|".join(re.escape(v) for v in verbs)
    m = re.search(rf"\s((?:(?:{neg})\s+)?(?:{verb}))\s+(.+)$", content.strip(), re.IGNORECASE)
    if not m or not content[: m.start()].strip():
        return "note", "states", content.strip()
    subject = content[: m.start()].strip()
    return subject, m.group(1).strip(), m.group(2).strip().rstrip(".!?")


def _canonical(predicate: str, rule: SemanticRule) -> tuple[str, bool]:
    """Predicate -> (base, positive); "does not like" and "dislikes" are ("like", False)."""
    return _canonical_cached(predicate, tuple(rule.antonyms.items()), rule.negation_prefixes)


@functools.lru_cache(maxsize=8192)
def _canonical_cached(predicate: str, antonyms: tuple[tuple[str, str], ...],
                      negations: tuple[str, ...]) -> tuple[str, bool]:
    p = normalize_text(predicate)
    reverse = {normalize_text(b): normalize_text(a) for a, b in antonyms}
    if p in reverse:
        return _stem(reverse[p]), False
    for prefix in sorted(negations, key=len, reverse=True):
        n = normalize_text(prefix)
        if p.startswith(n + " "):
            return _stem(p[len(n) + 1:]), False
    return _stem(p), True


def functional_base(predicate: str, rule: SemanticRule) -> str | None:
    """The predicate's base if it is a positive functional one ("lives in" -> "live in")."""
    base, positive = _canonical(predicate, rule)
    if not positive:
        return None
    return base if base in _functional_bases(rule.functional_predicates, tuple(rule.antonyms.items()),
                                             rule.negation_prefixes) else None


@functools.lru_cache(maxsize=64)
def _functional_bases(functional: tuple[str, ...], antonyms: tuple[tuple[str, str], ...],
                      negations: tuple[str, ...]) -> frozenset[str]:
    return frozenset(_canonical_cached(f, antonyms, negations)[0] for f in functional)


def _stem(p: str) -> str:
    words = p.split()
    if words and len(words[0]) > 3 and words[0].endswith("s"):
        words[0] = words[0][:-1]
    return " ".join(words)


@dataclass(frozen=True)
class FactOutcome:
    candidate: str
    status: str  # "accepted" | "duplicate" | "rejected"
    fact_id: str | None = None
    detail: str = ""
    supersedes: tuple[str, ...] = ()


@dataclass
class SemanticMerge:
    """Runs candidates through the rule against the graph; collects facts to write."""

    rule: SemanticRule
    gks: GKSWorkingSet
    read_fact: Callable[[str], SemanticFact | None]
    new_fact_id: Callable[[SemanticCandidate], str]
    version: int
    session_id: str
    new_facts: dict[str, SemanticFact] = field(default_factory=dict)
    rewritten: dict[str, SemanticFact] = field(default_factory=dict)
    outcomes: list[FactOutcome] = field(default_factory=list)

    def _fact(self, fact_id: str) -> SemanticFact | None:
        return self.new_facts.get(fact_id) or self.rewritten.get(fact_id) or self.read_fact(fact_id)

    def add(self, cand: SemanticCandidate, source_refs: tuple[str, ...], meta: dict[str, Any]) -> FactOutcome:
        ref = cand.id or "candidate"
        if (why := self.rule.confidence_refusal(cand.confidence)) is not None:
            return self._record(FactOutcome(ref, "rejected", detail=why))
        if cand.subject and cand.predicate:
            s, p, o = cand.subject, cand.predicate, cand.object or ""
        else:
            s, p, o = split_spo(cand.content or "", self.rule)
        base, positive = _canonical(p, self.rule)
        superseded: list[str] = []
        for edge in self.gks.edges_between(s, o):  # same subject and object: duplicate or opposite
            e_base, e_pos = _canonical(edge["predicate"], self.rule)
            if e_base != base:
                continue
            if e_pos == positive:
                return self._record(FactOutcome(ref, "duplicate", fact_id=edge["fact_refs"][0],
                                                detail="same subject, predicate and object"))
            superseded.extend(edge["fact_refs"])
        fbase = functional_base(p, self.rule)
        if fbase is not None:  # one object at a time: any other current object is replaced
            target = node_id(o)
            for entry in self.gks.functional(s, fbase):
                old = self._fact(entry["fact"])
                if old is not None and old.superseded_by is None and node_id(entry["object"]) != target:
                    superseded.append(entry["fact"])
        fid = self.new_fact_id(cand)
        fact = SemanticFact(
            id=fid, subject=s, predicate=p, object=o, confidence=cand.confidence,
            source_refs=source_refs, valid_from_version=self.version, version=self.version,
            supersedes=tuple(superseded), session_id=self.session_id,
            text=cand.content or "", **meta,
        )
        assert fact.semantic_hash == semantic_hash(f"{s} {p} {o}")
        for old_id in superseded:
            self._supersede(old_id, fid)
        self.new_facts[fid] = fact
        self.gks.add_fact(fid, s, p, o, fbase)
        return self._record(FactOutcome(ref, "accepted", fact_id=fid, supersedes=tuple(superseded)))

    def _supersede(self, old_id: str, new_id: str) -> None:
        old = self._fact(old_id)
        if old is None:
            return
        updated = old.model_copy(update={"superseded_by": new_id, "valid_to_version": self.version,
                                         "version": self.version})
        if old_id in self.new_facts:
            self.new_facts[old_id] = updated
        else:
            self.rewritten[old_id] = updated
        self.gks.remove_fact(old_id, old.subject, old.predicate, old.object,
                             functional_base(old.predicate, self.rule))

    def _record(self, outcome: FactOutcome) -> FactOutcome:
        self.outcomes.append(outcome)
        return outcome
