"""Reading a question: who, what shape, when, whether a standing instruction may govern it
(soulpass.retrieval.analysis). Hand-written English, positive and negative, per rule."""

from __future__ import annotations

import dataclasses
from datetime import date

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from soulpass.retrieval import (
    QueryAnalysis,
    Shape,
    analyse,
    named_participants,
    standing_instructions,
    stem,
    topic_words,
)

PEOPLE = ("Caroline", "Melanie", "Jon", "Gina", "Mary Ann Smith")


# --- who ------------------------------------------------------------------------------------------

@pytest.mark.parametrize(("question", "who"), [
    ("What is Caroline's job?", ("Caroline",)),
    ("what did caroline paint?", ("Caroline",)),
    ("Where did CAROLINE go?", ("Caroline",)),
    ("Did Melanie meet Caroline?", ("Melanie", "Caroline")),
    ("What do Jon and Gina have in common?", ("Jon", "Gina")),
    ("Whose idea was it, Jon's or Gina's?", ("Jon", "Gina")),
    ("What did the Joneses' dog eat? Ask Jon\u2019s sister.", ("Jon",)),
    ("When did Mary Ann Smith move?", ("Mary Ann Smith",)),
    ("When did Mary move?", ("Mary Ann Smith",)),  # the first word of a longer name
    ("What did Jonathan say?", ()),  # a name inside a longer word is not the name
    ("What did Caro say?", ()),
    ("Who won the game?", ()),
])
def test_who_is_named(question: str, who: tuple[str, ...]) -> None:
    assert analyse(question, PEOPLE).who == who


def test_a_first_name_shared_by_two_participants_matches_neither_alone() -> None:
    assert named_participants("What did Anna say?", ["Anna Lee", "Anna Park"]) == ()
    assert named_participants("What did Anna Lee say?", ["Anna Lee", "Anna Park"]) == ("Anna Lee",)


def test_no_participants_names_nobody() -> None:
    assert analyse("What is Caroline's job?").who == ()


@pytest.mark.parametrize("question", [
    "What did I say about the trip?",
    "When is my dentist appointment?",
    "Did you send it to me?",
    "Is the blue one mine?",
    "What did we decide about the budget?",
    "Remind us of the plan",
    "I'm looking for the recipe",
    "What did i buy?",
])
def test_the_first_person_marks_the_user(question: str) -> None:
    assert analyse(question, PEOPLE).user


@pytest.mark.parametrize("question", [
    "What is Caroline's job?",
    "Where did they go?",
    "What did you recommend?",
    "How many items are in the list?",
    "What is the mime type of a PNG?",
])
def test_no_first_person_no_user(question: str) -> None:
    assert not analyse(question, PEOPLE).user


# --- shape ----------------------------------------------------------------------------------------

@pytest.mark.parametrize("question", [
    "Summarise what we did on the garden project",
    "Can you summarize our discussion about the budget?",
    "Give me a summary of the marketing plan",
    "Give me an overview of my progress with Spanish",
    "Quick recap of the migration work, please",
    "What did we discuss about the wedding?",
    "What have we covered so far on the thesis?",
    "What did we do about the leaking roof?",
    "Walk me through the deployment steps we settled on",
    "How has my running progressed since spring?",
    "Sum up everything we talked about",
    "Bring me up to speed on the kitchen renovation",
    "Walk me through the budget decisions",
])
def test_summary(question: str) -> None:
    assert analyse(question, PEOPLE).shape is Shape.SUMMARY


@pytest.mark.parametrize("question", [
    "In which order did I bring up the aspects of my project?",
    "In what order did Caroline visit the three cities?",
    "List the steps in chronological order",
    "What was the order of the talks?",
    "What was the sequence of events at the party?",
    "Give me a timeline of Jon's career",
    "What did Melanie do first, the pottery class or the camping trip?",
    "Which came first, the move or the new job?",
    "What did Gina do after she lost her job?",
    "What happened before the wedding?",
    "Where did Jon live prior to moving to Boston?",
    "What was the earliest thing we talked about?",
    "Walk me through the order in which we planned the trip",  # an explicit order outweighs a summary
    "Summarize the order of events",
    "List the cities I visited in order",
    "How many days passed between the interview and the offer?",
    "How long after the move did Jon start his job?",
])
def test_order(question: str) -> None:
    assert analyse(question, PEOPLE).shape is Shape.ORDER


