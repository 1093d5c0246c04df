"""Standing instructions and preferences recognised in what a user writes
(soulpass.retrieval.instructions). Hand-written English, positive and negative."""

from __future__ import annotations

import pytest

from soulpass.retrieval import Directive, StandingInstruction, analyse, shared_topics, standing_instructions


@pytest.mark.parametrize("text", [
    "Always use 24-hour time format when I ask about meeting schedules.",
    "Never mention my ex in suggestions.",
    "Please always reply in French.",
    "From now on, call me Sam.",
    "Going forward, include the sources at the end.",
    "In the future, keep answers under 100 words.",
    "Make sure to double-check the units.",
    "Be sure to add a summary at the top.",
    "Remember that I can't eat gluten.",
    "Don't forget to cite the page numbers.",
    "Please don't suggest recipes with nuts.",
    "Do not use emojis in replies.",
    "Don't ever send me links to paywalled articles.",
    "Stop adding disclaimers.",
    "Whenever I ask for a recipe, give the calories too.",
    "When I ask about flights, show prices in euros.",
    "Every time we talk about code, use Python.",
    "You should always ask before deleting anything.",
    "I want you to always answer with bullet points.",
    "Could you always round to two decimals?",
    "OK, from now on please write dates as YYYY-MM-DD.",
    # the verbs of stating, checking and recording what an answer holds
    "Always specify the units when I ask about measurements.",
    "Never report a figure without its source.",
    "Always verify the versions before suggesting an upgrade.",
    "Please don't redact the error codes.",
])
def test_an_instruction(text: str) -> None:
    (found,) = standing_instructions(text)
    assert found.kind is Directive.INSTRUCTION
    assert found.text == text


@pytest.mark.parametrize("text", [
    "I prefer short answers.",
    "I'd prefer metric units.",
    "I would rather get the summary first.",
    "I'd rather not travel on Sundays.",
    "My preference is window seats.",
    "My favourite cuisine is Thai.",
    "I really prefer tea over coffee.",
    "I like it when you keep it brief.",
    "I hate it when you use jargon.",
])
def test_a_preference(text: str) -> None:
    (found,) = standing_instructions(text)
    assert found.kind is Directive.PREFERENCE


@pytest.mark.parametrize("text", [
    "I always go jogging in the morning.",
    "She never told me about the party.",
    "Never have I seen such a sunset.",
    "Always the same problem with this printer.",
    "Whenever I go to the gym I feel tired.",
    "From now on I'm going to run every morning.",
    "Don't worry about it.",
    "Do you always wake up this early?",
    "What do you prefer, tea or coffee?",
    "Always happy to help, Mel!",
    "Don't date him, he's trouble.",
    "Never been to Rome, sadly.",
    "Remember when we went to Rome?",
    "We talked about the budget yesterday.",
    "In the future, cars will drive themselves.",
    "Can you suggest a recipe?",
    # advice and encouragement to the listener, not a directive on how to answer
    "Make sure to take some time for yourself.",
    "Ensure you have the necessary libraries installed.",
    "Remember to stay patient throughout the process.",
    "Don't be afraid to ask for help.",
    "Don't give up on your dreams!",
    "Don't let anything stop you.",
    "Don't forget to drink water on the hike.",
    "After an incident, reflect on how you can handle it differently in the future.",
])
def test_not_an_instruction(text: str) -> None:
    assert standing_instructions(text) == ()


def test_one_per_sentence_in_order_among_others() -> None:
    turn = ("Thanks, that helps. From now on, reply in Spanish. I went to Madrid last year.\n"
            "I prefer formal language.")
    found = standing_instructions(turn)
    assert [(f.text, f.kind) for f in found] == [
        ("From now on, reply in Spanish.", Directive.INSTRUCTION),
        ("I prefer formal language.", Directive.PREFERENCE),
    ]


def test_topics_leave_the_directive_words_out() -> None:
    (found,) = standing_instructions("Always use 24-hour time format when I ask about meeting schedules.")
    assert found.topics == ("24-hour", "time", "format", "meet", "schedul")


def test_an_instruction_governs_a_request_on_its_topic() -> None:
    (rule,) = standing_instructions("Always use 24-hour time format when I ask about meeting schedules.")
    request = analyse("What time is our next meeting scheduled for?")
    assert request.request
    assert shared_topics(rule, request.topics) == ("time", "meet", "schedul")
    other = analyse("Can you suggest a recipe for dinner?")
    assert shared_topics(rule, other.topics) == ()


def test_an_instruction_is_a_frozen_value() -> None:
    (found,) = standing_instructions("I prefer short answers.")
    assert found == StandingInstruction("I prefer short answers.", Directive.PREFERENCE, ("short", "answer"))
