"""Hostile values through the library API (issue 38 item 8): one call per example, drawn from the
public methods of an engine, an account and a sandbox, every argument a hostile value (huge and
negative numbers, NaN, bytes, lone surrogates, deep nesting, wrong types, path tricks). A call may
succeed or raise a ``SoulpassError``; anything else escaping is a failure.

Shared by ``tests/test_hostile_api.py`` (a few hundred examples) and
``benchmarks/hostile_inputs.py`` (≥ 10,000).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from hypothesis import strategies as st

import soulpass
from soulpass.errors import SoulpassError

__all__ = ["CALLS", "World", "call_once", "deep", "hostile"]


def deep(depth: int) -> Any:
    """A value ``depth`` levels deep (objects and lists in turn)."""
    value: Any = "x"
    for n in range(depth):
        value = [value] if n % 2 else {"k": value}
    return value


PLAUSIBLE = st.sampled_from(["fact", "turn_user", "episode", "journal", "user", "llm", "core", "profile", "gks",
                             "state:mood", "mood", "Lyon", "Ann", "lives in", "seed", "open", "@fact", "@turn",
                             0, 1, 2, 0.5, 0.95, {"mood": "calm"}, ["x"], [], {}])
SCALARS = st.one_of(
    PLAUSIBLE, PLAUSIBLE,  # values that pass, so the calls get past their first check too
    st.none(), st.booleans(),
    st.integers(min_value=-(10**30), max_value=10**30), st.sampled_from([0, -1, 2**63, 10**20, 2**31]),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=40), st.sampled_from(["", "..", "../x", "/etc/passwd", "a\x00b", "\ud800", "x" * 5000,
                                           "TU_20260101_001", "SF_99999999_999", "ep_temp_zz", "core", "HEAD"]),
    st.binary(max_size=20),
)
hostile = st.one_of(
    SCALARS,
    st.recursive(SCALARS, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner,
                                                                                         max_size=3), max_leaves=8),
    st.sampled_from([deep(70), deep(3000), object(), ...]),
    st.sets(st.integers(max_value=5), max_size=2),
)


class World:
    """An engine with one account holding one committed version and one open sandbox."""

    def __init__(self, home: Path) -> None:
        self.sp = soulpass.open(home, embedder="none")
        self.acct = self.sp.create_account("ann")
        sb = self.acct.create_sandbox("seed")
        sb.add_turn("user", "I live in Lyon")
        sb.add_fact("Ann", "lives in", "Lyon", confidence=0.9)
        sb.archive()
        self.sb = self.acct.create_sandbox("open")
        # "@fact" and "@turn" among the drawn values stand for these real ids
        self.ids = {"@fact": next(iter(self.acct.records("fact"))).id,
                    "@turn": next(iter(self.acct.records("turn_user"))).id}


Call = Callable[[World, list[Any]], object]

# (name, how many hostile arguments, the call)
CALLS: list[tuple[str, int, Call]] = [
    ("open", 1, lambda w, a: soulpass.open(a[0], embedder="none")),
    ("account", 1, lambda w, a: w.sp.account(a[0])),
    ("create_account", 1, lambda w, a: w.sp.create_account(a[0])),
    ("create_sandbox", 1, lambda w, a: w.acct.create_sandbox(a[0])),
    ("sandbox", 1, lambda w, a: w.acct.sandbox(a[0])),
    ("check_version", 1, lambda w, a: w.acct.check_version(a[0])),
    ("diff", 2, lambda w, a: w.acct.diff(a[0], a[1])),
    ("record", 2, lambda w, a: w.acct.record(a[0], a[1])),
    ("history", 1, lambda w, a: w.acct.history(a[0])),
    ("records", 2, lambda w, a: list(w.acct.records(a[0], a[1]))),
    ("show", 2, lambda w, a: w.acct.show(a[0], a[1])),
    ("state", 2, lambda w, a: w.acct.state(a[0], a[1])),
    ("search", 2, lambda w, a: w.acct.search(a[0], a[1])),
    ("search_filters", 3, lambda w, a: w.acct.search("Lyon", kinds=a[0], agent=a[1], at=a[2])),
    ("forget_dry", 1, lambda w, a: w.acct.forget(a[0], dry_run=True)),
    ("edit", 2, lambda w, a: w.acct.edit(a[0], reason="x", object=a[1])),
    ("rollback", 1, lambda w, a: w.acct.rollback(a[0])),
    ("add_turn", 2, lambda w, a: w.sb.add_turn(a[0], a[1])),
    ("add_fact", 4, lambda w, a: w.sb.add_fact(a[0], a[1], a[2], confidence=a[3])),
    ("update_state", 2, lambda w, a: w.sb.update_state(a[0], a[1])),
    ("update_profile", 1, lambda w, a: w.sb.update_profile(a[0])),
    ("propose_core", 4, lambda w, a: w.sb.propose_core(a[0], a[1], key=a[2], confidence=a[3], reason="x")),
    ("add_sensory", 2, lambda w, a: w.sb.add_sensory(a[0], source=a[1])),
    ("add_journal", 2, lambda w, a: w.sb.add_journal(a[0], tags=a[1])),
    ("write_episode", 1, lambda w, a: w.sb.write_episode(a[0])),
    ("write_turn", 1, lambda w, a: w.sb.write_turn(a[0])),
    ("sandbox_search", 2, lambda w, a: w.sb.search(a[0], a[1])),
    ("archive_dry", 0, lambda w, a: w.sb.archive(dry_run=True)),
]


def call_once(world: World, index: int, args: list[Any]) -> str:
    """Make call ``index`` with ``args``; ``"ok"`` or the ``SoulpassError`` class's name. Anything
    else propagates."""
    _name, _n, call = CALLS[index]
    args = [world.ids.get(a, a) if isinstance(a, str) else a for a in args]
    try:
        call(world, args)
    except SoulpassError as exc:
        return type(exc).__name__
    return "ok"
