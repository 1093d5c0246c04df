"""Caller input for a sandbox, as records: a turn or an episode given as a model or a dict (a seed
dict with inline turns included) becomes validated records with temporary ids, and a pydantic
error becomes ``InvalidInput`` naming its first fields."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ValidationError

from soulpass.errors import InvalidInput
from soulpass.ids import is_temp_id, new_temp_id
from soulpass.records import RECORD_MODELS, Episode, TurnLLM, TurnUser
from soulpass.sessions.arguments import string_list
from soulpass.sessions.seed_format import episode_from_seed_dict

__all__ = ["dump", "episode_model", "string_list", "turn_model", "validate"]


def turn_model(turn: Any) -> TurnUser | TurnLLM:
    if isinstance(turn, TurnUser | TurnLLM):
        if not is_temp_id(turn.id):
            raise InvalidInput(f"a new turn needs a temporary id (tu_temp_…/tl_temp_…), not {turn.id!r}", field="id")
        return turn
    if not isinstance(turn, dict):
        raise InvalidInput(f"a turn must be a TurnUser, a TurnLLM or a dict, not {type(turn).__name__}",
                           field="turn")
    data = dict(turn)
    kind = data.setdefault("kind", "turn_user")
    if kind not in ("turn_user", "turn_llm"):
        raise InvalidInput(f"turn kind must be turn_user or turn_llm, got {kind!r}", field="kind")
    data.setdefault("id", new_temp_id(kind))
    model: TurnUser | TurnLLM = validate(RECORD_MODELS[kind], data)
    return turn_model(model)


def episode_model(episode: Any) -> tuple[Episode, list[TurnUser | TurnLLM]]:
    if isinstance(episode, Episode):
        if not is_temp_id(episode.id):
            raise InvalidInput(f"a new episode needs a temporary id (ep_temp_…), not {episode.id!r}", field="id")
        return episode, []
    if not isinstance(episode, dict):
        raise InvalidInput(f"an episode must be an Episode or a dict, not {type(episode).__name__}",
                           field="episode")
    if any(k.startswith("turn_") and k != "turn_refs" for k in episode):  # the seed's inline turns
        return episode_from_seed_dict(episode)
    data = dict(episode)
    data.setdefault("id", data.get("episode_id") or new_temp_id("episode"))
    return episode_model(validate(Episode, data))


def dump(model: BaseModel) -> dict[str, Any]:
    try:
        return model.model_dump(mode="json")
    except (ValueError, UnicodeError) as exc:  # PydanticSerializationError is a ValueError
        raise InvalidInput(f"{type(model).__name__} cannot be stored as JSON: {exc}") from exc


def validate(model: type[Any], data: dict[str, Any]) -> Any:
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise InvalidInput(f"{model.__name__} rejected: {_first_errors(exc)}", field=model.__name__) from exc


def _first_errors(exc: ValidationError) -> str:
    parts = []
    for err in exc.errors()[:3]:
        loc = ".".join(str(p) for p in err["loc"]) or "(root)"
        parts.append(f"{loc}: {err['msg']}")
    return "; ".join(parts)

