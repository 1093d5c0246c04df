"""Mem0 memories: the JSON that ``Memory.get_all`` (or the platform's ``GET /v1/memories``) returns.

The document is ``{"results": [...], "relations": [...]}`` (``relations`` only with a graph
store) or, from older versions, the bare list of results. A result has ``id``, ``memory`` (the
text), ``created_at`` (ISO 8601), and optionally ``hash``, ``updated_at``, ``user_id``,
``agent_id``, ``run_id``, ``categories`` and ``metadata``; a relation has ``source``,
``relationship`` and ``target`` (or ``destination``).

A memory becomes a **sensory record**: Mem0's memories are short free-text statements an LLM
extracted ("Is vegetarian", "Lives in Lisbon"), mostly without a subject, so as facts they would be
split by guesswork, lose their time (a fact's time is its archive's) and supersede each other by the
fact rules although Mem0 holds them side by side. A sensory record keeps the text verbatim, its
time, its provenance (``source`` = ``mem0:<id>``) and, as tags, its user, agent, categories and
scalar metadata; it is searchable like any record. A graph relation is already subject, predicate
and object: it becomes a fact. All of it is one version (``Account.bulk_append``).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from soulpass.errors import InvalidInput
from soulpass.ids import new_temp_id
from soulpass.importers.base import Failure, failure
from soulpass.importers.conversations import ImportSummary, Progress, identity_tag, known_tags, parse_time, read_json
from soulpass.records import Record, SemanticFact, SensoryRecord

if TYPE_CHECKING:
    from soulpass.engine import Account

__all__ = ["SOURCE", "Mem0Memories", "ingest_records"]

SOURCE = "mem0"
_TAG_MAX = 100


def _tag(text: str) -> str:
    return " ".join(text.split())[:_TAG_MAX]


class Mem0Memories:
    """A Mem0 ``get_all`` JSON as an importer of records (sensory records, and facts for graph
    relations); an entry without its fields is a :class:`Failure`."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        data = read_json(self.path, "a Mem0 get_all JSON")
        if isinstance(data, list):
            data = {"results": data}
        if not isinstance(data, dict) or not isinstance(data.get("results"), list):
            raise InvalidInput(f"{self.path}: a Mem0 get_all JSON has a list of results", path=str(self.path))
        self.results: list[Any] = data["results"]
        self.relations: list[Any] = data.get("relations") or []

    def items(self) -> Iterator[Record | Failure]:
        for n, raw in enumerate(self.results):
            name = str(raw.get("id") or f"results[{n}]") if isinstance(raw, dict) else f"results[{n}]"
            try:
                yield _memory(raw)
            except InvalidInput as exc:
                yield failure(name, exc)
            except (KeyError, TypeError, AttributeError, ValidationError) as exc:
                yield Failure(name, f"not a Mem0 memory (id, memory, created_at): {type(exc).__name__} {exc}")
        for n, raw in enumerate(self.relations):
            try:
                yield _relation(raw)
            except (KeyError, TypeError, AttributeError, ValidationError) as exc:
                yield Failure(f"relations[{n}]", f"not a Mem0 relation (source, relationship, target): {exc}")


def _memory(raw: dict[str, Any]) -> SensoryRecord:
    text = raw["memory"]
    if not isinstance(text, str) or not text.strip():
        raise InvalidInput("the memory has no text", field="memory")
    tags = [identity_tag(SOURCE, "memory", str(raw["id"]), text), f"source:{SOURCE}"]
    for key in ("user_id", "agent_id", "run_id"):
        if raw.get(key):
            tags.append(_tag(f"{key.removesuffix('_id')}:{raw[key]}"))
    categories = raw.get("categories")
    if isinstance(categories, list):
        tags += [_tag(f"category:{c}") for c in categories if isinstance(c, str) and c.strip()]
    meta = raw.get("metadata")
    if isinstance(meta, dict):  # scalars only: a tag is one line of text
        tags += [_tag(f"meta:{k}={v}") for k, v in meta.items() if isinstance(v, str | int | float | bool)]
    return SensoryRecord(id=new_temp_id("sensory"), content=text, source=f"{SOURCE}:{raw['id']}",
                         created_at=parse_time(raw["created_at"], "created_at"), tags=tuple(dict.fromkeys(tags)))


def _relation(raw: dict[str, Any]) -> SemanticFact:
    s, p = str(raw["source"]), str(raw["relationship"])
    o = str(raw.get("target") or raw["destination"])
    return SemanticFact(id=new_temp_id("fact"), subject=s, predicate=p, object=o, confidence=1.0,
                        tags=(identity_tag(SOURCE, "relation", s, p, o), f"source:{SOURCE}"))


def ingest_records(account: Account, items: Iterator[Record | Failure], summary: ImportSummary, *,
                   dry_run: bool = False, progress: Progress | None = None) -> ImportSummary:
    """The records not already in the account (by their identity tag) as one version."""
    records: list[Record] = []
    for item in items:
        if isinstance(item, Failure):
            summary.failures.append(item)
        else:
            records.append(item)
    seen = known_tags(account, (r.tags[0] for r in records))
    fresh = []
    for rec in records:
        if rec.tags[0] in seen:
            summary.skip(rec.kind, rec.tags[0], seen)
        else:
            seen.add(rec.tags[0])
            fresh.append(rec)
            summary.imported[rec.kind] += 1
    if fresh and not dry_run:
        summary.versions.append(account.bulk_append(fresh))
    if progress is not None:
        progress(len(records), len(records))
    return summary
