"""Time expressions in English text, resolved against a reference date into inclusive date ranges.

What is read (case does not matter except for the month "May", which must be written with a
capital so that the verb "may" is not a month):

- dates: "2023-05-08", "8 May 2023", "8th of May, 2023", "May 8, 2023", "8 May" and "May 8" (the
  reference's year), "May 2023", "in July" (the reference's year), "in 2023";
- days: "yesterday", "last night", "today", "this morning", "tonight", "tomorrow", "the day before
  yesterday", "the day after tomorrow";
- periods: "last / this / next / past / coming" + "week", "weekend", "month", "year", a season or a
  weekday; "the summer of 2022"; "N days / weeks / months / years ago" (N in digits or words, "a",
  "a couple of"); "in the last / past N days..." (the span up to the reference).

The rules: a week runs Monday to Sunday; a season is meteorological and northern (spring March to
May, summer June to August, autumn or fall September to November, winter December to February);
"last summer" is the latest summer that ended before the reference, "next summer" the first that
starts after it; "N weeks ago" is the whole week (month, year) that holds the day N weeks before the
reference; "last Friday" is the latest Friday before the reference, "next Friday" the first after
it, "this Friday" the Friday of the reference's week. Relative expressions need a reference date;
without one only the absolute ones are resolved. Nothing reads a clock: "today" is the caller's.
"""

from __future__ import annotations

import calendar
import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import date, timedelta

__all__ = ["DateRange", "time_ranges"]


@dataclass(frozen=True)
class DateRange:
    """The days from ``start`` to ``end`` (both included) that ``phrase`` names."""

    phrase: str
    start: date
    end: date

    def __contains__(self, day: object) -> bool:
        return isinstance(day, date) and self.start <= day <= self.end


_MONTHS = {name.lower(): n for n, name in enumerate(calendar.month_name) if name}
_MONTHS |= {name.lower(): n for n, name in enumerate(calendar.month_abbr) if name}
_MONTHS["sept"] = 9
_WEEKDAYS = {name.lower(): n for n, name in enumerate(calendar.day_name)}
_DAYS_FROM_REFERENCE = {"yesterday": -1, "night": -1, "today": 0, "tonight": 0, "morning": 0, "afternoon": 0,
                        "evening": 0, "tomorrow": 1}  # by the last word: "last night", "this morning"
_SEASONS = {"spring": 3, "summer": 6, "autumn": 9, "fall": 9, "winter": 12}  # the month each begins
_NUMBERS = {"a": 1, "an": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7,
            "eight": 8, "nine": 9, "ten": 10, "eleven": 11, "twelve": 12, "a couple of": 2, "couple of": 2}

_MONTH = r"(?P<month>" + "|".join(sorted(_MONTHS, key=len, reverse=True)) + r")\.?"
_DAY = r"(?P<day>[0-3]?\d)(?:st|nd|rd|th)?"
_YEAR = r"(?P<year>(?:19|20)\d\d)"
_NUMBER = r"(?P<n>\d{1,3}|" + "|".join(sorted(_NUMBERS, key=len, reverse=True)) + r")"
_UNIT = r"(?P<unit>day|week|month|year)s?"
_SEASON = r"(?P<season>" + "|".join(_SEASONS) + r")"
_WEEKDAY = r"(?P<weekday>" + "|".join(_WEEKDAYS) + r")"
_PERIOD = r"(?P<period>week|weekend|month|year)"
_WHICH = r"(?P<which>last|this|next|past|coming)"

Span = tuple[date, date]


def _month_span(year: int, month: int) -> Span:
    return date(year, month, 1), date(year, month, calendar.monthrange(year, month)[1])


def _shift_month(year: int, month: int, delta: int) -> tuple[int, int]:
    n = year * 12 + (month - 1) + delta
    return n // 12, n % 12 + 1


def _week_span(day: date) -> Span:
    monday = day - timedelta(days=day.weekday())
    return monday, monday + timedelta(days=6)


