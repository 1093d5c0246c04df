"""Standing instructions and preferences in what a user writes: "Always use 24-hour time when I ask
about meetings", "From now on, call me Sam", "Please don't suggest recipes with nuts", "I prefer
short answers". Each is returned with its topic words, so that a later request on the same topic
("What time is our next meeting?") can be matched to it.

Pure and deterministic; a function to call where a turn is written or indexed. A sentence counts
when it directs the assistant (an imperative after "always", "never", "from now on", "make sure",
"please don't", a condition such as "whenever I ask", or "I want you to always") or states a
preference ("I prefer", "I'd rather", "my favourite"). A habit told in passing ("I always go
jogging", "She never told me") and a question are not instructions.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import StrEnum

from soulpass.retrieval.words import straight, tokens, topic_words, word_set
from soulpass.sentences import sentences

__all__ = ["Directive", "StandingInstruction", "shared_topics", "standing_instructions"]


class Directive(StrEnum):
    """What kind of standing statement a sentence is."""

    INSTRUCTION = "instruction"  # how the assistant is to act or answer
    PREFERENCE = "preference"  # what the user likes or would rather have


@dataclass(frozen=True)
class StandingInstruction:
    """One sentence that stands for later requests, with its kind and its topic words' stems."""

    text: str
    kind: Directive
    topics: tuple[str, ...]


# The verbs of stating, checking and recording what an answer or a piece of work holds ("always
# specify the units", "never report a figure without its source").
_STATING = word_set("""
specify state report detail describe clarify define indicate document log record flag annotate comment
reference link attach tag timestamp verify validate justify compare rank estimate calculate compute
measure break split separate group bold italicize italicise tabulate abbreviate phrase word frame relate
mask redact sanitize sanitise anonymize anonymise encrypt
""")
# Verbs that open an imperative addressed to the assistant.
_IMPERATIVE = word_set("""
use call address refer write give respond reply answer format keep include add start begin end mention
remind show provide list avoid stop put make send tell ask check suggest recommend explain speak talk say
let treat assume consider convert express round present display sort order schedule book cite quote spell
capitalize capitalise highlight summarize summarise translate be double-check prioritize prioritise focus
skip omit leave remember note bear set mark label limit structure organize organise offer share stick
confirm wait go put double triple sign greet open close bring contact notify alert warn follow
""") | _STATING | word_set("enable disable enforce require run test review update track monitor back save store")
# Of those, the verbs of how an answer is made: a reminder or a "don't" without a standing word
# counts only with one of these ("don't use emojis"), not as advice or encouragement ("make sure to
# take time for yourself", "don't be afraid", "don't let anything stop you").
_OUTPUT = word_set("""
use call address refer write give respond reply answer format include add mention remind show provide list
send tell ask check double-check suggest recommend explain say cite quote spell capitalize capitalise
highlight summarize summarise translate round convert express present display sort label structure
apologize apologise repeat number start end begin sign greet
""") | _STATING
_USER = re.compile(r"\b(?:i|me|my|mine)\b")  # the user speaks of themself: "remember that I..."
_OPENERS = r"(?:(?:ok|okay|also|and|oh|btw|so|hey|one more thing|note|important|reminder)[,:]? )*"
_TRIGGER = re.compile(
    r"\b(?:from now on|going forward|moving forward|from here on(?: out)?|henceforth|in (?:the )?future|"
    r"for future reference|from this point(?: on)?|every time (?:i|we)|each time (?:i|we)|whenever (?:i|we)|"
    r"any ?time (?:i|we)|(?:when|if) (?:i|we) (?:ask|request|want|need|mention|talk|bring up))\b")
_ALWAYS_NEVER = re.compile(
    r"(?:^(?:please )?(?:always|never)\b|\bplease (?:always|never)\b|"
    r"\byou (?:should|must|will|need to|have to|shall) (?:always|never)\b|"
    r"\b(?:i want|i need|i'd like|i would like) you to (?:always|never)\b|\bmake sure (?:to|you) (?:always|never)\b|"
    r"^(?:can|could|would|will) you (?:please )?(?:always|never)\b)"
    r"(?: ever)?(?: (?P<verb>[\w'-]+))?")
