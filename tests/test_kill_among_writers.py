"""Kills among concurrent writers (issue 18, item 5): several processes archive into one account;
one is SIGKILLed mid-way; the others go on, and nothing any of them was told is committed is lost."""

from __future__ import annotations

import multiprocessing
import os
import queue as queue_module
import random
import signal
from pathlib import Path
from typing import Any

import pytest

import soulpass

CTX = multiprocessing.get_context("fork")
WRITERS = 4


def _writer(home: Path, idx: int, rounds: int, out: Any, start: Any) -> None:
    acct = soulpass.open(home, embedder="none").account("ann")
    start.wait(timeout=60)
    for n in range(rounds):
        sb = acct.create_sandbox(f"w{idx}-{n}")
        texts = [f"writer {idx} round {n} turn {t}" for t in range(3)]
        for text in texts:
            sb.add_turn("user", text)
        result = acct.archive(sb.id)
        out.put((idx, n, getattr(result, "version", None), texts))
    out.put((idx, None, None, []))


@pytest.mark.parametrize("rounds", [pytest.param(6, id="short"), pytest.param(40, id="long", marks=pytest.mark.slow)])
def test_a_writer_killed_mid_archive_loses_nobody_elses_work(tmp_path: Path, rounds: int) -> None:
    home = tmp_path / "home"
    soulpass.open(home, embedder="none").create_account("ann")
    out, start = CTX.Queue(), CTX.Event()
    procs = [CTX.Process(target=_writer, args=(home, i, rounds, out, start)) for i in range(WRITERS)]
    for p in procs:
        p.start()
    start.set()
    victim = random.Random(rounds).randrange(WRITERS)
    committed: list[tuple[int, int, list[str]]] = []
    finished: set[int] = set()
    killed = False
    while len(finished) < WRITERS - 1 or (not killed):
        try:
            idx, n, version, texts = out.get(timeout=120)
        except queue_module.Empty:
            pytest.fail("the writers stopped answering")
        if n is None:
            finished.add(idx)
            if idx == victim and not killed:  # it finished before its kill: kill nothing, check all the same
                killed = True
            continue
        committed.append((idx, version, texts))
        if not killed and sum(1 for c in committed if c[0] == victim) >= rounds // 3:
            os.kill(procs[victim].pid, signal.SIGKILL)  # type: ignore[arg-type]
            killed = True
    for p in procs:
        p.join(timeout=60)
    assert all(p.exitcode == 0 for i, p in enumerate(procs) if i != victim)

    acct = soulpass.open(home, embedder="none").account("ann")
    stored = {t.text_excerpt for t in acct.records("turn_user")}
    for idx, version, texts in committed:
        assert version is not None and set(texts) <= stored, (idx, version)  # everything acknowledged is there
    others = [c for c in committed if c[0] != victim]
    assert len(others) == (WRITERS - 1) * rounds  # the others went on to the end
    assert [f for f in acct.store.audit() if f.check != "leftover_txn"] == []
    versions = [e["version"] for e in acct.log()]
    assert versions == list(range(1, acct.head() + 1))  # no gap, no duplicate
    assert len(stored) == 3 * acct.head()  # every version whole: three turns each, none half-written
    sb = acct.create_sandbox("after")
    sb.add_turn("user", "the account goes on")
    assert isinstance(acct.archive(sb.id), soulpass.Committed)
