"""Retrieval by what a question asks: a pure reading of the question (who, what shape, when,
whether a standing instruction governs it) and of standing instructions where they are written.
Retrieval plans by shape build on these over the index's public search."""

from soulpass.retrieval.analysis import QueryAnalysis, Shape, analyse, named_participants
from soulpass.retrieval.instructions import Directive, StandingInstruction, shared_topics, standing_instructions
from soulpass.retrieval.when import DateRange, time_ranges
from soulpass.retrieval.words import stem, topic_words

__all__ = [
    "DateRange",
    "Directive",
    "QueryAnalysis",
    "Shape",
    "StandingInstruction",
    "analyse",
    "named_participants",
    "shared_topics",
    "standing_instructions",
    "stem",
    "time_ranges",
    "topic_words",
]
