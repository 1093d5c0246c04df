"""Conversations from other tools (ChatGPT, Claude, a generic JSONL) taken into an account, and
the content identity that makes every import idempotent.

Each imported record carries one tag ``import:<digest>``: a SHA-256 over the source's name and
the item's stable id there (a message id; without one, the conversation, role, text and which
occurrence of that text it is). Before writing, the digests already in the account's catalog are
looked up and those items skipped as duplicates, so the same file imported twice, or one session
replayed any number of times, adds nothing. Times are not part of the identity: a replay that
re-stamps its messages is still a replay.

A conversation becomes one sandbox, archived: its turns keep their original times and speakers
(``user`` → ``turn_user``; ``assistant`` → ``turn_llm`` by agent ``assistant``).
"""

from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from soulpass.consolidation.outcomes import Planned
from soulpass.errors import InvalidInput
from soulpass.ids import IMPORT_TAG_PREFIX
from soulpass.importers.base import Failure, failure
from soulpass.store.fsio import parse_json

if TYPE_CHECKING:
    from soulpass.engine import Account

__all__ = ["ROLES", "TAG_PREFIX", "ChatConversation", "ImportSummary", "Message", "Progress", "each_conversation",
           "identity_tag", "ingest_conversations", "known_tags", "parse_time", "read_json", "with_identities"]

TAG_PREFIX = IMPORT_TAG_PREFIX
ROLES = ("user", "assistant")
MAX_LABEL = 100  # a sandbox's name: the conversation's title, cut

Progress = Callable[[int, int], None]  # (items done, items in all)


@dataclass(frozen=True)
class Message:
    """One message: ``role`` is ``user`` or ``assistant``; ``key`` its id in the source, if any."""

    role: str
    text: str
    when: datetime
    key: str | None = None
    tag: str = ""  # the identity tag (see :func:`with_identities`)


@dataclass(frozen=True)
class ChatConversation:
    """One conversation of a source, its messages in order."""

    source: str
    id: str
    title: str
    messages: tuple[Message, ...]


@dataclass
class ImportSummary:
    """What an import did: items ``imported`` and ``duplicates`` (already in the account or
    earlier in the file) by kind, ``failures`` (the item and why), the ``versions`` committed."""

    source: str
    dry_run: bool = False
    imported: Counter[str] = field(default_factory=Counter)
    duplicates: Counter[str] = field(default_factory=Counter)
    forgotten: Counter[str] = field(default_factory=Counter)  # skipped: forgotten since an earlier import
    failures: list[Failure] = field(default_factory=list)
    versions: list[int] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {"source": self.source, "dry_run": self.dry_run, "imported": dict(self.imported),
                "duplicates": dict(self.duplicates), "forgotten": dict(self.forgotten),
                "failures": [f.to_json() for f in self.failures],
                "versions": self.versions}

    def skip(self, kind: str, tag: str, seen: KnownTags) -> None:
        """Count an item skipped because ``seen`` knows its identity ``tag``: a duplicate, or an
        item forgotten since an earlier import (a forget keeps the identities, never the content)."""
        (self.forgotten if tag in seen.forgotten else self.duplicates)[kind] += 1


class KnownTags(set[str]):
    """Identity tags an import skips: those records in force carry, and (``forgotten``) those of
    records forgotten since, from the forget tombstones' ``import_digests``."""

    forgotten: frozenset[str] = frozenset()


def identity_tag(source: str, *parts: str) -> str:
    """The content identity of an item: ``import:`` and 32 hex digits of SHA-256."""
    digest = hashlib.sha256("\0".join((source, *parts)).encode("utf-8", "surrogatepass")).hexdigest()
    return TAG_PREFIX + digest[:32]


def with_identities(conv: ChatConversation) -> ChatConversation:
    """The conversation with each message's identity tag: its id in the source, else its role,
    text and the how-many-th time that text was said in the conversation."""
    seen: Counter[tuple[str, str]] = Counter()
    out = []
    for m in conv.messages:
        if m.key:
            tag = identity_tag(conv.source, conv.id, "id", m.key)
        else:
            seen[(m.role, m.text)] += 1
            tag = identity_tag(conv.source, conv.id, m.role, m.text, str(seen[(m.role, m.text)]))
        out.append(Message(m.role, m.text, m.when, m.key, tag))
    return ChatConversation(conv.source, conv.id, conv.title, tuple(out))


