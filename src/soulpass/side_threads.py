"""The threads a search runs a step on beside its own: a query's embedding (``soulpass.index.
query_vectors``), a late-interaction query's encoding (``soulpass.embed.colbert``), PostgreSQL's
full-text search while the nearest vectors are walked to (``soulpass.index.pg.gather``).

One executor serves every search of a process; a thread is made only when none is idle (one, unless
searches run on several threads). A process forked while it existed would inherit an executor whose
threads are gone, and wait forever on it: a forked child makes its own.
"""

from __future__ import annotations

import os
import threading
from concurrent.futures import ThreadPoolExecutor

__all__ = ["beside"]

_executor: ThreadPoolExecutor | None = None
_executor_lock = threading.Lock()


def beside() -> ThreadPoolExecutor:
    """The process's executor for a search's side steps (made at first use)."""
    global _executor
    with _executor_lock:
        if _executor is None:
            _executor = ThreadPoolExecutor(max_workers=min(32, (os.cpu_count() or 1) + 4),
                                           thread_name_prefix="soulpass-beside")
        return _executor


def _forget_executor_after_fork() -> None:
    global _executor, _executor_lock
    _executor, _executor_lock = None, threading.Lock()


os.register_at_fork(after_in_child=_forget_executor_after_fork)
