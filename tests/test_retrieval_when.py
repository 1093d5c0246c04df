"""Time expressions resolved against a reference date (soulpass.retrieval.when)."""

from __future__ import annotations

from datetime import date

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from soulpass.retrieval import DateRange, time_ranges

# A Thursday in summer.
REF = date(2023, 8, 10)


def span(text: str, reference: date | None = REF) -> list[tuple[str, date, date]]:
    return [(r.phrase, r.start, r.end) for r in time_ranges(text, reference)]


@pytest.mark.parametrize(("text", "phrase", "start", "end"), [
    # days
    ("What did I do yesterday?", "yesterday", date(2023, 8, 9), date(2023, 8, 9)),
    ("What is on today?", "today", REF, REF),
    ("Remind me tonight", "tonight", REF, REF),
    ("What did we watch last night?", "last night", date(2023, 8, 9), date(2023, 8, 9)),
    ("What did I eat this morning?", "this morning", REF, REF),
    ("What is planned for tomorrow?", "tomorrow", date(2023, 8, 11), date(2023, 8, 11)),
    ("What happened the day before yesterday?", "the day before yesterday", date(2023, 8, 8), date(2023, 8, 8)),
    ("Book it for the day after tomorrow", "the day after tomorrow", date(2023, 8, 12), date(2023, 8, 12)),
    # weeks (Monday to Sunday), weekends, months, years
    ("What did we discuss last week?", "last week", date(2023, 7, 31), date(2023, 8, 6)),
    ("Anything due this week?", "this week", date(2023, 8, 7), date(2023, 8, 13)),
    ("Plan next week's meals", "next week", date(2023, 8, 14), date(2023, 8, 20)),
    ("Where did she go last weekend?", "last weekend", date(2023, 8, 5), date(2023, 8, 6)),
    ("Are we free this weekend?", "this weekend", date(2023, 8, 12), date(2023, 8, 13)),
    ("What did he buy last month?", "last month", date(2023, 7, 1), date(2023, 7, 31)),
    ("What are the goals for next month?", "next month", date(2023, 9, 1), date(2023, 9, 30)),
    ("Where did they travel last year?", "last year", date(2022, 1, 1), date(2022, 12, 31)),
    ("What have I read this year?", "this year", date(2023, 1, 1), date(2023, 12, 31)),
    # N units ago: the whole unit holding that day
    ("What did I cook two weeks ago?", "two weeks ago", date(2023, 7, 24), date(2023, 7, 30)),
    ("What did Jon say 3 days ago?", "3 days ago", date(2023, 8, 7), date(2023, 8, 7)),
    ("Where was she a month ago?", "a month ago", date(2023, 7, 1), date(2023, 7, 31)),
    ("What did we plan a couple of months ago?", "a couple of months ago", date(2023, 6, 1), date(2023, 6, 30)),
    ("What happened five years ago?", "five years ago", date(2018, 1, 1), date(2018, 12, 31)),
    # spans up to the reference
    ("What did I eat in the last 3 days?", "in the last 3 days", date(2023, 8, 7), REF),
    ("What have we done over the past two weeks?", "over the past two weeks", date(2023, 7, 27), REF),
    ("Any news in the past month?", "in the past month", date(2023, 7, 10), REF),
    # seasons (meteorological, northern); the reference is in summer
    ("What did Melanie paint last summer?", "last summer", date(2022, 6, 1), date(2022, 8, 31)),
    ("Where are we going this summer?", "this summer", date(2023, 6, 1), date(2023, 8, 31)),
    ("What did they plant last spring?", "last spring", date(2023, 3, 1), date(2023, 5, 31)),
    ("Where will you ski next winter?", "next winter", date(2023, 12, 1), date(2024, 2, 29)),
    ("What did he do last fall?", "last fall", date(2022, 9, 1), date(2022, 11, 30)),
    ("What happened in the summer of 2021?", "the summer of 2021", date(2021, 6, 1), date(2021, 8, 31)),
    # weekdays (the reference is a Thursday)
    ("What did I say last Friday?", "last Friday", date(2023, 8, 4), date(2023, 8, 4)),
    ("What did I say last Thursday?", "last Thursday", date(2023, 8, 3), date(2023, 8, 3)),
    ("Meet next Monday?", "next Monday", date(2023, 8, 14), date(2023, 8, 14)),
    ("What is on this Tuesday?", "this Tuesday", date(2023, 8, 8), date(2023, 8, 8)),
    # dates
    ("Which countries did James visit in July 2022?", "July 2022", date(2022, 7, 1), date(2022, 7, 31)),
    ("What happened on 8 May 2023?", "8 May 2023", date(2023, 5, 8), date(2023, 5, 8)),
    ("What happened on the 8th of May, 2023?", "8th of May, 2023", date(2023, 5, 8), date(2023, 5, 8)),
    ("What happened on May 8, 2023?", "May 8, 2023", date(2023, 5, 8), date(2023, 5, 8)),
    ("What happened on 8 May?", "8 May", date(2023, 5, 8), date(2023, 5, 8)),
    ("What happened on March 3rd?", "March 3rd", date(2023, 3, 3), date(2023, 3, 3)),
    ("What did I log on 2023-02-14?", "2023-02-14", date(2023, 2, 14), date(2023, 2, 14)),
    ("What did we do in 2022?", "in 2022", date(2022, 1, 1), date(2022, 12, 31)),
    ("Where was she in June?", "in June", date(2023, 6, 1), date(2023, 6, 30)),
    ("What did he start in Sept 2021?", "Sept 2021", date(2021, 9, 1), date(2021, 9, 30)),
    ("What did he start in Dec. 2021?", "Dec. 2021", date(2021, 12, 1), date(2021, 12, 31)),
])
def test_one_expression(text: str, phrase: str, start: date, end: date) -> None:
    assert span(text) == [(phrase, start, end)]


