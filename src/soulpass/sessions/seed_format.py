"""Episodes in the shape of seed ``000_…``: inline ``turn_1``/``turn_2`` become turn records."""

from __future__ import annotations

import re
from datetime import datetime
from typing import Any

from pydantic import ValidationError

from soulpass.errors import InvalidInput
from soulpass.ids import is_permanent_id, is_temp_id, new_temp_id
from soulpass.records import Episode, TurnLLM, TurnUser

__all__ = ["episode_from_seed_dict"]

_TURN_KEY = re.compile(r"^turn_(\d+)$")
_EPISODE_FIELDS = set(Episode.model_fields)
_USER_SPEAKERS = {"user", "human", "matt"}


def _turn(raw: Any, key: str, when: datetime | None) -> TurnUser | TurnLLM:
    if not isinstance(raw, dict) or not isinstance(raw.get("text", raw.get("text_excerpt")), str):
        raise InvalidInput(f"{key} must be an object with a 'speaker' and a 'text'", field=key)
    text = raw.get("text", raw.get("text_excerpt"))
    speaker = raw.get("speaker", "user")
    if not isinstance(speaker, str) or not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}", speaker):
        raise InvalidInput(f"{key}.speaker {speaker!r} is not a valid agent name", field=f"{key}.speaker")
    extra = {k: v for k, v in raw.items() if k not in ("speaker", "text", "text_excerpt")}
    common: dict[str, Any] = {"text_excerpt": text}
    if when is not None:
        common["created_at"] = when
    try:
        if speaker.lower() in _USER_SPEAKERS:
            return TurnUser(id=new_temp_id("turn_user"), **common, **extra)
        return TurnLLM(id=new_temp_id("turn_llm"), agent=speaker, **common, **extra)
    except ValidationError as exc:
        raise InvalidInput(f"{key} does not match the turn schema: {exc}", field=key) from exc


def episode_from_seed_dict(raw: dict[str, Any]) -> tuple[Episode, list[TurnUser | TurnLLM]]:
    """Split a seed-shaped episode into an ``Episode`` and the turns it references.

    Keys the V3 schema does not know (``rms_annotation`` …) are kept under ``annotations``; an
    ``episode_id`` that is not one of ours is kept as ``annotations.source_episode_id``.
    """
    data = dict(raw)
    when_raw = data.pop("timestamp", None) or data.get("created_at")
    try:
        when = datetime.fromisoformat(str(when_raw).replace("Z", "+00:00")) if when_raw else None
    except ValueError as exc:
        raise InvalidInput(f"timestamp {when_raw!r} is not ISO-8601", field="timestamp") from exc
    turn_keys = sorted((k for k in data if _TURN_KEY.match(k)), key=lambda k: int(k[5:]))
    turns = [_turn(data.pop(k), k, when) for k in turn_keys]
    annotations = dict(data.pop("annotations", {}) or {})
    source_id = data.pop("episode_id", None) or data.pop("id", None)
    ours = isinstance(source_id, str) and (is_temp_id(source_id) or is_permanent_id(source_id))
    if source_id is not None and not ours:
        annotations["source_episode_id"] = str(source_id)
        source_id = None
    for key in [k for k in data if k not in _EPISODE_FIELDS]:
        annotations[key] = data.pop(key)
    data["id"] = source_id if source_id and is_temp_id(source_id) else new_temp_id("episode")
    data["turn_refs"] = [*data.get("turn_refs", []), *(t.id for t in turns)]
    if when is not None:
        data["created_at"] = when
    if not data.get("text") and not data.get("summary") and turns:
        data["text"] = "\n".join(f"{t.agent or ('user' if isinstance(t, TurnUser) else 'assistant')}: {t.text_excerpt}"
                                 for t in turns)
    data["annotations"] = annotations
    try:
        episode = Episode.model_validate(data)
    except (ValidationError, InvalidInput) as exc:
        raise InvalidInput(f"episode does not match the Episode V3 schema: {exc}", field="episode") from exc
    return episode, turns
