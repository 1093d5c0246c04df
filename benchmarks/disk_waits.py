"""Disk waits of an archive, for ``commit_scaling.py`` (issue 19): the calls of one thread that wait
for the disk (fsync, fdatasync, the store's syncfs, and os.sync, which must never come), their time,
one fsync of this disk, and the verdict on the goal (at most 10 per 50-turn archive, the same for
every master size)."""

from __future__ import annotations

import os
import statistics
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any


class DiskWaits:
    """Counts the calls of one thread that wait for the disk (``os.fsync``, ``os.fdatasync``, the
    store's ``syncfs``, and ``os.sync``, which should never come) and the time spent in them; with
    ``delay_s`` each also sleeps that long first, as on a disk with a slower flush (every thread's:
    a background indexer's waits slow the machine too)."""

    def __init__(self, delay_s: float = 0.0) -> None:
        self.delay_s = delay_s
        self.calls: dict[str, int] = {}
        self.seconds = 0.0
        self._thread: int | None = None

    def _wrap(self, name: str, real: Callable[..., object]) -> Callable[..., object]:
        def call(*args: object) -> object:
            mine = threading.get_ident() == self._thread
            t0 = time.perf_counter()
            if self.delay_s:
                time.sleep(self.delay_s)
            try:
                return real(*args)
            finally:
                if mine:
                    self.calls[name] = self.calls.get(name, 0) + 1
                    self.seconds += time.perf_counter() - t0

        return call

    @contextmanager
    def installed(self) -> Iterator[DiskWaits]:
        from soulpass.store import fsio

        targets = [(os, name) for name in ("fsync", "fdatasync", "sync")]
        if hasattr(fsio, "syncfs"):  # an earlier commit's code (--before) has none
            targets.append((fsio, "syncfs"))
        saved = [(mod, name, getattr(mod, name)) for mod, name in targets]
        for mod, name, real in saved:
            setattr(mod, name, self._wrap(name, real))
        try:
            yield self
        finally:
            for mod, name, real in saved:
                setattr(mod, name, real)

    @contextmanager
    def counting(self) -> Iterator[None]:
        """Count this thread's calls from here to the end of the block (fresh counts)."""
        self.calls, self.seconds, self._thread = {}, 0.0, threading.get_ident()
        try:
            yield
        finally:
            self._thread = None


def disk_fsync_ms(folder: Path, n: int = 30) -> float:
    """Median time of one fsync of a freshly written 4 KiB file in ``folder`` (this disk)."""
    folder.mkdir(parents=True, exist_ok=True)
    times = []
    for i in range(n):
        path = folder / f".fsync-probe-{i}"
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            os.write(fd, b"x" * 4096)
            t0 = time.perf_counter()
            os.fsync(fd)
            times.append(time.perf_counter() - t0)
        finally:
            os.close(fd)
            path.unlink()
    return statistics.median(times) * 1000


FLUSH_TARGET = 10  # disk waits of one 50-turn archive (issue 19)


def disk_wait_summary(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Per size: the disk waits of each timed archive, and their median time and share."""
    calls = [sum(x["disk_waits"].values()) for x in runs]
    wait_ms = statistics.median(x["disk_wait_s"] for x in runs) * 1000
    return {"disk_waits_per_archive": calls, "disk_waits_by_call": runs[-1]["disk_waits"],
            "disk_wait_median_ms": wait_ms,
            "disk_wait_share": wait_ms / (statistics.median(x["seconds"] for x in runs) * 1000)}


def flush_verdict(results: list[dict[str, Any]], fsync_ms: float) -> dict[str, Any]:
    counts = sorted({c for r in results for c in r["disk_waits_per_archive"]})
    return {"calls_per_archive": counts, "target": FLUSH_TARGET, "disk_fsync_ms": fsync_ms,
            "pass": len(counts) == 1 and counts[0] <= FLUSH_TARGET and
            all("sync" not in r["disk_waits_by_call"] for r in results)}
