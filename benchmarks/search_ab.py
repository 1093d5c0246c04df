"""End-to-end search of this checkout against an earlier commit's code, ours only (no Mem0 needed).

The accounts of ``benchmarks/mem0_compare.py`` (the first ``--conversations`` LoCoMo conversations,
imported through the normal write path, MiniLM int8) are built once by this checkout; then
``--rounds`` rounds alternate between this checkout's code and ``--before``'s (a commit, checked out
into a temporary worktree, or a folder holding a ``src``), each a fresh process that searches every
question for its top 10 (query embedding included). Printed and written: each side's p50/p95 and
whether every question's top 10 is the same on both sides (``rankings_sha256``).

    python benchmarks/search_ab.py --before aa4b04b --conversations 2 --rounds 4
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "benchmarks"))

from mem0_compare import DEFAULT_DATA, plain_data, run_child  # noqa: E402
from scale_common import earlier_source  # noqa: E402


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0] if __doc__ else None)
    p.add_argument("--before", required=True, help="an earlier commit, or a folder that holds its src/")
    p.add_argument("--after", type=Path, default=REPO, help="a folder with the src/ to time (default: here)")
    p.add_argument("--data", type=Path, default=DEFAULT_DATA, help="LoCoMo JSON (default: ../shared/bench)")
    p.add_argument("--conversations", type=int, default=2, help="the first N conversations")
    p.add_argument("--rounds", type=int, default=4, help="rounds, the order of the sides alternating")
    p.add_argument("--workdir", type=Path, default=None, help="kept when given (else a temporary folder)")
    p.add_argument("--json", type=Path, default=None, help="where to write the results")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    work = args.workdir or Path(tempfile.mkdtemp(prefix="sp-ab-"))
    work.mkdir(parents=True, exist_ok=True)
    with contextlib.ExitStack() as stack:
        try:
            before = Path(args.before) / "src" if Path(args.before).is_dir() else stack.enter_context(
                earlier_source(REPO, args.before))
            report = run(args, work, str(before))
        finally:
            if args.workdir is None:
                shutil.rmtree(work, ignore_errors=True)
    if args.json is not None:
        args.json.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    return 0 if report["same_rankings"] else 1


def run(args: argparse.Namespace, work: Path, before_src: str) -> dict[str, Any]:
    plain = plain_data(args.data, args.conversations)
    plain["source"] = str(args.data.resolve())
    data_file = work / "locomo-plain.json"
    data_file.write_text(json.dumps(plain), encoding="utf-8")
    digest = hashlib.sha256(data_file.read_bytes()).hexdigest()
    marker = work / "built-soulpass"
    built = marker.exists() and marker.read_text("utf-8") == digest
    sides: dict[str, str | None] = {"after": str(args.after / "src"), "before": before_src}
    rounds: dict[str, list[dict[str, Any]]] = {side: [] for side in sides}
    for round_no in range(args.rounds):
        for side in (list(sides) if round_no % 2 == 0 else list(reversed(sides))):
            if not built:
                shutil.rmtree(work / "soulpass", ignore_errors=True)
            got = run_child(sys.executable, ["--_worker", "ours", "--_work", str(work), "--_data", str(data_file),
                                             "--_build", "0" if built else "1"], sides[side])
            built = True
            marker.write_text(digest, encoding="utf-8")
            rounds[side].append(got)
            print(f"  round {round_no + 1} {side}: p50 {got['p50_ms']:.2f} / p95 {got['p95_ms']:.2f} ms "
                  f"(CPU p50 {got.get('cpu_p50_ms', float('nan')):.2f}), "
                  f"recall@10 {got['recall_at_10']:.3f}, rankings {got['rankings_sha256'][:12]}", flush=True)
    keys = ("p50_ms", "p95_ms", "cpu_p50_ms", "recall_at_10")
    summary = {side: {key: statistics.median(r.get(key, float("nan")) for r in rs) for key in keys}
               for side, rs in rounds.items()}
    same = len({r["rankings_sha256"] for rs in rounds.values() for r in rs}) == 1
    for side, s in summary.items():
        print(f"{side:7s} p50 {s['p50_ms']:.2f} ms  p95 {s['p95_ms']:.2f} ms  CPU p50 {s['cpu_p50_ms']:.2f} ms  "
              f"recall@10 {s['recall_at_10']:.3f}")
    print(f"after / before: p50 {summary['after']['p50_ms'] / summary['before']['p50_ms']:.3f}x, "
          f"p95 {summary['after']['p95_ms'] / summary['before']['p95_ms']:.3f}x; the same top 10 for every "
          f"question: {'yes' if same else 'NO'}", flush=True)
    return {"benchmark": "search_ab", "when": time.strftime("%Y-%m-%dT%H:%M:%S"),
            "params": {"conversations": args.conversations, "rounds": args.rounds, "before": args.before},
            "rounds": rounds, "summary": summary, "same_rankings": same}


if __name__ == "__main__":
    raise SystemExit(main())
