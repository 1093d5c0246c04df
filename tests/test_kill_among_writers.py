"""Kills among concurrent writers (issue 18, item 5): several processes archive into one account;
one is SIGKILLed mid-way; the others go on, and nothing any of them was told is committed is lost."""

from __future__ import annotations

import multiprocessing
import os
import random
import signal
from multiprocessing.connection import wait
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
        out.send((idx, n, getattr(result, "version", None), texts))
    out.send((idx, None, None, []))


@pytest.mark.parametrize("rounds", [pytest.param(6, id="short"), pytest.param(40, id="long", marks=pytest.mark.slow)])
def test_a_writer_killed_mid_archive_loses_nobody_elses_work(tmp_path: Path, rounds: int) -> None:
    home = tmp_path / "home"
    soulpass.open(home, embedder="none").create_account("ann")
    start = CTX.Event()
    pipes = [CTX.Pipe(duplex=False) for _ in range(WRITERS)]  # one each: a kill can only break its own
    procs = [CTX.Process(target=_writer, args=(home, i, rounds, pipes[i][1], start)) for i in range(WRITERS)]
    for p in procs:
        p.start()
    for _reader, writer in pipes:
        writer.close()
    start.set()
    victim = random.Random(rounds).randrange(WRITERS)
    committed: list[tuple[int, int, list[str]]] = []
    open_readers = {reader: i for i, (reader, _w) in enumerate(pipes)}
    killed = False
    while open_readers:
        ready = wait(list(open_readers), timeout=120)
        if not ready:
            pytest.fail("the writers stopped answering")
        for reader in ready:
            try:
                idx, n, version, texts = reader.recv()  # type: ignore[union-attr]
            except EOFError:  # that writer is gone (finished, or killed)
                del open_readers[reader]
                continue
            if n is None:
                continue
            committed.append((idx, version, texts))
            if not killed and idx == victim and sum(1 for c in committed if c[0] == victim) >= rounds // 3:
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
    versions = [e.version for e in acct.log()]
    assert versions == list(range(1, acct.head() + 1))  # no gap, no duplicate
    assert len(stored) == 3 * acct.head()  # every version whole: three turns each, none half-written
    sb = acct.create_sandbox("after")
    sb.add_turn("user", "the account goes on")
    assert isinstance(acct.archive(sb.id), soulpass.Committed)