@pytest.mark.parametrize("question", [
    "What do Caroline and Melanie both enjoy?",
    "What do Jon and Gina have in common?",
    "What hobbies do Jon and Gina share?",  # two named people joined by "and"
    "Compare my old and new drafts",
    "How does the new plan differ from the old one?",
    "What is the difference between the two offers?",
    "Are Jon's and Gina's jobs similar?",
    "Is Python faster than Rust for this?",
    "Which one is cheaper, the train or the bus?",
    "Did either of them go to the concert?",
    "React versus Vue for the dashboard?",
    "Which was better than the original, you and me agreed?",
])
def test_comparison(question: str) -> None:
    assert analyse(question, PEOPLE).shape is Shape.COMPARISON


@pytest.mark.parametrize("question", [
    "What kind of hobbies does Evan pursue?",
    "What types of music does Caroline like?",
    "Which countries did Jon visit?",
    "What books has Melanie read?",
    "Which new restaurants did Gina try?",
    "What are Caroline's plans for the summer?",
    "Who were the guests at the party?",
    "How many children does Melanie have?",
    "What else did Gina buy at the market?",
    "What are some of Jon's favourite films?",
    "In what ways is Caroline helping her community?",
    "List all the books I mentioned",
    "Name three places Jon has lived",
    "What did Caroline do to relax?",
    "What has Jon been doing lately?",
    "Where has Melanie travelled?",
])
def test_list(question: str) -> None:
    assert analyse(question, PEOPLE).shape is Shape.LIST


@pytest.mark.parametrize("question", [
    "What is Caroline's job?",
    "When did Caroline go to the support group?",
    "Where does Jon work?",
    "Who is Melanie's best friend?",
    "What was the name of Gina's dog?",
    "Did Jon ever go to Paris before?",  # "before" at the end asks no order
    "How old is Melanie?",
    "What is the status of the analysis?",  # words ending in -s that are not plurals
    "Which bus goes downtown?",
    "What colour is this dress?",
    "Why did Gina quit?",
    "What does Jon do for a living?",
    "What time is our next meeting scheduled for?",
    "What did I eat the day before yesterday?",  # a time phrase asks no order
    "What is the sum of the first 15 terms?",  # "first" with a count is no order
    "Walk me through how to change a tyre",  # an explanation, not a summary
    "How did Gina feel about her progress at work?",
    "What is the next number in the sequence 2, 4, 8?",
    "When did Jon and Gina go hiking together?",  # a joint event, not a comparison
    "What do you use in order to stay focused?",
])
def test_one_fact(question: str) -> None:
    assert analyse(question, PEOPLE, reference=date(2023, 8, 10)).shape is Shape.FACT


def test_the_first_matching_shape_wins() -> None:
    # an explicit order outweighs a summary, a summary outweighs a relative order ("after")
    assert analyse("Give an overview of the order of events", PEOPLE).shape is Shape.ORDER
    assert analyse("Summarize what happened after the launch", PEOPLE).shape is Shape.SUMMARY
    assert analyse("Did Jon or Gina arrive first?", PEOPLE).shape is Shape.ORDER
    assert analyse("Which books did both Jon and Gina read?", PEOPLE).shape is Shape.COMPARISON


@pytest.mark.parametrize(("question", "across"), [
    ("In which order did I bring up the aspects of my project?", True),
    ("Give me a timeline of Jon's career", True),
    ("Walk me through the order in which we planned the trip", True),
    ("Summarise what we did on the garden project", True),
    ("Summarize what happened after the launch", True),  # a summary, whatever it names
    ("What did Gina do after she lost her job?", False),  # one event placed against another
    ("Which came first, the move or the new job?", True),
    ("What did Melanie do first, the pottery class or the camping trip?", False),
    ("How many days passed between the interview and the offer?", False),
    ("Which countries did Jon visit?", False),
    ("What is Caroline's job?", False),
    ("What do you use in order to stay focused?", False),
])
def test_an_answer_across_the_conversation_is_a_summary_or_an_order_asked_outright(question: str,
                                                                                    across: bool) -> None:
    assert analyse(question, PEOPLE).across is across


# --- when -----------------------------------------------------------------------------------------

