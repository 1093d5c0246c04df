#!/usr/bin/env python3
"""How the query analysis (``soulpass.retrieval.analyse``) reads the questions of data sets in the
LoCoMo layout: per data-set category, how many questions get each shape, name a participant, speak
in the first person, carry a time expression, or are requests a standing instruction may govern.

    .venv/bin/python benchmarks/query_shapes.py ../shared/bench/locomo10.json ../shared/bench/beam500k.json \\
        [--json benchmarks/results/query_shapes.json] [--examples 3] [--instructions]

A diagnostic only: it shows what the analysis makes of questions it was never written for. It is
never used to tune the analysis's rules to a data set (the rules are general English grammar; the
issue's rules of measurement forbid data-set names, category ids and one set's phrasing in them),
and a category's "right" shape is not defined here: categories are the data set's, shapes are ours.
Where it shows a misreading of English (a rule firing on grammar it was not meant for), the fix is a
general rule with hand-written examples in tests/test_retrieval_analysis.py, never a set's phrasing.

Each question is read with its conversation's speakers as the known participants and the latest
session date as the reference date (a question is asked after the conversation). The questions are
those ``soulpass bench locomo`` scores: the ones with usable evidence.

With ``--instructions`` it also counts, per speaker, the turns' sentences that
``soulpass.retrieval.standing_instructions`` takes for a standing instruction or a preference (it is
meant for the user's turns: an assistant's advice is written in imperatives too), and per category
how many questions have a statement in an evidence turn, one that shares a topic word with the
question (``shared_topics``), and how often the conversation's statement sharing the most topic
words is in an evidence turn: how far matching on topic words can carry a governed request.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from soulpass.bench.locomo import CATEGORIES, Conversation, load
from soulpass.retrieval import (
    Directive,
    QueryAnalysis,
    Shape,
    StandingInstruction,
    analyse,
    shared_topics,
    standing_instructions,
)


def read_conversation(conv: Conversation) -> list[tuple[int, QueryAnalysis]]:
    """Each question of ``conv`` with its category, as the analysis reads it."""
    speakers = list(dict.fromkeys(t.speaker for s in conv.sessions for t in s.turns))
    dates = [s.when.date() for s in conv.sessions]
    return [(q.category, analyse(q.text, speakers, session_dates=dates)) for q in conv.questions]


def tally(read: Sequence[tuple[int, QueryAnalysis]], examples: int = 0) -> dict[str, Any]:
    """Per category (and overall): questions, shapes, and the share with each other reading."""
    groups: dict[str, list[QueryAnalysis]] = {"all": [a for _, a in read]}
    for category, a in read:
        groups.setdefault(f"{category} {CATEGORIES.get(category, '?')}", []).append(a)
    out: dict[str, Any] = {}
    for name in sorted(groups, key=_category_order):
        items = groups[name]
        shapes = Counter(a.shape.value for a in items)
        row: dict[str, Any] = {
            "questions": len(items),
            "shapes": {s.value: shapes.get(s.value, 0) for s in Shape},
            "names_someone": _share(items, lambda a: bool(a.who)),
            "first_person": _share(items, lambda a: a.user),
            "has_time": _share(items, lambda a: bool(a.when)),
            "request": _share(items, lambda a: a.request),
        }
        if examples:
            row["examples"] = {s.value: [a.text for a in items if a.shape is s][:examples] for s in Shape}
        out[name] = row
    return out


Statements = dict[str, tuple[str, tuple[StandingInstruction, ...]]]  # dia id -> speaker, statements


def statements_of(conv: Conversation) -> Statements:
    """The standing statements recognised in each turn of ``conv``, by dia id, with its speaker."""
    return {t.dia_id: (t.speaker, standing_instructions(t.text)) for s in conv.sessions for t in s.turns}


def count_instructions(statements: Sequence[Statements]) -> dict[str, dict[str, int]]:
    """Per speaker: turns, and sentences recognised as each kind of standing statement."""
    out: dict[str, Counter[str]] = {}
    for conv in statements:
        for speaker, found in conv.values():
            row = out.setdefault(speaker, Counter())
            row["turns"] += 1
            row.update(f.kind.value for f in found)
    return {speaker: {"turns": row["turns"], **{k.value: row[k.value] for k in Directive}}
            for speaker, row in sorted(out.items())}


def governing(conv: Conversation, statements: Statements) -> list[tuple[int, Counter[str]]]:
    """Per question: whether an evidence turn holds a standing statement, whether one of those shares
    a topic word with the question, and whether the conversation's statement sharing the most topic
    words with it (the first of equals) stands in an evidence turn."""
    speakers = list(dict.fromkeys(t.speaker for s in conv.sessions for t in s.turns))
    dates = [s.when.date() for s in conv.sessions]
    every = [(dia, f) for dia, (_, found) in statements.items() for f in found]
    rows = []
    for q in conv.questions:
        topics = analyse(q.text, speakers, session_dates=dates).topics
        evidence = [f for dia, f in every if dia in q.evidence]
        best = max(every, key=lambda item: len(shared_topics(item[1], topics)), default=None)
        rows.append((q.category, Counter({
            "evidence_has_statement": bool(evidence),
            "evidence_statement_shares_topic": any(shared_topics(f, topics) for f in evidence),
            "best_sharing_statement_is_evidence": best is not None and bool(shared_topics(best[1], topics))
            and best[0] in q.evidence,
        })))
    return rows


def governing_table(rows: Sequence[tuple[int, Counter[str]]]) -> dict[str, dict[str, int]]:
    out: dict[str, Counter[str]] = {}
    for category, row in rows:
        for name in ("all", f"{category} {CATEGORIES.get(category, '?')}"):
            out.setdefault(name, Counter({"questions": 0})).update(row + Counter({"questions": 1}))
    return {name: dict(out[name]) for name in sorted(out, key=_category_order)}


def _category_order(name: str) -> tuple[bool, int]:
    """"all" first, then the categories by number."""
    return name != "all", int(name.split()[0]) if name != "all" else 0


def _share(items: Sequence[QueryAnalysis], test: Any) -> float:
    return round(sum(1 for a in items if test(a)) / len(items), 3) if items else 0.0


def print_table(name: str, table: dict[str, Any]) -> None:
    shapes = [s.value for s in Shape]
    print(f"\n{name}")
    print(f"{'category':<22}{'n':>5} " + "".join(f"{s:>11}" for s in shapes)
          + f"{'names':>7}{'I/we':>6}{'time':>6}{'req':>6}")
    for category, row in table.items():
        counts = "".join(f"{row['shapes'][s] / row['questions']:>11.2f}" for s in shapes)
        print(f"{category:<22}{row['questions']:>5} {counts}{row['names_someone']:>7.2f}{row['first_person']:>6.2f}"
              f"{row['has_time']:>6.2f}{row['request']:>6.2f}")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("data", nargs="+", type=Path, help="data files in the LoCoMo layout")
    parser.add_argument("--json", type=Path, help="write the tables here as JSON")
    parser.add_argument("--examples", type=int, default=0, help="this many questions per shape and category")
    parser.add_argument("--instructions", action="store_true",
                        help="also count the standing instructions and preferences in the turns, per speaker")
    args = parser.parse_args(argv)
    report: dict[str, Any] = {}
    for path in args.data:
        conversations = load(path)
        read = [item for conv in conversations for item in read_conversation(conv)]
        report[path.name] = tally(read, args.examples)
        print_table(path.name, report[path.name])
        if args.instructions:
            statements = [statements_of(conv) for conv in conversations]
            counts = count_instructions(statements)
            report[path.name]["instructions_by_speaker"] = counts
            total = {k: sum(row[k] for row in counts.values()) for k in ("turns", *(d.value for d in Directive))}
            print(f"standing statements in {total['turns']} turns: " + ", ".join(
                f"{k} {total[k]}" for k in total if k != "turns"))
            rows = [row for conv, found in zip(conversations, statements, strict=True)
                    for row in governing(conv, found)]
            report[path.name]["governing"] = governing_table(rows)
            for name, row in report[path.name]["governing"].items():
                print(f"  {name:<22}" + "  ".join(f"{k} {v}" for k, v in row.items()))
    if args.json:
        args.json.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
