"""What reaches the model: the tokens of the context block that would carry a question's top-k hits.

The block is the project's own: the retrieved-memories section an agent gets
(:func:`soulpass.agent.context.render_memories`: ``- [date] (kind id) text`` a hit, each text cut to
700 characters). Tokens are counted with the all-MiniLM-L6-v2 WordPiece tokenizer shipped beside
the embedder when ``tokenizers`` is installed (no special tokens, no truncation), else estimated as
⌈characters / 4⌉ (the budget unit of the agent's context).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from soulpass.agent.context import Memory, TokenCounter, render_memories, token_counter

if TYPE_CHECKING:
    from soulpass.engine import Account

__all__ = ["ContextMeter", "token_counter"]

class ContextMeter:
    """Tokens of the memories block carrying the first ``k`` hits of a ranking."""

    def __init__(self, k: int = 10, counter: tuple[str, TokenCounter] | None = None) -> None:
        self.k = k
        self.tokenizer, self._count = counter or token_counter()

    def tokens(self, account: Account, ids: Sequence[str]) -> int:
        memories = []
        for rid in ids[:self.k]:
            rec = account.record(rid)
            memories.append(Memory(id=rec.id, kind=rec.kind, when=rec.created_at, text=rec.text))
        return self._count(render_memories(memories)) if memories else 0
