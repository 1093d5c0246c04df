"""The RAG search tool: hybrid search -> the best episodes, rendered in full as Markdown."""

from __future__ import annotations

from typing import TYPE_CHECKING

from soulpass.errors import NotFound
from soulpass.ids import is_temp_id
from soulpass.index.search import Hit
from soulpass.records import BufferEvent, Episode

if TYPE_CHECKING:
    from soulpass.engine import Sandbox

__all__ = ["find_episodes", "render_episode"]


def render_episode(ep: Episode) -> str:
    """An episode in full: title line, date, situation, structured summary, narrative, turn refs."""
    s, c = ep.summary, ep.situation_context
    lines = [f"### Episode {ep.id} · {ep.created_at:%Y-%m-%d %H:%M} UTC"]
    meta = [f"{k}: {v}" for k, v in (("agent", ep.agent), ("persona", ep.persona_id), ("event", ep.event_id)) if v]
    situation = [f"{k}: {v}" for k, v in c.model_dump().items() if v]
    if meta:
        lines.append("*" + " · ".join(meta) + "*")
    if situation:
        lines.append("**Situation:** " + "; ".join(situation))
    for label, value in (("Action taken", s.action_taken), ("Key outcome", s.key_outcome),
                         ("Future implication", s.future_implication)):
        if value:
            lines.append(f"- **{label}:** {value}")
    if ep.text and ep.text != ep.core_text():
        lines += ["", ep.text.strip()]
    if ep.turn_refs:
        lines += ["", "Turn refs: " + ", ".join(ep.turn_refs)]
    return "\n".join(lines)


def _buffer_episodes(events: list[BufferEvent]) -> dict[str, Episode]:
    return {str(ev.data["id"]): Episode.model_validate(ev.data) for ev in events if ev.type == "episode"}


def find_episodes(sb: Sandbox, hits: list[Hit], k: int, events: list[BufferEvent]) -> list[Episode]:
    """The ``k`` best episodes among search ``hits``: episode hits, and turn hits mapped to their episode."""
    in_buffer = _buffer_episodes(events)
    episode_of_turn: dict[str, str] = {}
    for buffered_id, buffered in in_buffer.items():
        for ref in buffered.turn_refs:
            episode_of_turn.setdefault(ref, buffered_id)
    out: list[Episode] = []
    seen: set[str] = set()
    for hit in hits:
        eid: str | None = hit.id if hit.kind == "episode" else None
        if eid is None:
            if is_temp_id(hit.id):
                eid = episode_of_turn.get(hit.id)
            else:
                try:
                    turn = sb.account.record(hit.id)
                except NotFound:
                    continue
                eid = getattr(turn, "episode_ref", None)
        if eid is None or eid in seen:
            continue
        seen.add(eid)
        ep: Episode | None
        if is_temp_id(eid):
            ep = in_buffer.get(eid)
        else:
            try:
                rec = sb.account.record(eid)
            except NotFound:
                continue
            ep = rec if isinstance(rec, Episode) else None
        if ep is not None:
            out.append(ep)
        if len(out) == k:
            break
    return out
