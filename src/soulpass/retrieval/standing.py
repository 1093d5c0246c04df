"""Standing instructions and preferences kept as what they are: a turn that gives one carries a tag
saying so (``standing:instruction``, ``standing:preference``), stamped when the turn is consolidated,
so that a search can ask for them by tag (``soulpass.retrieval.plans``)."""

from __future__ import annotations

from soulpass.retrieval.instructions import Directive, standing_instructions

__all__ = ["STANDING_TAGS", "TAG_PREFIX", "standing_tags"]

TAG_PREFIX = "standing:"
STANDING_TAGS = tuple(TAG_PREFIX + kind.value for kind in Directive)


def standing_tags(text: str) -> tuple[str, ...]:
    """The tags of the kinds of standing statement ``text`` gives, in ``Directive`` order (none: ())."""
    kinds = {s.kind for s in standing_instructions(text)}
    return tuple(TAG_PREFIX + kind.value for kind in Directive if kind in kinds)
