"""Fault soak (issue 18): thousands of injected disk faults, power losses and kills, and what they did.

    python benchmarks/fault_soak.py --faults 3000 --kills 200 --out benchmarks/results/fault_soak.json

Each round copies a home at version 1 whose open sandbox holds three turns and a fact, then archives
it (or appends to it) while one of these happens:
- a fault: the k-th write, fsync or rename of Soulpass's own code fails (ENOSPC, EIO, or a short
  write after which the disk is full), k drawn over every call site of the operation;
- a power loss: only what was fsynced before the k-th call survives (``durable_copy``);
- a kill: SIGKILL of a forked child at a random instant of the archive.
Then a fresh process opens the account and checks it (``tests/test_fault_injection.py`` does the
same for every k): ``lost`` when something acknowledged is missing, ``torn`` when the audit finds
damage, ``stuck`` when the account cannot be opened or the next archive fails. Prints
``faults / lost / torn / stuck = N / 0 / 0 / 0`` and writes JSON.

Each archive under a fault also has its true outcome (issue 38): what the call reported
(``committed``, ``committed, cleanup pending``, or an ``error``) against what the fresh open finds
(version 2 committed, or still 1). ``untruthful`` counts the trials where the two disagree (an
error for a version that is committed, or ``Committed`` for one that is not); the JSON lists every
trial. A power loss or a kill reaches no caller, so those trials have no report to check.
``--corruptions N`` (issue 38) damages files at rest instead: a flipped byte, a truncated last line,
garbage, a deleted, duplicated or swapped line, a line with its checksum stripped, in a session
buffer, the version log, ``log.sums`` or a ``history/`` copy, at a random line. Each is ``healed``
(everything acknowledged still there) or ``refused`` (``Corrupted``, or an audit finding, naming the
damaged file); ``silent`` (accepted with something lost or changed) must stay 0. Prints
``corruptions / healed / refused / silent = N / … / … / 0``.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import signal
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

import soulpass
from fault_helpers import AFTER, BEFORE, MODES, TURNS, Faults, content, durable_copy, snapshot_files, template
from soulpass.errors import SoulpassError

UNREPORTED = "none (no caller is left)"  # a power loss, a kill


def open_home(home: Path) -> soulpass.Soulpass:
    return soulpass.open(home, embedder="none")


def verdict(home: Path, sid: str, extra: list[str], maybe: tuple[str, ...] = ()) -> tuple[str, int | None]:
    """ok, lost, torn or stuck: the account after a fault, opened afresh; and its HEAD then
    (None when it could not be read). ``maybe``: turns of an append the machine died in after its
    lines were durable (never acknowledged: either is right)."""
    head = None
    try:
        acct = open_home(home).account("ann")
        head = acct.head()
        if [f for f in acct.store.audit() if f.check != "leftover_txn"] or head not in (1, 2):
            return "torn", head
        if head == 1:
            buffered = [str(t.get("text_excerpt")) for t in acct.sandbox(sid).buffer().new_turns]
            if buffered[:3] != TURNS or content(acct) != BEFORE:
                return "lost", head
            acct.archive(sid)
        if content(acct) - {("turn", t) for t in maybe} != AFTER | {("turn", t) for t in extra}:
            return "lost", head
        sb = acct.create_sandbox("after")
        sb.add_turn("user", "life goes on")
        acct.archive(sb.id)
        acct.close()
    except (OSError, SoulpassError) as exc:
        print(f"stuck: {exc}", file=sys.stderr)
        return "stuck", head
    return "ok", head


def archive(home: Path, sid: str) -> str:
    """What the archive reported to its caller."""
    result = open_home(home).account("ann").archive(sid)
    if isinstance(result, soulpass.Committed):
        return "committed" if result.warning is None else "committed, cleanup pending"
    return type(result).__name__


def append(home: Path, sid: str) -> str:
    open_home(home).account("ann").sandbox(sid).add_turn("user", "appended during a fault")
    return "appended"


def trial(kind: str, k: int | None, reported: str, verdict_: str, head: int | None) -> dict[str, Any]:
    """One archive's report against its true outcome (HEAD 2 at the fresh open: committed)."""
    actual = {2: "committed", 1: "not committed"}.get(head or 0, "unknown")
    truthful = None if reported == UNREPORTED else reported.startswith("committed") == (actual == "committed")
    return {"kind": kind, "k": k, "reported": reported, "actual": actual, "truthful": truthful, "verdict": verdict_}


