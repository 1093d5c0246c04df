"""Context assembly: the block an agent gets each turn, cut to a token budget.

Order: orientation (if due), clipboard, situation guidance, hot log, retrieved memories.
Truncation order when over budget: memories (lowest ranked first), hot-log entries (oldest first,
the newest kept), orientation digest lines (last first), situation guidance (whole). Never cut:
the orientation's temporal grounding and the clipboard.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

from soulpass.agent.types import ClipboardView, ContextBlock, ContextSection, LogEntry, Orientation
from soulpass.records import SituationContext

__all__ = ["Memory", "assemble", "count_tokens", "estimate_tokens", "render_memories", "situation_guidance",
           "token_counter"]

TokenCounter = Callable[[str], int]
# The tokenizer Soulpass ships beside its embedder (all-MiniLM-L6-v2's WordPiece, a file in the package).
TOKENIZER_FILE = Path(__file__).resolve().parents[1] / "embed" / "minilm_tokenizer.json"


def estimate_tokens(text: str) -> int:
    """⌈characters / 4⌉: about one token per four characters of English (no tokenizer installed)."""
    return math.ceil(len(text) / 4)


@functools.cache
def token_counter() -> tuple[str, TokenCounter]:
    """The name of the counter and the counter: MiniLM's WordPiece tokens when ``tokenizers`` is
    installed (extra ``embed``; no special tokens, no truncation), else :func:`estimate_tokens`."""
    try:
        from tokenizers import Tokenizer  # type: ignore[import-not-found,unused-ignore]
    except ImportError:
        return "chars/4", estimate_tokens
    tokenizer = Tokenizer.from_file(str(TOKENIZER_FILE))
    tokenizer.no_truncation()
    tokenizer.no_padding()

    def count(text: str) -> int:
        return len(tokenizer.encode(text, add_special_tokens=False).ids)

    return "all-MiniLM-L6-v2 WordPiece", count


def count_tokens(text: str) -> int:
    """The budget's unit: tokens as :func:`token_counter` counts them."""
    return token_counter()[1](text)


def situation_guidance(situation: SituationContext | None) -> list[str]:
    """Seed 001 §5 ("Prevention of Hallucination") as explicit instructions for this situation."""
    lines = ["Never assume intent: infer what the user wants from their words only when confident; "
             "otherwise ask."]
    if situation is None:
        return lines
    loc = situation.location_context
    if loc == "mobile_ssh":
        lines.append("Location mobile_ssh: NEVER output more than 2-3 lines of code unless the user explicitly "
                     "asks for more; keep answers short.")
    elif loc == "local_dev":
        lines.append("Location local_dev: detailed code and full examples are welcome.")
    elif loc:
        lines.append(f"Location: {loc}; fit the length and format of answers to it.")
    role = situation.agent_role
    if role and role.strip().lower() == "senior dev":
        lines.append("Role lock: you are the Senior Dev; keep that personality and lean towards the epistemic "
                     "modes assert or caution, not hypothesize.")
    elif role:
        lines.append(f"Role lock: stay consistently in the role of {role}.")
    mode = situation.interaction_mode
    if mode == "casual":
        lines.append("Interaction mode casual: keep the tone light and answers brief.")
    elif mode == "deep_discussion":
        lines.append("Interaction mode deep_discussion: go into depth, give reasons and trade-offs.")
    elif mode:
        lines.append(f"Interaction mode: {mode}.")
    if situation.mission_goal:
        lines.append(f"Mission goal: {situation.mission_goal}. Keep every answer on target for it.")
    return lines


@dataclass(frozen=True)
class Memory:
    """A retrieved memory: a record id, its date and the text shown (already ranked best first)."""

    id: str
    kind: str
    when: datetime | None
    text: str
    standing: bool = False  # a standing instruction or preference that governs the message


def _clip(text: str, limit: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _hot_line(e: LogEntry) -> str:
    who = f"user→{e.agent}" if e.speaker == "user" else e.agent
    return f"- {e.at:%Y-%m-%d %H:%M} {who} [{e.kind}]: {_clip(e.text, 600)}"


def _memory_line(m: Memory) -> str:
    when = f"{m.when:%Y-%m-%d}" if m.when else "undated"
    standing = "standing instruction, " if m.standing else ""
    return f"- [{when}] ({standing}{m.kind} {m.id}) {_clip(m.text, 700)}"


def render_memories(memories: list[Memory]) -> str:
    """The retrieved-memories section of the context block: one line a memory (its text cut to
    700 characters), best first; a standing instruction or preference that governs the message
    says so."""
    lines = "\n".join(_memory_line(m) for m in memories)
    return f"[MEMORIES]\n{lines}\n[/MEMORIES]"


@dataclass
class _Parts:
    orientation: Orientation | None
    digest: list[str]
    clipboard: str
    guidance: list[str]
    hot: list[LogEntry]
    memories: list[Memory]
    dropped: dict[str, int] = field(default_factory=dict)

    def sections(self, count: TokenCounter) -> list[ContextSection]:
        out = []

        def add(name: str, text: str) -> None:
            out.append(ContextSection(name=name, text=text, tokens=count(text) if text else 0,
                                      truncated=self.dropped.get(name, 0) > 0, dropped=self.dropped.get(name, 0)))

        if self.orientation is not None:
            add("orientation", self.orientation.text(self.digest))
        add("clipboard", self.clipboard)
        if self.guidance or self.dropped.get("guidance"):  # a section cut whole stays listed, empty
            add("guidance", "[SITUATION]\n" + "\n".join(f"- {g}" for g in self.guidance) + "\n[/SITUATION]"
                if self.guidance else "")
        hot = "\n".join(_hot_line(e) for e in self.hot) or "(empty)"
        add("hot_log", f"[HOT_LOG]\n{hot}\n[/HOT_LOG]")
        if self.memories or self.dropped.get("memories"):
            add("memories", render_memories(self.memories) if self.memories else "")
        return out

    def drop_one(self) -> bool:
        """Cut the next thing in the truncation order; False when nothing cuttable is left."""
        if self.memories:
            self.memories.pop()
            name = "memories"
        elif len(self.hot) > 1:
            self.hot.pop(0)
            name = "hot_log"
        elif self.digest:
            self.digest.pop()
            name = "orientation"
        elif self.guidance:
            name = "guidance"
            self.dropped[name] = self.dropped.get(name, 0) + len(self.guidance)
            self.guidance = []
            return True
        else:
            return False
        self.dropped[name] = self.dropped.get(name, 0) + 1
        return True


def assemble(agent: str, sandbox_id: str, budget_tokens: int, *, orientation: Orientation | None,
             clipboard: ClipboardView, situation: SituationContext | None, hot: list[LogEntry],
             memories: list[Memory], count: TokenCounter = count_tokens) -> ContextBlock:
    """Build the block and cut it to ``budget_tokens`` in the stated truncation order."""
    parts = _Parts(orientation=orientation, digest=list(orientation.digest) if orientation else [],
                   clipboard=clipboard.markdown(), guidance=situation_guidance(situation), hot=list(hot),
                   memories=list(memories))
    while True:
        sections = parts.sections(count)
        tokens = count("\n\n".join(s.text for s in sections if s.text))
        if tokens <= budget_tokens or not parts.drop_one():
            break
    return ContextBlock(agent=agent, sandbox_id=sandbox_id, budget_tokens=budget_tokens, sections=tuple(sections),
                        orientation=orientation, tokens=tokens, over_budget=tokens > budget_tokens,
                        memory_ids=tuple(m.id for m in parts.memories))
