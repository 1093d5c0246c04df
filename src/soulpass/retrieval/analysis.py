"""What a question asks, read from its English grammar: who it names, what shape its answer has,
which days it is about, and whether it is a request that a standing instruction may govern.

Pure and deterministic: no model, no I/O, no clock. The rules are general English (question words,
auxiliaries, plural nouns, connectives), not the phrasing of any one data set. Shapes are tried in
a fixed order and the first that matches wins: an explicit order ("in which order", "timeline"), a
summary, an event placed against another ("first", "after", "how long between"), a comparison, a
list, else one fact.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import date
from enum import StrEnum

from soulpass.retrieval.when import DateRange, time_ranges
from soulpass.retrieval.words import straight, tokens, topic_words, word_set

__all__ = ["QueryAnalysis", "Shape", "analyse", "named_participants"]


class Shape(StrEnum):
    """What the answer is made of."""

    FACT = "fact"  # one fact, likely in one turn
    LIST = "list"  # several things of one kind, gathered from several turns
    COMPARISON = "comparison"  # two or more people or things set side by side
    ORDER = "order"  # events placed in time relative to each other
    SUMMARY = "summary"  # an account of a whole topic or stretch of conversation


@dataclass(frozen=True)
class QueryAnalysis:
    """The reading of one question. ``who`` holds known participants' names as they were given,
    in the order the question names them; ``user`` is true where the question speaks in the first
    person ("I", "my", "we"); ``when`` holds its time expressions resolved against ``reference``;
    ``request`` is true for a request to do, answer, format or schedule something (as opposed to a
    question about past events), and ``topics`` are its content words' stems, on which standing
    instructions are matched. ``across`` is true where the answer spans a topic across the
    conversation: a summary, or an order asked outright ("in which order", "timeline"), not one event
    placed against another ("what did she do after the move?")."""

    text: str
    who: tuple[str, ...]
    user: bool
    shape: Shape
    when: tuple[DateRange, ...]
    request: bool
    topics: tuple[str, ...]
    reference: date | None
    across: bool


_FIRST_PERSON = frozenset({"i", "me", "my", "mine", "myself", "i'm", "i've", "i'd", "i'll",
                           "we", "us", "our", "ours", "ourselves", "we're", "we've", "we'd", "we'll"})
_AUXILIARIES = frozenset({"do", "does", "did", "has", "have", "had", "is", "are", "was", "were", "can",
                          "could", "would", "will", "should", "might", "may", "must"})
# Words ending in "s" that are not plurals (the suffix rule below catches -ss, -us, -is and -ous).
_NOT_PLURAL = frozenset({"this", "has", "was", "does", "always", "perhaps", "news", "series", "species",
                         "means", "lens", "gas", "yes", "its", "his", "hers", "ours", "yours", "theirs",
                         "whereas", "besides", "sometimes", "nowadays", "afterwards", "towards", "physics",
                         "mathematics", "economics", "politics", "athletics", "ethics"})


def _any(*patterns: str) -> re.Pattern[str]:
    return re.compile("|".join(f"(?:{p})" for p in patterns))


_SUMMARY = _any(
    r"\bsummar(?:y|ies|ise|ize|ised|ized|ising|izing)\b", r"\boverview\b", r"\brecap\b", r"\brundown\b",
    r"\bsum up\b", r"\bgist\b", r"\bwalk me through\b(?! how\b)", r"\bup to speed\b",
    r"\bwhat (?:did|have|had) (?:we|you and i) (?:do|done|discuss|discussed|talk about|talked about|cover|"
    r"covered|work on|worked on|go over|gone over|go through|gone through)\b",
    r"\bwhat progress\b",
    r"\bhow (?:has|have|did) (?:\w+ ){1,3}(?:progress|progressed|evolve|evolved|develop|developed)\b",
    r"\beverything (?:we|i|you)\b",
)
# Words that ask for an order outright; they outweigh a summary's ("walk me through the order in which").
_ORDER = _any(
    r"\bin (?:which|what|chronological|the right|the correct) order\b", r"\bwhat order\b", r"\bin order\b(?! to\b)",
    r"\bthe order (?:of|in which|that|i|we|you)\b", r"\bchronolog", r"\btimeline\b",
    r"\bsequence (?:of|in which)\b", r"\bin sequence\b", r"\bwhich came\b",
)
# Words that place one event against another: weaker than a summary's. "The first 15 terms" is a
# count, not an order; "before" closing a clause ("have you been there before?") places nothing.
_RELATIVE_ORDER = _any(
    r"\bfirst\b(?! (?:\d|n\b|few\b|couple\b|one\b|two\b|three\b|four\b|five\b|ten\b))", r"\bearliest\b",
    r"\b(?:before|after|prior to|followed by)\b(?!\s*(?:[?.!,]|$))",
    r"\bhow (?:long|much time|many (?:seconds|minutes|hours|days|weeks|months|years))\b.*"
    r"\b(?:between|passed|since|until|after|before|elapsed)\b",
)
_COMPARATIVE = (r"\b(?:more|less|fewer|better|worse|longer|shorter|older|younger|bigger|smaller|larger|higher|"
                r"lower|faster|slower|cheaper|easier|harder) than\b")
_COMPARISON = _any(
    r"\bboth\b", r"\bin common\b", r"\bcompar(?:e|ed|es|ing|ison|isons)\b", r"\bdifferences?\b",
    r"\bdiffer\b", r"\bsimilar(?:ity|ities|ly)?\b", r"\b(?:versus|vs)\b", r"\beither\b", r"\bneither\b",
    r"\b(?:you and i|you and me|me and you)\b", r"\bwhich (?:one|of (?:the|them|these|those))\b.*\bor\b",
    _COMPARATIVE,
)
_LIST = _any(
    r"\b(?:what|which) (?:kinds?|types?|sorts?) of\b", r"\bhow many\b", r"\bwhat (?:else|other)\b",
    r"\bany other\b", r"\bwhat are some\b", r"\b(?:in )?what ways\b", r"\ball (?:the|of)\b",
    r"^(?:please )?(?:list|name|enumerate)\b", r"\b(?:list|name) (?:all|some|every|a few|\d+|two|three|four|five)\b",
    r"^(?:what|which|who) (?:are|were)\b",
    r"\bwhat (?:did|has|have|had) .+ (?:do|done|doing)\b", r"\bwhere (?:has|have|had)\b",
)

_REQUEST_VERBS = word_set("""
write give show make create draft generate schedule book remind set send format convert calculate
compute explain describe suggest recommend plan help find translate list summarise summarize outline
prepare compose update add put organize organise arrange rewrite edit fix check review tell provide
design build estimate play call use keep change move cancel sort rank choose pick teach walk
""")
_FILLERS = frozenset({"please", "ok", "okay", "hey", "so", "now", "and", "also", "then", "kindly"})
_ASKS = _any(
    r"\b(?:can|could|would|will) you\b", r"\b(?:can|could|may) i (?:get|have|see)\b",
    r"\bhow (?:do|can|should|would|could) (?:i|we)\b", r"\bwhat (?:should|can|could) (?:i|we)\b",
    r"\b(?:should|shall) (?:i|we)\b", r"\bwhat(?:'s| is) the best\b", r"\bbest way\b",
    r"\bdo you (?:think|recommend|suggest|have)\b", r"\bany (?:tips|suggestions|ideas|advice|recommendations)\b",
    r"\bi (?:need|want|'d like|would like|am looking for|'m looking for)\b", r"\blet's\b",
)
_FUTURE = _any(r"\bnext\b", r"\bupcoming\b", r"\btomorrow\b", r"\btonight\b", r"\bwill\b", r"\bgoing to\b",
               r"\bscheduled\b", r"\bdue\b", r"\bplanned\b", r"\bcoming up\b")
_PAST = _any(
    r"^(?:\w+ )?(?:did|was|were|had)\b", r"^(?:what|when|where|who|how|why|which)\b.*\b(?:did|was|were|had)\b",
    r"^(?:have|has) (?:i|we|you|he|she|they)\b", r"\blast (?:time|week|weekend|month|year)\b", r"\bago\b",
    r"\byesterday\b",
    r"\b(?:remember|recall|mentioned|said|told|used to)\b",
)


def _normal(text: str) -> str:
    return " ".join(straight(text.lower()).split())


def _name_pattern(name: str) -> re.Pattern[str]:
    return re.compile(r"(?<![\w'])" + re.escape(name) + r"(?:['\u2019]s?)?(?![\w])", re.IGNORECASE)


def named_participants(text: str, participants: Iterable[str]) -> tuple[str, ...]:
    """The known ``participants`` that ``text`` names, in the order it first names them. A name
    matches whole, in any case, possessive or not ("Caroline's"); the first word of a longer name
    matches too where no other participant shares it."""
    known = [p for p in dict.fromkeys(participants) if p.strip()]
    firsts = [p.split()[0].lower() for p in known]
    found: list[tuple[int, str]] = []
    for person, first in zip(known, firsts, strict=True):
        forms = [person] + ([first] if " " in person.strip() and firsts.count(first) == 1 else [])
        hits = [m.start() for form in forms for m in _name_pattern(form).finditer(text)]
        if hits:
            found.append((min(hits), person))
    return tuple(person for _, person in sorted(found))


def _without(text: str, phrases: Iterable[str]) -> str:
    for phrase in phrases:
        text = text.replace(_normal(phrase), " ")
    return text


def _is_plural(word: str) -> bool:
    return (len(word) > 3 and word.endswith("s") and not word.endswith(("ss", "us", "is", "'s"))
            and word not in _NOT_PLURAL)


def _asks_for_plural(words: Sequence[str]) -> bool:
    """"which countries did ...", "what new books has ...": a plural noun right after "what" or
    "which", or one word later where an auxiliary follows it (so that "which bus goes" is no plural)."""
    for n, word in enumerate(words):
        if word not in ("what", "which"):
            continue
        after = [*words[n + 1:n + 4], ""]
        if _is_plural(after[0]) or (after[0] not in _AUXILIARIES and _is_plural(after[1])
                                    and after[2] in _AUXILIARIES):
            return True
    return False


def _shape(text: str, words: Sequence[str], who: Sequence[str]) -> Shape:
    if _ORDER.search(text):
        return Shape.ORDER
    if _SUMMARY.search(text):
        return Shape.SUMMARY
    if _RELATIVE_ORDER.search(text):
        return Shape.ORDER
    if _COMPARISON.search(text) or _names_joined(text, who):
        return Shape.COMPARISON
    if _LIST.search(text) or _asks_for_plural(words):
        return Shape.LIST
    return Shape.FACT


def _names_joined(text: str, who: Sequence[str]) -> bool:
    """Two named people joined by "and" ("Caroline and Melanie", "Jon's and Gina's"), other than
    for something they did together."""
    if len(who) < 2 or re.search(r"\btogether\b|\bwith each other\b|\bwith one another\b", text):
        return False
    names = "|".join(re.escape(p.lower()) for p in who)
    return re.search(rf"\b(?:{names})(?:'s)? (?:and|&) (?:{names})\b", text) is not None


def _is_request(text: str, words: Sequence[str], when: Sequence[DateRange], ref: date | None) -> bool:
    """A request to do, answer, format or schedule something: an imperative, an ask of the assistant
    ("can you", "how should I", "I need"), or a question about what is coming; never a question
    about what happened."""
    content = [w for w in words if w not in _FILLERS]
    if content and content[0] in _REQUEST_VERBS and not text.rstrip().endswith("?"):
        return True
    if content and content[0] in _REQUEST_VERBS and words[0] == "please":
        return True
    if _ASKS.search(text):
        return True
    past = _PAST.search(text) is not None or (ref is not None and any(r.end < ref for r in when))
    future = _FUTURE.search(text) is not None or (ref is not None and any(r.start > ref for r in when))
    return future and not past


def analyse(question: str, participants: Iterable[str] = (), *, session_dates: Sequence[date] = (),
            reference: date | None = None) -> QueryAnalysis:
    """Read ``question``. ``participants`` are the account's known speakers' names; relative time
    expressions resolve against ``reference``, or else the latest of ``session_dates`` (a question
    is asked after the conversation it is about), or not at all where neither is given."""
    ref = reference if reference is not None else (max(session_dates) if session_dates else None)
    text = _normal(question)
    who = named_participants(question, participants)
    when = time_ranges(question, ref)
    # Time phrases are not shape words ("the day before yesterday" asks no order) nor topics.
    bare = _without(text, (r.phrase for r in when))
    words = tokens(bare)
    leave_out = frozenset(w for p in who for w in tokens(p))
    shape = _shape(bare, words, who)
    return QueryAnalysis(
        text=question,
        who=who,
        user=any(w in _FIRST_PERSON for w in words),
        shape=shape,
        when=when,
        request=_is_request(bare, words, when, ref),
        topics=topic_words(bare, leave_out=leave_out),
        reference=ref,
        across=shape is Shape.SUMMARY or _ORDER.search(bare) is not None,  # an order asked outright
    )
