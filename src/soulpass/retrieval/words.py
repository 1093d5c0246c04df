"""Words of a question or a turn, as the analysis reads them: tokens, function words, and the topic
words (content words, lightly stemmed) on which a standing instruction is matched to a request."""

from __future__ import annotations

import re

__all__ = ["FUNCTION_WORDS", "straight", "stem", "tokens", "topic_words", "word_set"]

_CURLY = "\u2019"  # the right single quotation mark, written as an apostrophe by many keyboards


def word_set(words: str) -> frozenset[str]:
    """The words of a whitespace-separated list (how the word lists here are written)."""
    return frozenset(words.split())


def straight(text: str) -> str:
    """``text`` with curly apostrophes made straight."""
    return text.replace(_CURLY, "'")


# A word: letters and digits, inner apostrophes and hyphens kept ("don't", "24-hour", "Caroline's").
_TOKEN = re.compile(r"[A-Za-z0-9]+(?:['\u2019\-][A-Za-z0-9]+)*")

# English function words: articles, pronouns, auxiliaries, prepositions, conjunctions, question words,
# and the adverbs and verbs that carry no topic ("do", "make", "tell", "please").
FUNCTION_WORDS = word_set("""
a an the this that these those some any each every all both either neither no not nor none
i me my mine myself we us our ours ourselves you your yours yourself yourselves he him his himself
she her hers herself it its itself they them their theirs themselves one ones someone something
anyone anything everyone everything nobody nothing
am is are was were be been being have has had having do does did doing done will would shall
should can could may might must ought need needs let lets
what which who whom whose when where why how whether if then than so as because since while until
of to in on at by for with about from into onto over under up down out off through during before
after above below between among against around across along toward towards via per within without
and or but also too very really just only even still again ever never always often sometimes
usually more most less least much many few lot lots such same other another else own
here there now today tonight yesterday tomorrow ago later earlier soon once twice
please tell give show make sure get got let know think like want wanted say said says
thing things kind kinds type types sort sorts way ways next last first second
s t don't doesn't didn't isn't aren't wasn't weren't won't wouldn't can't couldn't shouldn't i'm
i've i'd i'll you're you've you'd you'll we're we've we'd we'll it's that's what's there's let's
""")


def tokens(text: str) -> list[str]:
    """The words of ``text`` in order, lower-cased, curly apostrophes made straight."""
    return [straight(t.lower()) for t in _TOKEN.findall(text)]


def stem(word: str) -> str:
    """A light English stem: possessive, plural and the common verb endings taken off and British
    "-ise" spelt "-ize", so that "schedules", "scheduled" and "scheduling" meet, and "meetings" and
    "meeting" ("meet"). Short words and words with digits are kept whole."""
    w = word.lower()
    if w.endswith("'s"):
        w = w[:-2]
    if len(w) <= 3 or not w.isalpha():
        return w
    w = re.sub(r"(?<=\w\w)is(e|ed|es|ing|ation)$", r"iz\1", w)
    w = _strip(w, (("sses", "ss"), ("ies", "y"), ("es", "e"), ("s", "")))  # the plural
    w = _strip(w, (("ied", "y"), ("ing", ""), ("ed", "")))  # the verb ending
    if len(w) >= 4 and w[-1] == w[-2] and w[-1] not in "lsz" and word.lower().endswith(("ing", "ed")):
        w = w[:-1]  # "formatting" -> "format"
    return w[:-1] if w.endswith("e") and len(w) > 4 else w  # "schedule" meets "schedul(ed)"


def _strip(word: str, endings: tuple[tuple[str, str], ...]) -> str:
    for suffix, keep in endings:
        if word.endswith(suffix) and len(word) - len(suffix) >= 3 and not word.endswith(("ss", "us", "is")):
            return word[: len(word) - len(suffix)] + keep
    return word


def topic_words(text: str, *, leave_out: frozenset[str] = frozenset()) -> tuple[str, ...]:
    """The stems of the content words of ``text``, in order of first appearance, without function
    words and without the words in ``leave_out`` (lower-case, e.g. participants' names)."""
    seen: dict[str, None] = {}
    for token in tokens(text):
        word = token[:-2] if token.endswith("'s") else token
        if word in FUNCTION_WORDS or word in leave_out or len(word) < 2:
            continue
        seen.setdefault(stem(word), None)
    return tuple(seen)
