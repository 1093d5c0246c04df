"""The LoCoMo turn-retrieval benchmark, run through the normal write and search paths.

Each conversation goes into its own account: every session is a sandbox whose turns carry the
session's date as event time and their speaker as agent, archived in order. Every QA item with
evidence is a query; a hit counts when it is one of the item's evidence turns. The mapping from
record back to LoCoMo dialog id travels in a tag of the record (``dia:D1:3``) that only this module
reads: the retrieval itself knows nothing of the data set.

Metrics (fractional recall, as the LoCoMo paper): Recall@k = |evidence ∩ top-k| / |evidence|,
NDCG@10 with binary relevance, both averaged over questions, overall and per category.
"""

from __future__ import annotations

import json
import math
import re
import shutil
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from soulpass.engine import Account, Soulpass
from soulpass.errors import InvalidInput

__all__ = ["CATEGORIES", "KS", "Conversation", "Question", "Session", "load", "run"]

KS = (1, 5, 10, 20)
CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop", 5: "adversarial"}
TAG_PREFIX = "dia:"
_DIA = re.compile(r"D:?(\d+):(\d+)")
_DATE = re.compile(r"(\d{1,2}):(\d{2})\s*([ap]m)\s+on\s+(\d{1,2})\s+(\w+),?\s+(\d{4})", re.IGNORECASE)
_MONTHS = {m: i for i, m in enumerate(
    ["january", "february", "march", "april", "may", "june", "july", "august", "september", "october",
     "november", "december"], 1)}


@dataclass(frozen=True)
class Turn:
    dia_id: str
    speaker: str
    text: str


@dataclass(frozen=True)
class Session:
    number: int
    when: datetime
    turns: tuple[Turn, ...]


@dataclass(frozen=True)
class Question:
    text: str
    evidence: tuple[str, ...]
    category: int


@dataclass(frozen=True)
class Conversation:
    sample_id: str
    sessions: tuple[Session, ...]
    questions: tuple[Question, ...]
    dropped_evidence: int = 0

    @property
    def turns(self) -> int:
        return sum(len(s.turns) for s in self.sessions)


def parse_when(text: str) -> datetime:
    """``"1:56 pm on 8 May, 2023"`` → an aware UTC datetime."""
    m = _DATE.search(text)
    if not m:
        raise InvalidInput(f"unrecognised session date {text!r}", field="session_date_time")
    hour, minute, ampm, day, month, year = m.groups()
    if month.lower() not in _MONTHS:
        raise InvalidInput(f"unrecognised month in session date {text!r}", field="session_date_time")
    h = int(hour) % 12 + (12 if ampm.lower() == "pm" else 0)
    return datetime(int(year), _MONTHS[month.lower()], int(day), h, int(minute), tzinfo=UTC)


def turn_text(turn: dict[str, Any]) -> str:
    """What a speaker said, with the caption of a shared image (part of the turn's content)."""
    text = str(turn.get("text", "")).strip()
    caption = turn.get("blip_caption")
    if caption:
        text = f"{text} [shares a photo: {caption}]".strip()
    return text


def load(path: Path) -> list[Conversation]:
    """Parse ``locomo10.json``; malformed or dangling evidence ids are dropped (and counted)."""
    try:
        samples = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise InvalidInput(f"cannot read LoCoMo data {path}: {exc}", field="data") from exc
    if not isinstance(samples, list):
        raise InvalidInput(f"{path}: expected a list of samples", field="data")
    out = []
    for n, sample in enumerate(samples):
        conv = sample["conversation"]
        sessions = []
        numbers = sorted(int(k.split("_")[1]) for k in conv if re.fullmatch(r"session_\d+", k))
        for number in numbers:
            turns = tuple(Turn(dia_id=t["dia_id"], speaker=t["speaker"], text=turn_text(t))
                          for t in conv[f"session_{number}"])
            sessions.append(Session(number, parse_when(conv[f"session_{number}_date_time"]), turns))
        known = {t.dia_id for s in sessions for t in s.turns}
        questions, dropped = [], 0
        for qa in sample.get("qa", []):
            evidence = []
            for ev in qa.get("evidence", []):
                for s, t in _DIA.findall(str(ev)):
                    dia = f"D{int(s)}:{int(t)}"
                    if dia in known:
                        evidence.append(dia)
                    else:
                        dropped += 1
            if evidence:
                questions.append(Question(str(qa["question"]), tuple(dict.fromkeys(evidence)), int(qa["category"])))
        out.append(Conversation(str(sample.get("sample_id", f"conv-{n}")), tuple(sessions), tuple(questions),
                                dropped))
    return out


def account_name(conv: Conversation) -> str:
    return "locomo-" + re.sub(r"[^A-Za-z0-9_-]", "-", conv.sample_id)


def ingest(account: Account, conv: Conversation) -> int:
    """Each session a sandbox, each turn a ``turn_user`` record by its speaker; archived in order."""
    for session in conv.sessions:
        sandbox = account.create_sandbox(f"session-{session.number}")
        for i, turn in enumerate(session.turns):
            # Turns of a session keep their order in event time.
            sandbox.write_turn({"kind": "turn_user", "text_excerpt": turn.text, "agent": _agent(turn.speaker),
                                "created_at": session.when + timedelta(seconds=30 * i),
                                "tags": [TAG_PREFIX + turn.dia_id]})
        sandbox.archive()
    return conv.turns


def _agent(speaker: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]", "_", speaker) or "speaker"


