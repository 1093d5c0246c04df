"""A real full disk (issue 38): archives on a small tmpfs left with a few KB free, then a retry.

    sudo mount -t tmpfs -o size=4m tmpfs /mnt/sp-full
    python benchmarks/disk_full_soak.py --mount /mnt/sp-full --trials 45 --out benchmarks/results/disk_full_soak.json

Each trial copies a home at version 1 whose open sandbox holds three 1.8 KB turns onto the
mounted file system, fills it until ``free`` bytes are left (drawn from 4 to 64 KB), and archives.
What the call reported (``committed``, ``committed, cleanup pending``, an ``error``) is recorded;
then the filler is deleted (the space is freed) and the same process retries the same archive on
the same handle, on a thread that must finish within ``--timeout`` seconds (before issue 38 a
retry after a failure past the commit point hung forever on the sandbox's lock). Last, a fresh
open says whether the account is whole. A trial is ``truthful`` when the report matches the
truth read off the files right after the call (version 2's journal renamed to COMMITTED, or its log
line), ``ok`` when, in addition, the retry answered without hanging (committed: ``AlreadyArchived``;
not committed: ``Committed``), the handle reads HEAD 2, and the account holds every turn.
Prints ``trials / truthful / hung / lost = N / N / 0 / 0`` and writes JSON.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

import soulpass
from soulpass.errors import SoulpassError

TURN = "x" * 1800  # the campaign's turns: 1.8 KB each


def template(root: Path) -> tuple[Path, str, set[str]]:
    home = root / "template"
    acct = soulpass.open(home, embedder="none").create_account("ann")
    first = acct.create_sandbox("first")
    first.add_turn("user", "an earlier turn")
    first.archive()
    sb = acct.create_sandbox("second")
    texts = [f"turn {n} {TURN}" for n in range(3)]
    for text in texts:
        sb.add_turn("user", text)
    acct.close()
    return home, sb.id, {"an earlier turn", *texts}


def fill(mount: Path, leave: int) -> Path:
    """A filler file that leaves about ``leave`` bytes free on ``mount``."""
    filler = mount / "filler"
    st = os.statvfs(mount)
    size = max(0, st.f_bavail * st.f_frsize - leave)
    with filler.open("wb") as fh:
        chunk = b"\0" * (1 << 20)
        while size > 0:
            n = min(size, len(chunk))
            try:
                fh.write(chunk[:n])
            except OSError:
                break
            size -= n
    return filler


def within(seconds: float, call: Any) -> tuple[str, Any]:
    """("done", result) / ("error", exception) / ("hung", None) of ``call()`` on a thread."""
    box: dict[str, Any] = {}

    def run() -> None:
        try:
            box["done"] = call()
        except (OSError, SoulpassError) as exc:
            box["error"] = exc

    worker = threading.Thread(target=run, daemon=True)
    worker.start()
    worker.join(seconds)
    if worker.is_alive():
        return "hung", None
    return ("done", box["done"]) if "done" in box else ("error", box["error"])


def version_2_committed(account: Path) -> bool:
    """Whether version 2 passed its commit point: its journal renamed to COMMITTED (still to be
    applied), or its line in the log (applied)."""
    if (account / "txn" / f"{2:08d}" / "COMMITTED").exists():
        return True
    log = account / "log/versions.jsonl"
    return any(json.loads(line).get("version") == 2 for line in log.read_bytes().splitlines() if line.strip())


def reported_as(result: object) -> str:
    if isinstance(result, soulpass.Committed):
        return "committed" if result.warning is None else "committed, cleanup pending"
    return type(result).__name__


def one_trial(tpl: Path, sid: str, texts: set[str], mount: Path, leave: int, timeout: float) -> dict[str, Any]:
    home = mount / "home"
    shutil.rmtree(home, ignore_errors=True)
    (mount / "filler").unlink(missing_ok=True)
    shutil.copytree(tpl, home)
    acct = soulpass.open(home, embedder="none").account("ann")
    filler = fill(mount, leave)
    state, value = within(timeout, lambda: acct.archive(sid))
    reported = "hung" if state == "hung" else reported_as(value) if state == "done" else f"error: {value}"
    committed = version_2_committed(home / "accounts/ann")  # the truth, before anything else runs
    filler.unlink()  # the space is freed; the same process retries the same archive
    retry_state, retry = within(timeout, lambda: acct.archive(sid)) if state != "hung" else ("skipped", None)
    retried = reported_as(retry) if retry_state == "done" else f"{retry_state}: {retry}" if retry else retry_state
    handle_head = acct.head() if retry_state == "done" else None
    fresh = soulpass.open(home, embedder="none").account("ann")
    head = fresh.head()
    turns = {t.text_excerpt for t in fresh.records("turn_user")}
    whole = {t[:200] for t in texts} <= {t[:200] for t in turns}  # excerpts may be cut
    truthful = state != "hung" and reported.startswith("committed") == committed
    answer = "AlreadyArchived" if committed else "committed"  # what the retry must say
    ok = truthful and retried == answer and handle_head == head == 2 and whole
    acct.close()
    fresh.close()
    return {"free_bytes": leave, "reported": reported, "committed": committed, "retry": retried,
            "handle_head": handle_head, "head": head, "whole": whole, "truthful": truthful, "ok": ok}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mount", type=Path, required=True, help="a small tmpfs of its own (4 MB): it is filled")
    parser.add_argument("--trials", type=int, default=45)
    parser.add_argument("--timeout", type=float, default=60.0, help="seconds a call may take before it counts as hung")
    parser.add_argument("--seed", type=int, default=38)
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    rng = random.Random(args.seed)
    trials = []
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="soulpass-full-") as tmp:
        tpl, sid, texts = template(Path(tmp))
        for _ in range(args.trials):
            trials.append(one_trial(tpl, sid, texts, args.mount, rng.randrange(4096, 65536, 512), args.timeout))
    (args.mount / "filler").unlink(missing_ok=True)
    shutil.rmtree(args.mount / "home", ignore_errors=True)
    reports = Counter(f"{t['reported'].split(':')[0]} -> {'committed' if t['committed'] else 'not committed'}"
                      for t in trials)
    hung = sum(t["reported"] == "hung" or t["retry"].startswith("hung") for t in trials)
    lost = sum(not t["whole"] for t in trials)
    line = (f"trials / truthful / hung / lost = {len(trials)} / {sum(t['truthful'] for t in trials)} / {hung} / "
            f"{lost}; ok {sum(t['ok'] for t in trials)}")
    print(line)
    print("reports -> true outcomes: " + ", ".join(f"{k}: {v}" for k, v in sorted(reports.items())))
    result = {"benchmark": "disk_full_soak", "trials": trials, "reports": dict(sorted(reports.items())),
              "seed": args.seed, "seconds": round(time.perf_counter() - started, 1), "summary": line}
    if args.out is not None:
        args.out.write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
    return 0 if all(t["ok"] for t in trials) else 1


if __name__ == "__main__":
    sys.exit(main())