@pytest.mark.parametrize("text", [
    "What is Caroline's favourite colour?",
    "I may go to the park.",  # the verb "may", not the month
    "Who won the 100 metres?",
    "Is 2000 calories a day enough?",  # a number, not a year
    "What did he say at the last minute?",
    "What's the best time to plant tomatoes?",
    "How many weeks does the course last?",
    "Which season do you like most?",
    "I have a 24-hour shift",
])
def test_no_time_expression(text: str) -> None:
    assert span(text) == []


def test_several_expressions_in_the_order_written() -> None:
    assert [p for p, _, _ in span("Did I run more last week than in June 2022 or yesterday?")] == [
        "last week", "June 2022", "yesterday"]


def test_a_longer_expression_claims_its_words_first() -> None:
    # "8 May 2023" is one day, not also the month "May 2023" and the year "2023"
    assert span("on 8 May 2023") == [("8 May 2023", date(2023, 5, 8), date(2023, 5, 8))]


def test_without_a_reference_only_absolute_dates_resolve() -> None:
    assert span("What did we do last week and in July 2022?", None) == [
        ("July 2022", date(2022, 7, 1), date(2022, 7, 31))]
    assert span("on 8 May", None) == []


def test_a_date_that_does_not_exist_is_left_out() -> None:
    assert span("on 31 June 2023") == []


def test_last_weekend_on_a_weekend_is_the_one_before() -> None:
    sunday = date(2023, 8, 13)
    assert span("last weekend", sunday) == [("last weekend", date(2023, 8, 5), date(2023, 8, 6))]


def test_a_winter_crosses_the_year() -> None:
    february = date(2024, 2, 10)
    assert span("this winter", february) == [("this winter", date(2023, 12, 1), date(2024, 2, 29))]
    assert span("last winter", february) == [("last winter", date(2022, 12, 1), date(2023, 2, 28))]


def test_a_range_holds_its_days() -> None:
    (week,) = time_ranges("last week", REF)
    assert isinstance(week, DateRange)
    assert date(2023, 8, 1) in week
    assert REF not in week
    assert "2023-08-01" not in week


_WORDS = ["last", "next", "this", "past", "in", "the", "of", "on", "ago", "a", "couple", "two", "31", "0", "8th",
          "May", "may", "February", "Sept.", "2023", "1999", "week", "weekend", "month", "year", "days", "summer",
          "winter", "Friday", "yesterday", "tomorrow", "day", "before", "after", "over", "-", ",", "2023-02-30"]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(_WORDS), max_size=12), st.dates(min_value=date(1901, 3, 1),
                                                                   max_value=date(2098, 10, 1)))
def test_any_words_give_well_formed_ranges(words: list[str], reference: date) -> None:
    text = " ".join(words)
    for found in time_ranges(text, reference):
        assert found.start <= found.end
        assert found.phrase in text
