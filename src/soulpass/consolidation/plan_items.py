"""The planner's record of each buffer event's fate: the items of an archive's preview
(``consolidation.preview``). Each family step of ``consolidation.plan`` notes here what it just
decided, so the preview is the plan itself, never worked out a second time."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from soulpass.consolidation.clipboard import ClipboardOp
from soulpass.consolidation.documents import CoreMerge, LatestWins
from soulpass.consolidation.journal import JournalPlan
from soulpass.consolidation.preview import NOT_ITEMS, Action, KeyChange, PreviewItem
from soulpass.consolidation.rules import ReviewRule
from soulpass.consolidation.semantic import FactOutcome
from soulpass.prose import JournalEntry
from soulpass.records import BufferEvent, CoreProposal, Record, SemanticCandidate

__all__ = ["PlanItems", "item_kind"]


def item_kind(event: BufferEvent) -> str:
    """An item's kind as the preview names it (a record's kind, else the document it changes)."""
    if event.type in ("turn", "episode", "sensory"):
        return str(event.data.get("kind", event.type))
    return {"semantic_candidate": "fact", "state_delta": "state", "profile_update": "profile",
            "core_proposal": "core", "clipboard_op": "clipboard"}.get(event.type, event.type)


@dataclass
class PlanItems:
    """The items of one plan, by buffer event id, as its steps decide them."""

    by_event: dict[str, PreviewItem] = field(default_factory=dict)

    def note(self, event: BufferEvent, kind: str, action: Action, **fields: Any) -> None:
        self.by_event[event.event_id] = PreviewItem(id=event.event_id, kind=kind, action=action, **fields)

    def excluded(self, event: BufferEvent, reason: str | None) -> None:
        self.note(event, item_kind(event), "exclude", reason=reason)

    def record(self, event: BufferEvent, rec: Record, record_id: str, *, repeated: bool) -> None:
        """A turn, episode or sensory record: added under ``record_id``, or a repeat of it."""
        if repeated:
            self.note(event, rec.kind, "skip-duplicate", text=rec.text, temp_ids=(rec.id,), record_id=record_id,
                      rule="episodes.append_all", reason="written twice")
        else:
            self.note(event, rec.kind, "add", text=rec.text, temp_ids=(rec.id,), record_id=record_id)

    def fact(self, event: BufferEvent, cand: SemanticCandidate, out: FactOutcome) -> None:
        text = cand.content or " ".join(x for x in (cand.subject, cand.predicate, cand.object) if x)
        common: dict[str, Any] = {"text": text, "temp_ids": (cand.id,) if cand.id else (),
                                  "confidence": cand.confidence, "record_id": out.fact_id}
        if out.status == "accepted":
            self.note(event, "fact", "supersede" if out.supersedes else "add", supersedes=out.supersedes, **common)
        else:
            self.note(event, "fact", "reject" if out.status == "rejected" else "skip-duplicate",
                      rule="semantic.validate_and_merge", reason=out.detail, **common)

    def keys(self, event: BufferEvent, kind: str, document: str, data: dict[str, Any], before: dict[str, Any],
             lw: LatestWins) -> None:
        """A state or profile write: a change when one of its keys ends at its value and that is new
        to the master; else it changes nothing (the master has it, or a later write wins)."""
        changes = tuple(KeyChange(document=document, key=k, before=before.get(k), after=v) for k, v in data.items())
        text = ", ".join(f"{k} = {v!r}" for k, v in data.items())
        if any(k in lw.changed and lw.data.get(k) == v for k, v in data.items()):
            self.note(event, kind, "change", text=text, changes=changes)
        else:
            rule = "profile.latest_wins" if kind == "profile" else "states.latest_wins"
            self.note(event, kind, "skip-duplicate", text=text, changes=changes, rule=rule,
                      reason="the master holds these values already, or a later write wins")

    def core(self, event: BufferEvent, proposal: CoreProposal, cm: CoreMerge) -> None:
        """A core proposal as ``CoreMerge.propose`` just decided it."""
        key = proposal.section if proposal.key is None else f"{proposal.section}.{proposal.key}"
        common: dict[str, Any] = {"text": f"{key} = {proposal.value!r} ({proposal.reason})",
                                  "confidence": proposal.confidence}
        for c in cm.changes:
            if c["event_id"] == event.event_id:
                change = KeyChange(document="core", key=key, before=c["old"], after=c["new"])
                self.note(event, "core", "change", changes=(change,), **common)
                return
        for refused in (*cm.rejected, *cm.conflicts):
            if refused["event_id"] == event.event_id:
                self.note(event, "core", "reject", rule="core.careful_merge", reason=refused["why"], **common)
                return
        self.note(event, "core", "skip-duplicate", rule="core.careful_merge",
                  reason="core memory holds this value already", **common)

    def journal(self, entries: Iterable[tuple[BufferEvent, JournalEntry]], journal: JournalPlan) -> None:
        added = {a["temp_id"]: a["id"] for a in journal.added}
        repeats = {d["entry"]: d for d in journal.duplicates}
        for event, entry in entries:
            text, temp = entry.title or entry.text, (entry.id,)
            if entry.id in added:
                self.note(event, "journal", "add", text=text, temp_ids=temp, record_id=added[entry.id])
            else:
                dup = repeats.get(entry.id, {})
                self.note(event, "journal", "skip-duplicate", text=text, temp_ids=temp,
                          record_id=dup.get("duplicate_of"), rule="journal.on_repeat", reason=dup.get("why"))

    def clipboard(self, event: BufferEvent, op: ClipboardOp) -> None:
        self.note(event, "clipboard", "change", text=f"{op.agent}: {op.op} {op.item or ''}".rstrip())

    def in_order(self, events: Iterable[BufferEvent], review: ReviewRule) -> tuple[PreviewItem, ...]:
        """The items in buffer order, each marked with why the review policy holds it (if it does)."""
        out = []
        for ev in events:
            if ev.type in NOT_ITEMS:
                continue
            item = self.by_event.get(ev.event_id)
            if item is None:
                raise AssertionError(f"the planner left buffer event {ev.event_id} ({ev.type}) without an item")
            if item.action != "exclude":
                why = review.why(item.kind, item.action, item.confidence, item.supersedes)
                item = item.model_copy(update={"review": why}) if why else item
            out.append(item)
        return tuple(out)