def calls_of(tpl: Path, root: Path, op: Any, sid: str) -> int:
    home = root / "count"
    shutil.rmtree(home, ignore_errors=True)
    shutil.copytree(tpl, home)
    with Faults().installed() as faults:
        op(home, sid)
    shutil.rmtree(home)
    return faults.calls


def fault_round(tpl: Path, root: Path, sid: str, rng: random.Random, calls: dict[str, int],
                power: bool) -> dict[str, Any]:
    name = rng.choice(sorted(calls))
    op = archive if name == "archive" else append
    k = rng.randint(1, calls[name] + (1 if power else 0))
    home = root / "run"
    shutil.rmtree(home, ignore_errors=True)
    shutil.copytree(tpl, home)
    before = snapshot_files(tpl) if power else {}
    mode = "eio" if power else rng.choice(MODES)
    with Faults(fail_at=k, mode=mode).installed() as faults:
        try:
            reported = op(home, sid)
            acked = True
        except (OSError, SoulpassError) as exc:
            reported = f"error: {type(exc).__name__}"
            acked = False
    if power:
        lost_home = root / "lost"
        durable_copy(home, lost_home, faults.synced, before)
        home = lost_home
        acked = acked and faults.failed is None  # the call that never ran: nothing after it was promised
        reported = UNREPORTED
    extra = ["appended during a fault"] if name == "append" and acked else []
    maybe = ("appended during a fault",) if name == "append" and power and not acked else ()
    return trial(f"{'power' if power else mode}:{name}", k, reported, *verdict(home, sid, extra, maybe))


def kill_round(tpl: Path, root: Path, sid: str, rng: random.Random) -> dict[str, Any]:
    home = root / "run"
    shutil.rmtree(home, ignore_errors=True)
    shutil.copytree(tpl, home)
    pid = os.fork()
    if pid == 0:  # the child archives until it is killed
        try:
            archive(home, sid)
        finally:
            os._exit(0)
    time.sleep(rng.uniform(0.0, 0.06))
    os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)
    return trial("kill:archive", None, UNREPORTED, *verdict(home, sid, []))


def run_model(examples: int, steps: int = 100) -> dict[str, Any]:
    """The engine's state machine, ``examples`` runs of up to ``steps`` steps; raises on a mismatch."""
    from hypothesis import HealthCheck, settings
    from hypothesis.stateful import run_state_machine_as_test

    from test_engine_model import EngineModel

    began = time.perf_counter()
    run_state_machine_as_test(EngineModel, settings=settings(
        max_examples=examples, stateful_step_count=steps, deadline=None, database=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much]))
    print(f"engine model: {examples} runs of up to {steps} steps, every read as the model says", flush=True)
    return {"examples": examples, "max_steps": steps, "seconds": round(time.perf_counter() - began, 1)}


DAMAGES = ("flip", "truncate", "garbage", "delete", "duplicate", "swap", "strip")
TARGETS = ("buffer", "log", "log.sums", "history")


def corruption_template(root: Path) -> tuple[Path, str]:
    """A home whose account has four versions (each with a fact: the knowledge graph gets history
    copies) and an open sandbox of five turns."""
    home = root / "corrupt-template"
    acct = open_home(home).create_account("ann")
    for i in range(4):
        sb = acct.create_sandbox(f"v{i}")
        sb.add_turn("user", f"turn {i}")
        sb.add_fact("ann", "likes", f"tea number {i}", confidence=0.9)
        sb.archive()
    sb = acct.create_sandbox("open")
    for i in range(5):
        sb.add_turn("user", f"buffered turn {i}")
    acct.close()
    return home, sb.id