def test_relative_time_resolves_against_the_latest_session() -> None:
    sessions = [date(2023, 5, 8), date(2023, 8, 10), date(2023, 6, 1)]
    a = analyse("What did Caroline do last week?", PEOPLE, session_dates=sessions)
    assert a.reference == date(2023, 8, 10)
    assert [(r.start, r.end) for r in a.when] == [(date(2023, 7, 31), date(2023, 8, 6))]


def test_an_explicit_reference_wins_over_the_sessions() -> None:
    a = analyse("What did I do yesterday?", session_dates=[date(2023, 8, 10)], reference=date(2024, 1, 2))
    assert [(r.start, r.end) for r in a.when] == [(date(2024, 1, 1), date(2024, 1, 1))]


def test_without_any_date_relative_time_is_left_open() -> None:
    a = analyse("What did I do yesterday, and in July 2022?")
    assert a.reference is None
    assert [r.phrase for r in a.when] == ["July 2022"]


# --- governed requests ------------------------------------------------------------------------------

@pytest.mark.parametrize("question", [
    "What time is our next meeting scheduled for?",
    "Schedule a call with the designer for Friday",
    "Write a short bio for my website",
    "Please format the list as a table",
    "Can you suggest a recipe for dinner?",
    "Could you convert this to metric?",
    "How should I structure the report?",
    "What should I cook tonight?",
    "What's the best way to store basil?",
    "Do you recommend a laptop for coding?",
    "Any tips for the interview tomorrow?",
    "I need a packing list for the trip",
    "Let's plan the sprint",
    "When is the deadline for the grant application due?",
    "What are we going to do at the offsite?",
    "Remind me to call mum",
    "Give me three title ideas",
])
def test_a_request(question: str) -> None:
    assert analyse(question, PEOPLE, reference=date(2023, 8, 10)).request


@pytest.mark.parametrize("question", [
    "What did Caroline paint last summer?",
    "When did we last talk about the budget?",
    "What was the name of the café?",
    "Did Jon go to the concert?",
    "Where were we when it started raining?",
    "What did I say my sister's name was?",
    "Have I told you about my trip?",
    "What is Caroline's job?",
    "Who is Melanie's best friend?",
    "What was planned for next week, as I said yesterday?",
    "Which book did you recommend two weeks ago?",
    "Do you remember what the next step was?",
])
def test_not_a_request(question: str) -> None:
    assert not analyse(question, PEOPLE, reference=date(2023, 8, 10)).request


# --- topics ---------------------------------------------------------------------------------------

def test_topics_are_content_stems_without_names_and_time() -> None:
    a = analyse("What did Caroline's friends paint last summer in Paris?", PEOPLE, reference=date(2023, 8, 10))
    assert a.topics == ("friend", "paint", "paris")


def test_time_phrases_leave_the_topics_whatever_the_spacing() -> None:
    a = analyse("What  did Jon cook   last\nweek?", PEOPLE, reference=date(2023, 8, 10))
    assert [r.phrase for r in a.when] == ["last\nweek"]
    assert a.topics == ("cook",)


def test_topics_meet_across_word_forms() -> None:
    question = analyse("What time is our next meeting scheduled for?").topics
    assert set(topic_words("Always use 24-hour time format when I ask about meeting schedules.")) >= set(question)


@pytest.mark.parametrize(("forms", "same"), [
    (("schedule", "schedules", "scheduled", "scheduling"), True),
    (("meeting", "meetings"), True),
    (("format", "formatting", "formatted"), True),
    (("summarise", "summarize", "summarised"), True),
    (("country", "countries"), True),
    (("class", "classes"), True),
    (("status", "state"), False),
    (("analysis", "analyst"), False),
])
def test_stems(forms: tuple[str, ...], same: bool) -> None:
    assert (len({stem(f) for f in forms}) == 1) is same


def test_the_analysis_is_a_frozen_value() -> None:
    a = analyse("What is Caroline's job?", PEOPLE)
    assert isinstance(a, QueryAnalysis)
    with pytest.raises(dataclasses.FrozenInstanceError):
        a.shape = Shape.LIST  # type: ignore[misc]
    assert analyse("What is Caroline's job?", PEOPLE) == a


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=200), st.lists(st.text(max_size=12), max_size=3))
def test_any_text_is_read(text: str, people: list[str]) -> None:
    a = analyse(text, people, reference=date(2023, 8, 10))
    assert a.shape in Shape
    assert set(a.who) <= set(people)
    assert all(r.start <= r.end for r in a.when)
    assert standing_instructions(text) == standing_instructions(text)
