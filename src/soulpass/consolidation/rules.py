"""Consolidation rules and thresholds (DESIGN §4), loadable from YAML.

```yaml
episodes: {rule: append_all}
semantic:
  rule: validate_and_merge
  min_confidence: 0.7          # a candidate must have confidence > this
  functional_predicates: [is, lives in, works at]   # one object per subject at a time
  antonyms: {likes: dislikes}  # "A likes B" contradicts "A dislikes B"
  negation_prefixes: [not, does not, no longer]
states: {rule: latest_wins}
profile: {rule: latest_wins}
core: {rule: careful_merge, min_confidence: 0.9, allow_overwrite: false}
journal: {on_repeat: skip_exact}   # or skip_hash, keep
review:                        # what an archive commits only once a person approves (default: nothing)
  core: true                   # core memory (identity, values, worldview)
  profile: true                # the user profile
  states: false                # named states
  facts_below: 0.9             # facts less confident than this
  forgetting: true             # a fact that supersedes (retires) a committed one
```
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from soulpass.errors import ConfigError

__all__ = ["CoreRule", "EpisodeRule", "JournalRule", "LatestWinsRule", "ReviewRule", "Rules", "SemanticRule"]


class _Rule(BaseModel):
    # built when first used, not at import: a process that only searches never needs the rules
    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)


class EpisodeRule(_Rule):
    rule: Literal["append_all"] = "append_all"


class SemanticRule(_Rule):
    rule: Literal["validate_and_merge"] = "validate_and_merge"
    min_confidence: float = Field(default=0.7, ge=0.0, le=1.0)
    functional_predicates: tuple[str, ...] = (
        "is", "is named", "name is", "lives in", "works at", "works as", "is aged", "age is",
        "prefers", "favorite is", "favourite is", "is married to", "located in", "born in",
    )
    antonyms: dict[str, str] = Field(
        default_factory=lambda: {"likes": "dislikes", "loves": "hates", "wants": "does not want"}
    )
    negation_prefixes: tuple[str, ...] = ("not", "does not", "doesn't", "no longer", "never")

    def confidence_refusal(self, confidence: float) -> str | None:
        """Why a fact of this ``confidence`` is rejected at archive, or None when it is high enough."""
        if confidence <= self.min_confidence:
            return f"confidence {confidence} is not above {self.min_confidence} (rules: semantic.min_confidence)"
        return None


class LatestWinsRule(_Rule):
    rule: Literal["latest_wins"] = "latest_wins"


class CoreRule(_Rule):
    rule: Literal["careful_merge"] = "careful_merge"
    min_confidence: float = Field(default=0.9, ge=0.0, le=1.0)
    allow_overwrite: bool = False


class JournalRule(_Rule):
    """Prose records: what an entry whose semantic hash is already in the master does.

    ``skip_exact`` (default): same hash and same verbatim text is a repeat, reported and linked,
    not stored; same hash with other text is stored with ``repeats`` naming the earlier entry
    (a recurring insight). ``skip_hash``: any same hash is a repeat (the seed's strict reading).
    ``keep``: always stored, linked by ``repeats``.
    """

    on_repeat: Literal["skip_exact", "skip_hash", "keep"] = "skip_exact"


class ReviewRule(_Rule):
    """The review policy: which archived items need a person's approval. An archive by a caller
    who may not approve, touching such an item, commits nothing and answers ``AwaitingReview``.
    The default names nothing: every archive commits, as before the policy existed."""

    core: bool = False
    profile: bool = False
    states: bool = False
    facts_below: float | None = Field(default=None, ge=0.0, le=1.0)
    forgetting: bool = False

    def why(self, kind: str, action: str, confidence: float | None, supersedes: tuple[str, ...]) -> str | None:
        """Why an item (of ``kind``, planned as ``action``) needs a person, or None when it does not.
        Only what would change the master counts: a rejected or duplicate item changes nothing."""
        if action not in ("add", "supersede", "change"):
            return None
        if kind == "core" and self.core:
            return "a change to core memory (rules: review.core)"
        if kind == "profile" and self.profile:
            return "a change to the user profile (rules: review.profile)"
        if kind == "state" and self.states:
            return "a change to a named state (rules: review.states)"
        if kind == "fact" and supersedes and self.forgetting:
            return f"retires committed fact(s) {', '.join(supersedes)} (rules: review.forgetting)"
        if kind == "fact" and self.facts_below is not None and confidence is not None \
                and confidence < self.facts_below:
            return f"a fact of confidence {confidence}, below {self.facts_below} (rules: review.facts_below)"
        return None


class Rules(_Rule):
    episodes: EpisodeRule = Field(default_factory=EpisodeRule)
    semantic: SemanticRule = Field(default_factory=SemanticRule)
    states: LatestWinsRule = Field(default_factory=LatestWinsRule)
    profile: LatestWinsRule = Field(default_factory=LatestWinsRule)
    core: CoreRule = Field(default_factory=CoreRule)
    journal: JournalRule = Field(default_factory=JournalRule)
    review: ReviewRule = Field(default_factory=ReviewRule)

    @classmethod
    def from_yaml(cls, text: str, source: str = "<rules>") -> Rules:
        """Parse rules from YAML text; unknown keys and bad values raise ``ConfigError``."""
        import yaml  # here, not at import: only rules read from YAML need it (a search never does)

        try:
            raw: Any = yaml.safe_load(text) or {}
        except yaml.YAMLError as exc:
            raise ConfigError(f"{source}: not valid YAML: {exc}", path=source) from exc
        except RecursionError:
            raise ConfigError(f"{source}: nested too deeply to read", path=source) from None
        if not isinstance(raw, dict):
            raise ConfigError(f"{source}: rules must be a mapping", path=source)
        try:
            return cls.model_validate(raw)
        except ValidationError as exc:
            raise ConfigError(f"{source}: {exc}", path=source) from exc
        except RecursionError:  # a value nested deeper than pydantic can report on
            raise ConfigError(f"{source}: nested too deeply to read", path=source) from None

    def to_yaml(self) -> str:
        import yaml

        return yaml.safe_dump(self.model_dump(mode="json"), sort_keys=False)