def _season_span(season: str, year: int) -> Span:
    """The season of ``year`` (a winter belongs to the year its December is in)."""
    first = _SEASONS[season]
    end_year, end_month = _shift_month(year, first, 2)
    return date(year, first, 1), _month_span(end_year, end_month)[1]


def _day(year: int, month: int, day: int) -> Span | None:
    try:
        d = date(year, month, day)
    except ValueError:
        return None
    return d, d


def _number(word: str) -> int:
    return int(word) if word.isdigit() else _NUMBERS[" ".join(word.split())]


def _units_ago(n: int, unit: str, ref: date) -> Span:
    if unit == "day":
        d = ref - timedelta(days=n)
        return d, d
    if unit == "week":
        return _week_span(ref - timedelta(weeks=n))
    if unit == "month":
        return _month_span(*_shift_month(ref.year, ref.month, -n))
    return date(ref.year - n, 1, 1), date(ref.year - n, 12, 31)


def _units_back(n: int, unit: str, ref: date) -> Span:
    """The span from ``n`` units before ``ref`` up to ``ref``."""
    if unit in ("day", "week"):
        return ref - timedelta(days=n * (7 if unit == "week" else 1)), ref
    months = n * (12 if unit == "year" else 1)
    year, month = _shift_month(ref.year, ref.month, -months)
    return date(year, month, min(ref.day, calendar.monthrange(year, month)[1])), ref


def _period(which: str, period: str, ref: date) -> Span:
    step = {"last": -1, "past": -1, "this": 0, "next": 1, "coming": 1}[which]
    if period == "week":
        return _week_span(ref + timedelta(weeks=step))
    if period == "weekend":
        saturday = _week_span(ref + timedelta(weeks=step))[0] + timedelta(days=5)
        if step < 0 and ref.weekday() >= 5:  # on a weekend, "last weekend" is the one before this one
            saturday = _week_span(ref)[0] - timedelta(days=2)
        return saturday, saturday + timedelta(days=1)
    if period == "month":
        return _month_span(*_shift_month(ref.year, ref.month, step))
    return date(ref.year + step, 1, 1), date(ref.year + step, 12, 31)


def _season(which: str, season: str, ref: date) -> Span:
    year = ref.year - 1 if season == "winter" and ref.month <= 2 else ref.year
    span = _season_span(season, year)  # the one of the reference's year (or the winter it is in)
    if which in ("last", "past"):
        return span if span[1] < ref else _season_span(season, year - 1)
    if which in ("next", "coming"):
        return span if span[0] > ref else _season_span(season, year + 1)
    return span


def _weekday(which: str, weekday: str, ref: date) -> Span:
    target = _WEEKDAYS[weekday]
    if which in ("last", "past"):
        d = ref - timedelta(days=(ref.weekday() - target - 1) % 7 + 1)
    elif which in ("next", "coming"):
        d = ref + timedelta(days=(target - ref.weekday() - 1) % 7 + 1)
    else:
        d = _week_span(ref)[0] + timedelta(days=target)
    return d, d


@dataclass(frozen=True)
class _Rule:
    pattern: re.Pattern[str]
    absolute: bool  # names its own year: resolves without a reference date
    resolve: Callable[[dict[str, str], date], Span | None]


def _rule(pattern: str, resolve: Callable[[dict[str, str], date], Span | None], *, absolute: bool = False) -> _Rule:
    # a space in a pattern stands for any run of white space ("last\nweek" in a wrapped line)
    spaced = pattern.replace(" ", r"\s+")
    return _Rule(re.compile(r"(?<![\w-])" + spaced + r"(?![\w-])", re.IGNORECASE), absolute, resolve)


def _dmy(g: dict[str, str], ref: date) -> Span | None:
    return _day(int(g["year"]) if "year" in g else ref.year, _MONTHS[g["month"]], int(g["day"]))