def dia_of(account: Account) -> dict[str, str]:
    """Record id → dialog id, from the tags."""
    out = {}
    for rec in account.records("turn_user"):
        for tag in rec.tags:
            if tag.startswith(TAG_PREFIX):
                out[rec.id] = tag[len(TAG_PREFIX):]
    return out


@dataclass
class Scores:
    recall: dict[int, list[float]] = field(default_factory=lambda: {k: [] for k in KS})
    ndcg: list[float] = field(default_factory=list)

    def add(self, ranked: Sequence[str], evidence: Sequence[str]) -> None:
        gold = set(evidence)
        for k in KS:
            self.recall[k].append(len(gold & set(ranked[:k])) / len(gold))
        dcg = sum(1 / math.log2(i + 2) for i, d in enumerate(ranked[:10]) if d in gold)
        ideal = sum(1 / math.log2(i + 2) for i in range(min(len(gold), 10)))
        self.ndcg.append(dcg / ideal)

    def summary(self) -> dict[str, Any]:
        n = len(self.ndcg)
        out: dict[str, Any] = {"questions": n}
        for k in KS:
            out[f"recall@{k}"] = round(sum(self.recall[k]) / n, 4) if n else None
        out["ndcg@10"] = round(sum(self.ndcg) / n, 4) if n else None
        return out


def _percentile(values: list[float], q: float) -> float:
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, math.ceil(q * len(ordered)) - 1))]


Searcher = Callable[[Account, str, int], list[str]]


def default_searcher(account: Account, query: str, k: int) -> list[str]:
    return [h.id for h in account.search(query, k, kinds=["turn_user"])]


def evaluate(account: Account, conv: Conversation, searcher: Searcher = default_searcher,
             k: int = max(KS)) -> tuple[list[dict[str, Any]], list[float]]:
    """One row per question (its ranked dialog ids) and the search latencies in ms."""
    dia = dia_of(account)
    rows, latencies = [], []
    for q in conv.questions:
        t0 = time.perf_counter()
        ids = searcher(account, q.text, k)
        latencies.append((time.perf_counter() - t0) * 1000)
        rows.append({"conversation": conv.sample_id, "question": q.text, "category": q.category,
                     "evidence": list(q.evidence), "ranked": [dia.get(i, i) for i in ids]})
    return rows, latencies


def score(rows: Iterable[dict[str, Any]]) -> dict[str, Any]:
    overall, per_cat = Scores(), {c: Scores() for c in CATEGORIES}
    for row in rows:
        overall.add(row["ranked"], row["evidence"])
        per_cat.setdefault(row["category"], Scores()).add(row["ranked"], row["evidence"])
    return {"overall": overall.summary(),
            "per_category": {f"{c} {CATEGORIES.get(c, '?')}": s.summary() for c, s in per_cat.items() if s.ndcg}}


Progress = Callable[[str, int, int], None]


def run(sp: Soulpass, conversations: Sequence[Conversation], *, reuse: bool = False,
        check_rebuild: bool = False, searcher: Searcher = default_searcher,
        progress: Progress | None = None) -> dict[str, Any]:
    """Ingest (unless ``reuse`` finds the account already there), query, score; optionally delete the
    index, rebuild it from the files and check that every query's top 10 is unchanged."""
    rows: list[dict[str, Any]] = []
    latencies: list[float] = []
    ingest_s, index_s, turns_ingested = 0.0, 0.0, 0
    rebuild_mismatches = 0
    for n, conv in enumerate(conversations):
        name = account_name(conv)
        existing = name in sp.accounts()
        account = sp.account(name, create=True)
        try:
            if not (reuse and existing and account.head() > 0):
                if existing:
                    raise InvalidInput(f"account {name} already exists; use a fresh home or --reuse", field="home")
                t0 = time.perf_counter()
                turns_ingested += ingest(account, conv)
                ingest_s += time.perf_counter() - t0
            t0 = time.perf_counter()
            account.index()  # catch up and embed before timing queries
            index_s += time.perf_counter() - t0
            conv_rows, lat = evaluate(account, conv, searcher)
            rows += conv_rows
            latencies += lat
            if check_rebuild:
                account.close()
                shutil.rmtree(account.store.path / "index")
                account.index()  # opens an empty index and catches up from version 0: a full rebuild
                again, _ = evaluate(account, conv, searcher)
                rebuild_mismatches += sum(a["ranked"][:10] != b["ranked"][:10] for a, b in zip(conv_rows, again,
                                                                                               strict=True))
        finally:
            account.close()
        if progress:
            progress(conv.sample_id, n + 1, len(conversations))
    embedder = sp.embedder()
    result: dict[str, Any] = {
        "benchmark": "locomo-turn-retrieval",
        "conversations": len(conversations),
        "turns": sum(c.turns for c in conversations),
        "dropped_evidence_ids": sum(c.dropped_evidence for c in conversations),
        "embedder": embedder.model_id if embedder else None,
        **score(rows),
        "ingest": {"turns": turns_ingested, "seconds": round(ingest_s, 2),
                   "turns_per_s": round(turns_ingested / ingest_s, 1) if ingest_s else None,
                   "index_seconds": round(index_s, 2)},
        "latency_ms": {"p50": round(_percentile(latencies, 0.5), 2), "p95": round(_percentile(latencies, 0.95), 2),
                       "queries": len(latencies)},
        "when": datetime.now(UTC).isoformat(timespec="seconds"),
    }
    if check_rebuild:
        result["rebuild"] = {"queries_with_other_top10": rebuild_mismatches}
    result["_rows"] = rows
    return result
