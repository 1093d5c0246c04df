"""Start-up: how long `import soulpass` and `soulpass --help` take, now and at an earlier commit, in one run.

    python benchmarks/startup.py --before 0349ba7 [--repeats 15]

Each command runs ``--repeats`` times in a fresh interpreter (this checkout's venv); the earlier
commit is checked out into a temporary git worktree and put first on ``PYTHONPATH``, so both sides
use the same interpreter and packages and differ only in Soulpass's code. Runs alternate between
the two sides, so the machine's load weighs on both alike. Prints medians and writes
``benchmarks/results/startup.json``. Target (issue 19): `soulpass --help` <= 0.2 s.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))  # the sibling modules, also when loaded by path

from scale_common import earlier_source  # noqa: E402

TARGET_HELP_S = 0.2
COMMANDS = {
    "import soulpass": [sys.executable, "-c", "import soulpass"],
    "soulpass --help": [sys.executable, "-c", "import sys; sys.argv = ['soulpass', '--help']; "
                        "from soulpass.cli.main import main; main()"],
    "python (nothing)": [sys.executable, "-c", "pass"],
}


def _timed(cmd: list[str], src: Path) -> float:
    env = {**os.environ, "PYTHONPATH": str(src)}
    t = time.perf_counter()
    subprocess.run(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
    return time.perf_counter() - t


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--before", default=None, help="an earlier commit to compare with (default: none)")
    ap.add_argument("--repeats", type=int, default=15)
    ap.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "startup.json")
    args = ap.parse_args(argv)
    with contextlib.ExitStack() as stack:
        sides = {"now": ROOT / "src"}
        if args.before:
            sides = {"before": stack.enter_context(earlier_source(ROOT, args.before)), **sides}
        times: dict[str, dict[str, list[float]]] = {side: {c: [] for c in COMMANDS} for side in sides}
        for name, cmd in COMMANDS.items():
            for src in sides.values():  # warm the file cache once
                _timed(cmd, src)
            for _ in range(args.repeats):
                for side, src in sides.items():
                    times[side][name].append(_timed(cmd, src))
        result: dict[str, Any] = {"when": time.strftime("%Y-%m-%dT%H:%M:%S"), "repeats": args.repeats,
                                  "before": args.before, "target_help_s": TARGET_HELP_S, "median_s": {}}
        for side in sides:
            result["median_s"][side] = {c: round(statistics.median(v), 4) for c, v in times[side].items()}
            print(f"{side:7s} " + "  ".join(f"{c}: {result['median_s'][side][c] * 1000:.0f} ms" for c in COMMANDS))
        if "before" in sides:
            result["ratio_now_over_before"] = {
                c: round(result["median_s"]["now"][c] / result["median_s"]["before"][c], 3) for c in COMMANDS}
        result["pass"] = result["median_s"]["now"]["soulpass --help"] <= TARGET_HELP_S
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
        print(f"wrote {args.out}; `soulpass --help` {result['median_s']['now']['soulpass --help'] * 1000:.0f} ms "
              f"(target {TARGET_HELP_S * 1000:.0f}): pass={result['pass']}")
        return 0


if __name__ == "__main__":
    sys.exit(main())