# Earlier rules claim their words first ("8 May 2023" before "May 2023" before "in 2023").
_RULES: tuple[_Rule, ...] = (
    _rule(r"(?P<year>\d{4})-(?P<mm>\d\d)-(?P<dd>\d\d)", lambda g, r: _day(int(g["year"]), int(g["mm"]), int(g["dd"])),
          absolute=True),
    _rule(_DAY + r"(?: of)? " + _MONTH + r",? " + _YEAR, _dmy, absolute=True),
    _rule(_MONTH + r" " + _DAY + r",? " + _YEAR, _dmy, absolute=True),
    _rule(r"(?:the )?" + _SEASON + r"(?: of)? " + _YEAR, lambda g, r: _season_span(g["season"], int(g["year"])),
          absolute=True),
    _rule(_MONTH + r",? (?:of )?" + _YEAR, lambda g, r: _month_span(int(g["year"]), _MONTHS[g["month"]]),
          absolute=True),
    _rule(r"the day before yesterday", lambda g, r: _day_offset(-2, r)),
    _rule(r"the day after tomorrow", lambda g, r: _day_offset(2, r)),
    _rule(r"(?P<d>yesterday|today|tonight|tomorrow|last night|this (?:morning|afternoon|evening))",
          lambda g, r: _day_offset(_DAYS_FROM_REFERENCE[g["d"].split()[-1]], r)),
    _rule(r"(?:in|over|during|within) the (?:last|past) " + _NUMBER + " " + _UNIT,
          lambda g, r: _units_back(_number(g["n"]), g["unit"], r)),
    _rule(r"(?:in|over|during|within) the (?:last|past) " + _UNIT, lambda g, r: _units_back(1, g["unit"], r)),
    _rule(_NUMBER + " " + _UNIT + " ago", lambda g, r: _units_ago(_number(g["n"]), g["unit"], r)),
    _rule(_WHICH + " " + _PERIOD, lambda g, r: _period(g["which"], g["period"], r)),
    _rule(_WHICH + " " + _SEASON, lambda g, r: _season(g["which"], g["season"], r)),
    _rule(_WHICH + " " + _WEEKDAY, lambda g, r: _weekday(g["which"], g["weekday"], r)),
    _rule(_DAY + r"(?: of)? " + _MONTH, _dmy),
    _rule(_MONTH + r" " + _DAY + r"(?!\d)", _dmy),
    _rule(r"(?:in|during|since|until|by|early|mid|late|of) " + _MONTH,
          lambda g, r: _month_span(r.year, _MONTHS[g["month"]])),
    _rule(r"(?:in|during|since|until|by|from|before|after|of|year) " + _YEAR,
          lambda g, r: (date(int(g["year"]), 1, 1), date(int(g["year"]), 12, 31)), absolute=True),
)


def _day_offset(days: int, ref: date) -> Span:
    d = ref + timedelta(days=days)
    return d, d


def _is_modal_may(text: str, match: re.Match[str]) -> bool:
    """"may" written in lower case is the verb, not the month."""
    start = match.start("month") if "month" in match.re.groupindex else -1
    return start >= 0 and text[start:start + 3] == "may"


def time_ranges(text: str, reference: date | None = None) -> tuple[DateRange, ...]:
    """The time expressions of ``text`` as date ranges, in the order they are written. Relative
    ones ("last week", "two weeks ago") are resolved against ``reference``, and left out without it;
    a date that does not exist ("31 June") is left out."""
    claimed: list[tuple[int, int]] = []
    found: list[tuple[int, DateRange]] = []
    for rule in _RULES:
        if reference is None and not rule.absolute:
            continue
        for match in rule.pattern.finditer(text):
            start, end = match.span()
            if any(start < b and a < end for a, b in claimed) or _is_modal_may(text, match):
                continue
            groups = {k: v.lower() for k, v in match.groupdict().items() if v is not None}
            # an absolute rule is given a dummy reference it never reads
            span = rule.resolve(groups, reference or date.min)
            claimed.append((start, end))  # a date that does not exist claims its words all the same
            if span is not None:
                found.append((start, DateRange(match.group(0), span[0], span[1])))
    return tuple(r for _, r in sorted(found, key=lambda item: item[0]))
