#!/usr/bin/env python3
"""Journal at scale: import a generated Mira folder, look entries up, audit, back up, restore.

For ``--entries`` entries (default 10,000) in a generated Mira folder (four types, 50 tags,
one entry a day-slot, every fifth insight recurring), the benchmark times

1. ``import mira`` of the whole folder (one version) and the catalog catch-up after it;
2. lookups through the index: ``find(semantic_hash=…)``, ``find(tags=[…])`` and a one-week
   ``find(since, until)`` (p50/p95 over ``--lookups`` random keys each);
3. ``patterns(similar=False)`` (identical hashes over every entry; reads every file);
4. ``audit`` (hashes every file against the catalog), ``backup`` into a fresh git repository,
   a second ``backup`` with one new entry, and ``restore`` into an empty home.

No embedder is loaded (``embedder="none"``): the figures are the journal's own costs.

    .venv/bin/python benchmarks/journal_scale.py
    .venv/bin/python benchmarks/journal_scale.py --entries 2000 --lookups 200
"""

from __future__ import annotations

import argparse
import json
import platform
import random
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import soulpass
from soulpass.backup import backup, restore
from soulpass.importers.mira import import_mira
from soulpass.integrity import audit

FOLDERS = ("journal", "experiments", "reflections", "conversations")


def make_folder(root: Path, n: int, seed: int = 1) -> None:
    rng = random.Random(seed)
    start = datetime(2020, 1, 1, tzinfo=UTC)
    for i in range(n):
        when = start + timedelta(hours=6 * i)
        insight = f"Insight {i // 5 if i % 5 == 0 else i} about {rng.choice(['light', 'sound', 'time', 'names'])}."
        tags = [f"tag-{rng.randrange(50)}", f"tag-{rng.randrange(50)}"]
        body = (f"# Entry {i}\n\n{insight} " + " ".join(f"word{rng.randrange(5000)}" for _ in range(60)) + "\n")
        path = root / FOLDERS[i % 4] / f"{when:%Y-%m-%d}_Entry_{i}.md"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"---\ntimestamp: '{when.isoformat()}'\ntags: {json.dumps(tags)}\n"
                        f"core_insight: '{insight}'\n---\n\n{body}", encoding="utf-8")


def timed(fn: Callable[[], Any]) -> tuple[float, Any]:
    t = time.perf_counter()
    out = fn()
    return time.perf_counter() - t, out


def percentiles(samples: list[float]) -> dict[str, float]:
    ms = sorted(s * 1000 for s in samples)
    return {"p50_ms": round(statistics.median(ms), 3), "p95_ms": round(ms[int(0.95 * (len(ms) - 1))], 3)}


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--entries", type=int, default=10_000)
    ap.add_argument("--lookups", type=int, default=500)
    ap.add_argument("--workdir", type=Path, default=None)
    ap.add_argument("--json", type=Path, default=Path(__file__).parent / "results" / "journal_scale.json")
    args = ap.parse_args(argv)
    work = args.workdir or Path(tempfile.mkdtemp(prefix="soulpass-journal-"))
    work.mkdir(parents=True, exist_ok=True)
    try:
        make_folder(work / "mira", args.entries)
        sp = soulpass.open(work / "home", embedder="none")
        acct = sp.create_account("bench")
        out: dict[str, Any] = {"entries": args.entries, "python": sys.version.split()[0],
                               "machine": platform.machine(), "when": datetime.now(UTC).isoformat()}
        t, report = timed(lambda: import_mira(acct, work / "mira"))
        out["import_s"] = round(t, 3)
        out["imported"] = len(report.imported)
        out["repeats"] = len(report.repeats)
        t, _ = timed(lambda: acct.index())
        out["catalog_catch_up_s"] = round(t, 3)
        j = acct.journal()
        items = j.find()
        rng = random.Random(2)
        hashes = [rng.choice(items).semantic_hash for _ in range(args.lookups)]
        out["find_by_hash"] = percentiles([timed(lambda h=h: j.find(semantic_hash=h))[0] for h in hashes])
        out["find_by_tag"] = percentiles([timed(lambda: j.find(tags=[f"tag-{rng.randrange(50)}"]))[0]
                                          for _ in range(min(args.lookups, 100))])
        weeks = [items[rng.randrange(len(items))].timestamp for _ in range(args.lookups)]
        out["find_one_week"] = percentiles([timed(lambda w=w: j.find(since=w, until=w + timedelta(days=7)))[0]
                                            for w in weeks if w is not None])
        t, pats = timed(lambda: j.patterns(similar=False))
        out["patterns_identical_s"] = round(t, 3)
        out["identical_groups"] = len(pats.identical)
        acct.close()
        t, rep = timed(lambda: audit(sp, "bench"))
        out["audit_s"] = round(t, 3)
        out["audit_findings"] = len(rep.findings)
        t, b1 = timed(lambda: backup(sp, "bench", work / "repo"))
        out["backup_first_s"] = round(t, 3)
        out["backup_files"] = b1.files
        sp.account("bench").journal().add("One more entry. After the first backup.")
        t, _ = timed(lambda: backup(sp, "bench", work / "repo"))
        out["backup_incremental_s"] = round(t, 3)
        t, _ = timed(lambda: restore(soulpass.open(work / "restored", embedder="none"), "bench", work / "repo"))
        out["restore_s"] = round(t, 3)
    finally:
        if args.workdir is None:
            shutil.rmtree(work, ignore_errors=True)
    for key, value in out.items():
        print(f"{key:>24}: {value}")
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(out, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
