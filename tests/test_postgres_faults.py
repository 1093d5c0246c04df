"""Tests on the real PostgreSQL server (issue 14, item 7): a client SIGKILLed at random instants of a
commit, eight processes archiving into one account, a connection dropped at every step of a commit,
and account isolation of forget and rollback. After each: every account at N or N+1, whole."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

import soulpass
from postgres_helpers import postgres_url
from soulpass.errors import BackendUnavailable

ARCHIVE = """
import sys, soulpass
acct = soulpass.open(sys.argv[1], embedder="none").account("ann")
print("ready", flush=True)
sys.stdin.readline()
acct.archive(sys.argv[2])
print("done", flush=True)
"""

WRITER = """
import sys, soulpass
acct = soulpass.open(sys.argv[1], embedder="none").account("ann")
sb = acct.create_sandbox("w" + sys.argv[2])
for n in range(5):
    sb.add_turn("user", f"writer {sys.argv[2]} turn {n}")
print(acct.archive(sb.id).version, flush=True)
"""


@pytest.fixture
def url(tmp_path: Path) -> Iterator[str]:
    yield from postgres_url(tmp_path)


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1] / "src")}


def _wait_gone(url: str, application: str, timeout: float = 30.0) -> None:
    """Until no backend of the server serves a connection named ``application``."""
    import psycopg

    deadline = time.monotonic() + timeout
    with psycopg.connect(url.split("&soulpass_cache")[0], autocommit=True) as conn:
        while conn.execute("SELECT count(*) FROM pg_stat_activity WHERE application_name = %s",
                           (application,)).fetchone()[0]:
            assert time.monotonic() < deadline, f"the killed client's backend ({application}) is still there"
            time.sleep(0.01)


def _turns(acct: soulpass.Account) -> set[str]:
    return {t.text_excerpt for t in acct.records("turn_user")}


@pytest.mark.parametrize("kills", [pytest.param(8, id="short"), pytest.param(60, id="long", marks=pytest.mark.slow)])
def test_a_client_killed_mid_commit_leaves_n_or_n_plus_one(url: str, kills: int) -> None:
    acct = soulpass.open(url, embedder="none").create_account("ann")
    rng = random.Random(kills)
    expected: set[str] = set()
    for round_ in range(kills):
        sb = acct.create_sandbox(f"round {round_}")
        texts = {f"round {round_} turn {n}" for n in range(3)}
        for text in sorted(texts):
            sb.add_turn("user", text)
        head = acct.head()
        name = f"sp-killed-{round_}"
        child = subprocess.Popen([sys.executable, "-c", ARCHIVE, url, sb.id], env={**_env(), "PGAPPNAME": name},
                                 text=True, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        assert child.stdout is not None and child.stdin is not None
        assert child.stdout.readline().strip() == "ready"
        child.stdin.write("go\n")
        child.stdin.flush()
        time.sleep(rng.uniform(0.0, 0.03))
        child.send_signal(signal.SIGKILL)
        child.wait()
        child.stdin.close()
        child.stdout.close()
        # The server may still be finishing what the dead client sent (a COMMIT that left before
        # the kill lands after it): wait until its backend has gone, then look.
        _wait_gone(url, name)
        now = acct.head()
        assert now in (head, head + 1)
        if now == head:  # not committed: the sandbox is intact and archives now
            assert acct.archive(sb.id).version == head + 1  # type: ignore[union-attr]
        expected |= texts
        assert _turns(acct) == expected  # whole: every turn of every committed version, nothing else
    assert [e["version"] for e in acct.log()] == list(range(1, kills + 1))


def test_eight_processes_archiving_into_one_account_lose_nothing(url: str) -> None:
    acct = soulpass.open(url, embedder="none").create_account("ann")
    procs = [subprocess.Popen([sys.executable, "-c", WRITER, url, str(i)], env=_env(), text=True,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE) for i in range(8)]
    versions = []
    for proc in procs:
        out, err = proc.communicate(timeout=180)
        assert proc.returncode == 0, err
        versions.append(int(out.strip()))
    assert sorted(versions) == list(range(1, 9))  # consecutive, each committed once
    assert _turns(acct) == {f"writer {i} turn {n}" for i in range(8) for n in range(5)}


@pytest.mark.parametrize("step", ["head_locked", "rows_closed", "rows_written", "sandbox_closed"])
def test_a_connection_dropped_mid_commit_writes_nothing(url: str, step: str) -> None:
    import psycopg

    acct = soulpass.open(url, embedder="none").create_account("ann")
    first = acct.create_sandbox("first")
    first.add_turn("user", "before")
    first.archive()
    sb = acct.create_sandbox("second")
    sb.add_turn("user", "during")
    admin = url.split("&soulpass_cache")[0]

    def drop(name: str) -> None:
        if name == step:  # another session kills this one's backend: the server rolls the commit back
            with psycopg.connect(admin, autocommit=True) as conn:
                conn.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE pid <> pg_backend_pid() "
                             "AND state = 'idle in transaction' AND datname = current_database()")

    with pytest.raises(BackendUnavailable, match="PostgreSQL at"):  # ours, never a raw psycopg error
        acct.archive(sb.id, hook=drop)
    again = soulpass.open(url, embedder="none").account("ann")
    assert again.head() == 1 and _turns(again) == {"before"}
    assert again.archive(sb.id).version == 2  # type: ignore[union-attr]
    assert _turns(again) == {"before", "during"}


def test_forget_and_rollback_in_one_account_never_touch_another(url: str) -> None:
    sp = soulpass.open(url, embedder="none")
    digests = {}
    for name in ("ann", "bob"):
        acct = sp.create_account(name)
        for n in range(2):
            sb = acct.create_sandbox(f"s{n}")
            sb.add_turn("user", f"{name} says {n}")
            sb.add_fact(name, "likes", f"thing {n}", confidence=0.9)
            sb.archive()
    bob = sp.account("bob")
    with bob.store.exclusive():
        digests["bob"] = sorted(bob.store.source_files())
    ann = sp.account("ann")
    ann.rollback(1)
    ann.forget(subject="ann", reason="asked")
    ann.forget(query="says", reason="asked")
    with bob.store.exclusive():
        assert sorted(bob.store.source_files()) == digests["bob"]
    assert _turns(bob) == {"bob says 0", "bob says 1"} and bob.head() == 2
