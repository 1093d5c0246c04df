#!/usr/bin/env python3
"""An importer's "already imported?" on the files backend: ``Snapshot.tags_carried`` over every
identity tag of a ChatGPT export, and a second import of the same file (all duplicates).

A generated ``conversations.json`` of ``--turns`` messages (``--per-conversation`` a conversation)
is imported once; then, alternating ``--repeat`` times in this one run, each lookup is timed from a
fresh handle with the store's note of tags (``record_tags.jsonl``, after) and with it moved aside
(every record file read, as before). No embedder is loaded (``embedder="none"``).

    .venv/bin/python benchmarks/import_check.py
    .venv/bin/python benchmarks/import_check.py --turns 2000 --repeat 3
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import soulpass
from soulpass.importers.chatgpt import ChatGPTExport
from soulpass.importers.conversations import ChatConversation, with_identities
from soulpass.importers.sources import import_from
from soulpass.store.files.record_tags import TAGS_FILE

T0 = 1_700_000_000.0


def make_export(path: Path, turns: int, per_conversation: int) -> None:
    """A ChatGPT ``conversations.json``: linear conversations of alternating user/assistant turns."""
    convs = []
    for c in range(0, turns, per_conversation):
        mapping: dict[str, Any] = {}
        ids = [f"c{c}-m{m}" for m in range(min(per_conversation, turns - c))]
        for m, nid in enumerate(ids):
            role = "user" if m % 2 == 0 else "assistant"
            mapping[nid] = {"id": nid, "parent": ids[m - 1] if m else None, "children": ids[m + 1:m + 2],
                            "message": {"id": nid, "author": {"role": role}, "create_time": T0 + c * 60 + m,
                                        "content": {"content_type": "text", "parts": [f"message {m} of {c}"]}}}
        convs.append({"title": f"conversation {c}", "id": f"conv-{c}", "create_time": T0 + c * 60,
                      "mapping": mapping, "current_node": ids[-1]})
    path.write_text(json.dumps(convs), encoding="utf-8")


def timed(fn: Callable[[], Any]) -> tuple[float, Any]:
    start = time.perf_counter()
    out = fn()
    return time.perf_counter() - start, out


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--turns", type=int, default=20_000)
    ap.add_argument("--per-conversation", type=int, default=50)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--workdir", type=Path, default=None)
    ap.add_argument("--json", type=Path, default=Path(__file__).parent / "results" / "import_check.json")
    args = ap.parse_args(argv)
    work = args.workdir or Path(tempfile.mkdtemp(prefix="soulpass-import-check-"))
    work.mkdir(parents=True, exist_ok=True)
    try:
        export = work / "conversations.json"
        make_export(export, args.turns, args.per_conversation)
        home = work / "home"
        sp = soulpass.open(home, embedder="none")
        acct = sp.create_account("bench")
        t, summary = timed(lambda: import_from(acct, "chatgpt", export))
        out: dict[str, Any] = {"turns": args.turns, "per_conversation": args.per_conversation,
                               "python": sys.version.split()[0], "machine": platform.machine(),
                               "when": datetime.now(UTC).isoformat(), "first_import_s": round(t, 3),
                               "imported": summary.imported["turn"], "versions": acct.head()}
        tags = [m.tag for item in ChatGPTExport(export).items() if isinstance(item, ChatConversation)
                for m in with_identities(item).messages]
        note, aside = home / "accounts/bench" / TAGS_FILE, work / "record_tags.aside"
        runs: dict[str, list[float]] = {k: [] for k in ("tags_carried_note", "tags_carried_files",
                                                        "second_import_note", "second_import_files")}
        for _ in range(args.repeat):
            for way in ("note", "files"):
                if way == "files":
                    os.replace(note, aside)
                fresh = soulpass.open(home, embedder="none").account("bench")
                t, found = timed(lambda a=fresh: a.store.snapshot().tags_carried(tags))
                assert len(found) == len(set(tags)), (way, len(found))
                runs[f"tags_carried_{way}"].append(t)
                fresh = soulpass.open(home, embedder="none").account("bench")
                t, again = timed(lambda a=fresh: import_from(a, "chatgpt", export))
                assert not again.imported and sum(again.duplicates.values()) == len(tags), (way, again.to_json())
                runs[f"second_import_{way}"].append(t)
                if way == "files":
                    os.replace(aside, note)
        out.update({k: {"median_s": round(statistics.median(v), 4), "min_s": round(min(v), 4),
                        "runs_s": [round(x, 4) for x in v]} for k, v in runs.items()})
        out["note_bytes"] = note.stat().st_size
        print(json.dumps(out, indent=2))
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(out, indent=2) + "\n", encoding="utf-8")
    finally:
        if args.workdir is None:
            shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
