"""``soulpass demo``: the seed's example flow (100 -> 103 -> 105 episodes, a discard), end to end."""

from __future__ import annotations

import os
import shutil
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import click
from rich.progress import track

from soulpass.cli.output import console, table
from soulpass.cli.state import State
from soulpass.engine import Account, Committed, Sandbox
from soulpass.errors import Corrupted

__all__ = ["COMMANDS"]

TOPICS = ["resume", "sushi", "Python", "font choice", "job search", "SSH on mobile", "CSS", "portfolio"]


def _episode(n: int, when: datetime) -> dict[str, Any]:
    topic = TOPICS[n % len(TOPICS)]
    return {
        "episode_id": f"ep_{n:03d}",
        "timestamp": when.isoformat(),
        "turn_1": {"speaker": "user", "text": f"Can we talk about {topic}? (message {n})"},
        "turn_2": {"speaker": "eva", "text": f"Sure — here is what I remember about {topic}."},
        "RI_global": round(0.5 + (n % 5) / 10, 2),
        "encoding_level": "L2_standard",
        "rms_annotation": {"topic": topic},
        "situation_context": {"interaction_mode": "casual", "location_context": "local_dev"},
    }


def _session(acct: Account, name: str, first: int, count: int, when: datetime, progress: bool = False) -> Sandbox:
    sb = acct.create_sandbox(name)
    numbers = range(first, first + count)
    for n in track(numbers, description=f"{name}: writing {count} episodes") if progress else numbers:
        sb.write_episode(_episode(n, when + timedelta(seconds=n)))
    return sb


def _episodes(acct: Account) -> int:
    return sum(1 for _ in acct.records("episode"))


def _archive(sb: Sandbox) -> int:
    result = sb.archive()
    if not isinstance(result, Committed):
        raise Corrupted(f"demo expected a commit, got {result}")
    return result.version


@click.command("demo")
@click.option("--account", "-a", "account", default="User01", show_default=True)
@click.pass_obj
def demo(state: State, account: str) -> None:
    """Run the seed's example flow on a fresh account and print a timeline and a diff."""
    acct = state.engine().account(account, create=True)
    if acct.head() != 0:
        raise click.UsageError(f"account {account!r} already has versions; use a fresh --home or --account")
    day = datetime.now(UTC).replace(hour=9, minute=0, second=0, microsecond=0)
    timeline: list[tuple[str, str, str, int | str]] = []

    sb0 = _session(acct, "Sandbox 09:00 (history)", 1, 100, day, progress=True)
    timeline.append(("09:00", f"master v{_archive(sb0)} built", "100 episodes", _episodes(acct)))

    sb_a = _session(acct, "Sandbox A 09:30", 101, 3, day + timedelta(minutes=30))
    timeline.append(("09:35", "chat in Sandbox A", f"buffer: {len(sb_a.buffer().new_episodes)} episodes, "
                     f"master v{acct.head()} unchanged", _episodes(acct)))
    sb_a.add_fact(content="User likes sushi", confidence=0.9)
    sb_a.update_state("ire", {"reflex_vector": {"curiosity": 0.7}})
    timeline.append(("10:00", f"archive A -> v{_archive(sb_a)}", "+3 episodes, 1 fact, ire state",
                     _episodes(acct)))

    sb_b = _session(acct, "Sandbox B 10:30", 104, 2, day + timedelta(minutes=90))
    sb_b.add_fact("User", "lives in", "Bangkok", confidence=0.95)
    sb_b.update_state("ire", {"reflex_vector": {"curiosity": 0.9}})
    timeline.append(("11:00", f"archive B -> v{_archive(sb_b)}", "+2 episodes, 1 fact, ire updated",
                     _episodes(acct)))

    sb_x = _session(acct, "Sandbox X (discarded)", 900, 4, day + timedelta(minutes=120))
    sb_x.discard()
    traces = acct.sandboxes()
    timeline.append(("11:15", "Sandbox X wrote 4, discarded", f"HEAD still v{acct.head()}, "
                     f"{len(traces)} sandboxes left", _episodes(acct)))

    table(f"Timeline of {account} (home {state.location})", ["time", "event", "detail", "episodes"], timeline)
    d = acct.diff(1, acct.head())
    table(f"Diff v1 → v{acct.head()}", ["change", "what"],
          [(f"+ {len(ids)} {kind}", ", ".join(ids[:5]) + (" …" if len(ids) > 5 else ""))
           for kind, ids in d.added.items()]
          + [("~ replaced", p) for p in d.replaced])
    expected = [100, 100, 103, 105, 105]
    if [row[3] for row in timeline] != expected or traces or acct.head() != 3:
        raise Corrupted(f"demo check failed: episodes {[r[3] for r in timeline]} != {expected}")
    console.print("[green]demo ok:[/] v1=100, v2=103, v3=105 episodes; the discarded sandbox left no trace. "
                  f"Try: {_soulpass_command()} --home {state.location} log --account {account}")


def _soulpass_command() -> str:
    """How to call ``soulpass`` from this shell: the bare name when it is on the PATH, else the
    path of the script running now (e.g. ``.venv/bin/soulpass`` after ``make demo``)."""
    if shutil.which("soulpass"):
        return "soulpass"
    script = Path(sys.argv[0])
    return os.path.relpath(script) if script.name == "soulpass" and script.exists() else "soulpass"


COMMANDS = [demo]