def damaged_lines(lines: list[bytes], damage: str, at: int, rng: random.Random) -> list[bytes]:
    """``lines`` with line ``at`` damaged as ``damage`` says (the last line, for ``truncate``)."""
    from soulpass.store.sealed_lines import unsealed

    out = list(lines)
    nxt = min(at + 1, len(out) - 1) if at + 1 < len(out) else max(at - 1, 0)
    if damage == "flip":  # a digit or letter for another: what still parses, that only a checksum can tell
        line = out[at]
        spots = [i for i, c in enumerate(line) if chr(c).isalnum()] or list(range(len(line)))
        i = rng.choice(spots) if spots else 0
        new = (b"7" if line[i:i + 1] != b"7" else b"3") if chr(line[i]).isdigit() else \
            (b"q" if line[i:i + 1] != b"q" else b"z") if spots and chr(line[i]).isalpha() else b"\x01"
        out[at] = line[:i] + new + line[i + 1:]
    elif damage == "truncate":
        out[-1] = out[-1][:rng.randrange(len(out[-1]))] if out[-1] else out[-1]
    elif damage == "garbage":
        out[at] = bytes(rng.randrange(256) for _ in range(rng.randint(1, 40))).replace(b"\n", b"?")
    elif damage == "delete":
        del out[at]
    elif damage == "duplicate":
        out.insert(at, out[at])
    elif damage == "swap":
        out[at], out[nxt] = out[nxt], out[at]
    else:
        out[at] = unsealed(out[at])
    return out


def corruption_round(tpl: Path, sid: str, root: Path, rng: random.Random) -> tuple[str, str]:
    from soulpass.errors import Corrupted
    from soulpass.integrity import audit

    target, damage = rng.choice(TARGETS), rng.choice(DAMAGES)
    home = root / "corrupt"
    shutil.rmtree(home, ignore_errors=True)
    shutil.copytree(tpl, home)
    account = home / "accounts/ann"
    path = {"buffer": account / f"sandboxes/{sid}/session_buffer.jsonl", "log": account / "log/versions.jsonl",
            "log.sums": account / "log.sums",
            "history": rng.choice(sorted((account / "history").rglob("*.json")))}[target]
    kind = f"{damage}:{target}"
    if target == "history":
        data = path.read_bytes()
        if damage == "delete":
            path.unlink()
        else:
            lines = data.splitlines()
            path.write_bytes(b"\n".join(damaged_lines(lines, damage, rng.randrange(len(lines)), rng)))
        if path.exists() and path.read_bytes() == data:
            return kind, "healed"  # the damage changed nothing (a strip of an unsealed line)
        named = [f for f in audit(open_home(home), "ann").findings if f.check.startswith("history")
                 and f.subject == str(path.relative_to(account))]
        return kind, "refused" if named else "silent"
    lines = path.read_bytes().splitlines()
    changed = damaged_lines(lines, damage, rng.randrange(len(lines)), rng)
    path.write_bytes(b"".join(line + b"\n" for line in changed[:-1]) + changed[-1]
                     + (b"" if damage == "truncate" else b"\n"))
    try:
        acct = open_home(home).account("ann")
        if target == "buffer":
            acct.archive(sid)
            kept = {str(r.text_excerpt) for r in acct.records("turn_user")}  # type: ignore[attr-defined]
            whole = {f"buffered turn {i}" for i in range(4 if damage == "truncate" else 5)}
            return kind, "healed" if whole <= kept else "silent"
        versions = [e.version for e in acct.log()]
        return kind, "healed" if versions == [1, 2, 3, 4] and acct.head() == 4 else "silent"
    except Corrupted as exc:
        return kind, "refused" if str(path.name) in str(exc) else "silent"