def known_tags(account: Account, tags: Iterable[str]) -> KnownTags:
    """Which of ``tags`` records in force in ``account`` already carry (read from the store at
    HEAD, never an index), or forgotten records carried."""
    wanted = list(dict.fromkeys(tags))
    found = KnownTags()
    gone = {t for e in account.store.log(lists=False) if e.fields.get("kind") == "forget"
            for t in e.fields.get("import_digests", [])}
    found.forgotten = frozenset(gone.intersection(wanted))
    found.update(found.forgotten)
    if not wanted:
        return found
    found.update(account.store.snapshot().tags_carried(wanted))
    return found


def ingest_conversations(account: Account, items: Iterable[ChatConversation | Failure], summary: ImportSummary, *,
                         dry_run: bool = False, progress: Progress | None = None) -> ImportSummary:
    """Each conversation's new messages as one archived sandbox; messages already in the account
    (or earlier in this import) are counted as duplicates, a refused one is a failure."""
    convs: list[ChatConversation] = []
    for item in items:
        if isinstance(item, Failure):
            summary.failures.append(item)
        else:
            convs.append(with_identities(item))
    seen = known_tags(account, (m.tag for c in convs for m in c.messages))
    for done, conv in enumerate(convs, 1):
        fresh = []
        for m in conv.messages:
            if m.tag in seen:
                summary.skip("turn", m.tag, seen)
            else:
                seen.add(m.tag)
                fresh.append(m)
        if fresh and dry_run:
            summary.imported["turn"] += len(fresh)
        elif fresh:
            _archive(account, conv, fresh, summary)
        if progress is not None:
            progress(done, len(convs))
    return summary


def _archive(account: Account, conv: ChatConversation, messages: list[Message], summary: ImportSummary) -> None:
    label = " ".join(f"{conv.source}: {conv.title or conv.id}".split())[:MAX_LABEL]
    sandbox = account.create_sandbox(label)
    written = 0
    for n, m in enumerate(messages):
        turn: dict[str, Any] = {"kind": "turn_user"} if m.role == "user" else {"kind": "turn_llm",
                                                                              "agent": "assistant"}
        try:
            sandbox.write_turn({**turn, "text_excerpt": m.text, "created_at": m.when,
                                "tags": [m.tag, f"source:{conv.source}"]})
        except InvalidInput as exc:
            summary.failures.append(failure(f"{conv.id}/{m.key or n}", exc))
            continue
        written += 1
    if not written:
        sandbox.discard()
        return
    result = sandbox.archive()
    if not isinstance(result, Planned):  # every other outcome names its version (a dry run has none)
        summary.versions.append(result.version)
    summary.imported["turn"] += written


def each_conversation(raw: Iterable[tuple[str, Any]],
                      read: Callable[[str, Any], ChatConversation]) -> Iterator[ChatConversation | Failure]:
    """``read`` applied to each ``(name, raw conversation)``; one it cannot read is a failure."""
    for name, conv in raw:
        try:
            yield read(name, conv)
        except InvalidInput as exc:
            yield failure(name, exc)
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            yield Failure(name, f"not a conversation of this format: {type(exc).__name__} {exc}")


def parse_time(value: Any, what: str = "time") -> datetime:
    """A source's time: seconds since the epoch (ChatGPT) or ISO 8601 (Claude, Mem0); naive is UTC."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        return datetime.fromtimestamp(value, UTC)
    if isinstance(value, str) and value.strip():
        try:
            when = datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
        except ValueError as exc:
            raise InvalidInput(f"{what} {value!r} is not an ISO 8601 time", field=what) from exc
        return when if when.tzinfo else when.replace(tzinfo=UTC)
    raise InvalidInput(f"{what} {value!r} is neither seconds since the epoch nor an ISO 8601 time", field=what)


def read_json(path: str | Path, what: str) -> Any:
    """A whole JSON file; one that cannot be read or parsed is refused naming it."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, ValueError) as exc:
        raise InvalidInput(f"cannot read {what} {path}: {exc}", path=str(path)) from exc
    return parse_json(text, f"{what} {path}")
