"""An OpenAI-compatible chat endpoint (OpenAI, Ollama, vLLM, llama.cpp server), called with the
official ``openai`` client (extra ``agent``).

:class:`ChatEndpoint` posts to ``<base_url>/chat/completions``; :class:`ChatSummariser` asks it
for an :class:`~soulpass.agent.scribe.EpisodeDraft` as JSON and validates the answer. Anything
short of a valid draft raises :class:`~soulpass.agent.scribe.SummaryFailed`, and the scribe falls
back to the extractive summariser.
"""

from __future__ import annotations

import importlib
import json
import re
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from soulpass.agent.scribe import EpisodeDraft, SummaryFailed, SummaryRequest
from soulpass.errors import BackendUnavailable, InvalidInput

__all__ = ["ChatEndpoint", "ChatSummariser"]

_FENCE = re.compile(r"^```(?:json)?\s*|\s*```$", re.S)
MAX_INPUT_CHARS = 24_000  # what one summarising prompt quotes at most

SYSTEM_PROMPT = """You are a scribe. Summarise the input as ONE JSON object and nothing else, with exactly
these keys:
{"title": str (<= 200 chars),
 "situation_context": {"interaction_mode": str|null, "location_context": str|null,
                       "agent_role": str|null, "mission_goal": str|null},
 "summary": {"action_taken": str, "key_outcome": str, "future_implication": str},
 "narrative": str (a short Markdown narrative of what happened)}
The future_implication must follow from the key_outcome. Do not invent facts."""


@dataclass(frozen=True)
class ChatEndpoint:
    """``base_url`` like ``http://127.0.0.1:11434/v1``; ``api_key`` optional (local servers need none)."""

    base_url: str
    model: str
    api_key: str | None = None
    timeout: float = 60.0

    def __post_init__(self) -> None:
        if not self.base_url.startswith(("http://", "https://")):
            raise InvalidInput(f"chat base URL must start with http:// or https://, not {self.base_url!r}",
                               field="base_url")
        if not self.model:
            raise InvalidInput("chat model name is empty", field="model")

    def complete(self, messages: list[dict[str, str]], *, json_mode: bool = False,
                 temperature: float = 0.0) -> str:
        """The assistant message's content; ``BackendUnavailable`` when the call fails."""
        openai = _openai()
        url = self.base_url.rstrip("/") + "/chat/completions"
        # A local server needs no key; the client wants one all the same (and would read the environment).
        client = openai.OpenAI(base_url=self.base_url, api_key=self.api_key or "no-key", timeout=self.timeout,
                               max_retries=0)
        extra: dict[str, Any] = {"response_format": {"type": "json_object"}} if json_mode else {}
        try:
            reply = client.chat.completions.create(model=self.model, messages=messages, temperature=temperature,
                                                   **extra)
            content = reply.choices[0].message.content
        except openai.APIStatusError as exc:
            raise BackendUnavailable(f"chat endpoint {url} failed: HTTP {exc.status_code}", url=url) from exc
        except openai.APIConnectionError as exc:
            raise BackendUnavailable(f"chat endpoint {url} failed: {exc}", url=url) from exc
        except (openai.OpenAIError, ValueError, AttributeError, IndexError, TypeError) as exc:
            raise BackendUnavailable(f"chat endpoint {url} sent no chat completion: {exc}", url=url) from exc
        finally:
            client.close()
        if not isinstance(content, str):
            raise BackendUnavailable(f"chat endpoint {url} sent a non-text message", url=url)
        return content


def _openai() -> Any:
    try:
        return importlib.import_module("openai")
    except ImportError as exc:
        raise BackendUnavailable("a chat model needs the 'agent' extra (the openai client): "
                                 "pip install -e '.[agent]'") from exc


class ChatSummariser:
    """A summariser backed by a chat model; its JSON is validated against ``EpisodeDraft``."""

    def __init__(self, endpoint: ChatEndpoint) -> None:
        self.endpoint = endpoint
        self.name = f"chat:{endpoint.model}"

    def summarise(self, request: SummaryRequest) -> EpisodeDraft:
        try:
            content = self.endpoint.complete(
                [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": _prompt(request)}],
                json_mode=True)
        except BackendUnavailable as exc:
            raise SummaryFailed(f"the model call failed: {exc}") from exc
        try:
            data = json.loads(_FENCE.sub("", content.strip()))
        except ValueError as exc:
            raise SummaryFailed(f"the model's answer is not JSON: {content[:80]!r}") from exc
        try:
            return EpisodeDraft.model_validate(data)
        except ValidationError as exc:
            first = exc.errors()[0]
            loc = ".".join(str(p) for p in first["loc"]) or "(root)"
            raise SummaryFailed(f"the model's JSON does not match the episode schema: {loc}: {first['msg']}") from exc


def _prompt(request: SummaryRequest) -> str:
    if request.document is not None:
        return (f"Document from {request.source or 'text'}:\n\n"
                f"{request.document[:MAX_INPUT_CHARS]}")
    lines = [f"{e.at:%Y-%m-%d %H:%M} {e.agent} [{e.kind}, {e.speaker}]: {e.text}" for e in request.entries]
    text = "\n".join(lines)
    return f"Working log ({request.reason}), {len(lines)} entries:\n\n{text[-MAX_INPUT_CHARS:]}"