def corruption_soak(rounds: int, rng: random.Random) -> tuple[Counter[str], dict[str, Counter[str]]]:
    outcomes: Counter[str] = Counter()
    by_kind: dict[str, Counter[str]] = {}
    with tempfile.TemporaryDirectory(prefix="soulpass-corrupt-") as tmp:
        tpl, sid = corruption_template(Path(tmp))
        for _ in range(rounds):
            kind, outcome = corruption_round(tpl, sid, Path(tmp), rng)
            outcomes[outcome] += 1
            by_kind.setdefault(kind, Counter())[outcome] += 1
    return outcomes, by_kind


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--faults", type=int, default=2000, help="injected faults (a fifth of them power losses)")
    parser.add_argument("--kills", type=int, default=100, help="SIGKILLs at random instants of an archive")
    parser.add_argument("--model-examples", type=int, default=0,
                        help="also run the engine's state machine (tests/test_engine_model.py) this many times")
    parser.add_argument("--corruptions", type=int, default=0,
                        help="also damage files at rest this many times (buffer, log, log.sums, history copies)")
    parser.add_argument("--seed", type=int, default=18)
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    rng = random.Random(args.seed)
    outcomes: Counter[str] = Counter()
    by_kind: dict[str, Counter[str]] = {}
    trials: list[dict[str, Any]] = []
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="soulpass-soak-") as tmp:
        root = Path(tmp)
        tpl, sid = template(root)
        calls = {"archive": calls_of(tpl, root, archive, sid), "append": calls_of(tpl, root, append, sid)}
        for n in range(args.faults + args.kills):
            one = (kill_round(tpl, root, sid, rng) if n >= args.faults
                   else fault_round(tpl, root, sid, rng, calls, power=n % 5 == 4))
            outcomes[one["verdict"]] += 1
            by_kind.setdefault(one["kind"], Counter())[one["verdict"]] += 1
            if one["kind"].endswith(":archive"):
                trials.append(one)
            if (n + 1) % 250 == 0:
                print(f"{n + 1} rounds: {dict(outcomes)}", file=sys.stderr, flush=True)
    model = run_model(args.model_examples) if args.model_examples else None
    total = args.faults + args.kills
    checked = [t for t in trials if t["truthful"] is not None]
    untruthful = [t for t in checked if not t["truthful"]]
    reports: Counter[str] = Counter(f"{t['reported'].split(':')[0]} -> {t['actual']}" for t in checked)
    line = (f"faults / lost / torn / stuck = {total} / {outcomes['lost']} / {outcomes['torn']} / "
            f"{outcomes['stuck']}; archives whose report was their true outcome: "
            f"{len(checked) - len(untruthful)} / {len(checked)}")
    print(line)
    print("archive reports -> true outcomes: " + ", ".join(f"{k}: {v}" for k, v in sorted(reports.items())))
    damaged, damage_kinds = corruption_soak(args.corruptions, rng) if args.corruptions else (Counter(), {})
    if args.corruptions:
        print(f"corruptions / healed / refused / silent = {args.corruptions} / {damaged['healed']} / "
              f"{damaged['refused']} / {damaged['silent']}")
    result = {"benchmark": "fault_soak", "rounds": total, "faults": args.faults, "kills": args.kills,
              "seed": args.seed, "call_sites": calls, "outcomes": dict(outcomes),
              "by_kind": {k: dict(v) for k, v in sorted(by_kind.items())},
              "archive_reports": dict(sorted(reports.items())), "untruthful": len(untruthful),
              "archive_trials": trials,
              "corruptions": {"rounds": args.corruptions, "outcomes": dict(damaged),
                              "by_kind": {k: dict(v) for k, v in sorted(damage_kinds.items())}},
              "model": model, "seconds": round(time.perf_counter() - started, 1), "summary": line}
    if args.out is not None:
        args.out.write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
    return 0 if outcomes["ok"] == total and not untruthful and not damaged["silent"] else 1


if __name__ == "__main__":
    sys.exit(main())
