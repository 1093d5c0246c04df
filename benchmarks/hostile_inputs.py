"""Hostile values through the library API (issue 38 item 8): how many calls, and what escaped.

    python benchmarks/hostile_inputs.py --examples 10000 --out benchmarks/results/hostile_inputs.json

Hypothesis draws one public call of an engine, an account or a sandbox and hostile arguments for it
(``tests/hostile_helpers.py``: huge numbers, NaN, bytes, lone surrogates, deep nesting, wrong types,
path tricks) ``--examples`` times. Every call must succeed or raise a ``SoulpassError``; anything
else is counted by call, exception and the line that raised it, and the run exits 1. Prints
``examples / ok / soulpass errors / escaped = N / … / … / 0`` and writes JSON.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
import traceback
from collections import Counter
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from hostile_helpers import CALLS, World, call_once, hostile


def run(examples: int) -> dict[str, Any]:
    outcomes: Counter[str] = Counter()
    escaped: Counter[str] = Counter()
    with tempfile.TemporaryDirectory(prefix="soulpass-hostile-") as folder:
        world = World(Path(folder) / "home")

        @settings(max_examples=examples, deadline=None, database=None, phases=[Phase.generate],
                  suppress_health_check=list(HealthCheck))
        @given(data=st.data())
        def draw(data: st.DataObject) -> None:
            index = data.draw(st.integers(0, len(CALLS) - 1))
            args = [data.draw(hostile) for _ in range(CALLS[index][1])]
            try:
                outcomes[call_once(world, index, args)] += 1
            except Exception as exc:  # what this run counts: nothing but Soulpass errors may escape
                frame = traceback.extract_tb(exc.__traceback__)[-1]
                escaped[f"{CALLS[index][0]}: {type(exc).__name__} at {Path(frame.filename).name}:{frame.lineno}"] += 1

        start = time.perf_counter()
        draw()
        seconds = time.perf_counter() - start
    total = sum(outcomes.values()) + sum(escaped.values())
    return {"examples": total, "ok": outcomes.pop("ok", 0), "soulpass_errors": dict(outcomes),
            "escaped": dict(escaped), "seconds": round(seconds, 1)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--examples", type=int, default=10_000)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    result = run(args.examples)
    errors = sum(result["soulpass_errors"].values())
    print(f"examples / ok / soulpass errors / escaped = {result['examples']} / {result['ok']} / {errors} / "
          f"{sum(result['escaped'].values())}")
    for what, n in sorted(result["escaped"].items(), key=lambda kv: -kv[1]):
        print(f"  {n:6d}  {what}")
    if args.out:
        args.out.write_text(json.dumps(result, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    return 1 if result["escaped"] else 0


if __name__ == "__main__":
    sys.exit(main())