_REMINDERS = re.compile(r"^(?:please )?(?:make sure|be sure|remember|don't forget|do not forget|ensure|"
                        r"keep in mind|bear in mind|note) (?:to|that|you)\b"
                        r"(?: (?:always|never))?(?: (?P<verb>[\w'-]+))?")
_DONT = re.compile(r"^(?:please )?(?:don't|do not|dont|stop|avoid|refrain from|no more)(?: ever)? (?P<verb>[\w'-]+)")
_PREFERENCE = re.compile(
    r"\b(?:i(?:'d| would)? (?:really |strongly |generally |usually |much |also )?(?:prefer|rather)|"
    r"my (?:preference|preferred|favou?rite)|i (?:like|love|hate|don't like|do not like) it when you)\b")
_MODAL_ASK = re.compile(r"^(?:can|could|would|will) you (?:please )?(?:always|never|from now on)\b")
# Words that mark a sentence as standing rather than say what it is about.
_NOT_TOPICS = word_set("""
always never ever prefer preferred preference rather favourite favorite remember forget ensure mind bear note
future forward henceforth going moving whenever anytime point reference use using respond reply answer ask
asking request avoid stop start keep mention include
""")


def _kind(sentence: str) -> Directive | None:
    """The directive ``sentence`` (lower case, straight apostrophes) is, if any."""
    if sentence.endswith("?") and not _MODAL_ASK.search(sentence):
        return None
    if _PREFERENCE.search(sentence):
        return Directive.PREFERENCE
    if (m := _ALWAYS_NEVER.search(sentence)) and (m.group("verb") in _IMPERATIVE or not sentence.startswith(
            ("always", "never"))):
        return Directive.INSTRUCTION
    if (m := _REMINDERS.search(sentence)) and (m.group("verb") in _OUTPUT or _USER.search(sentence)):
        return Directive.INSTRUCTION
    if (m := _DONT.search(sentence)) and _is_output(sentence, m):
        return Directive.INSTRUCTION
    if _TRIGGER.search(sentence) and _directs(sentence):
        return Directive.INSTRUCTION
    return None


def _is_output(sentence: str, dont: re.Match[str]) -> bool:
    """Whether a "don't"/"stop" is about how to answer: "please" before it, or an answer's verb after it
    ("don't use", "stop adding"; not "don't give up")."""
    verb = dont.group("verb")
    if sentence.startswith("please"):
        return True
    if sentence[dont.end():].startswith(" up"):
        return False
    return verb in _OUTPUT or any(verb in (v + "ing", v + v[-1] + "ing", v[:-1] + "ing") for v in _OUTPUT)


def _directs(sentence: str) -> bool:
    """Whether a time or condition trigger ("from now on", "whenever I ask") comes with a directive:
    an imperative verb opening a clause, "please", or "you" told what to do."""
    if re.search(r"\bplease\b|\byou (?:should|must|will|need|have to|'ll)\b|\bi (?:want|need|'d like|"
                 r"would like) you\b", sentence):
        return True
    clauses = re.split(r"[,;:]| then ", sentence)
    return any(words and words[0] in _IMPERATIVE for words in (tokens(c) for c in clauses))


def standing_instructions(text: str) -> tuple[StandingInstruction, ...]:
    """The standing instructions and preferences in ``text`` (a turn), one per sentence that is one,
    in order, each with the topic words it would be matched on."""
    found = []
    for sentence in sentences(text, lines=True):
        lowered = re.sub(r"^" + _OPENERS, "", " ".join(straight(sentence.lower()).split()))
        kind = _kind(lowered)
        if kind is not None:
            found.append(StandingInstruction(sentence, kind, topic_words(sentence, leave_out=_NOT_TOPICS)))
    return tuple(found)


def shared_topics(instruction: StandingInstruction, topics: tuple[str, ...]) -> tuple[str, ...]:
    """The topic words an instruction shares with a request's ``topics`` (``QueryAnalysis.topics``),
    in the instruction's order: where there are none, the instruction does not govern the request."""
    wanted = frozenset(topics)
    return tuple(t for t in instruction.topics if t in wanted)
