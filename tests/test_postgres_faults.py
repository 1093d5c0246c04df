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
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

import soulpass
from postgres_helpers import postgres_url
from soulpass.errors import SoulpassError

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
    assert [e.version for e in acct.log()] == list(range(1, kills + 1))


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


def _dropper(url: str, step: str, state: str, *, newest: bool = False) -> Callable[[str], None]:
    """A commit hook that, at ``step``, has another session kill this test's backends (named by
    :func:`_two_sandboxes`; never another test's on the shared server) that are in ``state`` (with
    ``newest``, only the one that entered it last)."""
    import psycopg

    admin = url.split("&soulpass_cache")[0]
    limit = 1 if newest else None

    def drop(name: str) -> None:
        if name == step:
            with psycopg.connect(admin, autocommit=True) as conn:
                conn.execute("SELECT pg_terminate_backend(pid) FROM (SELECT pid FROM pg_stat_activity "
                             "WHERE pid <> pg_backend_pid() AND state = %s AND application_name = %s "
                             "ORDER BY state_change DESC LIMIT %s) AS chosen", (state, _APP, limit))

    return drop


_APP = f"sp-dropped-{os.getpid()}"


def _two_sandboxes(url: str, monkeypatch: pytest.MonkeyPatch) -> tuple[soulpass.Account, soulpass.Sandbox]:
    monkeypatch.setenv("PGAPPNAME", _APP)  # the connections the test's pool opens (the dropper kills those)
    acct = soulpass.open(url, embedder="none").create_account("ann")
    first = acct.create_sandbox("first")
    first.add_turn("user", "before")
    first.archive()
    sb = acct.create_sandbox("second")
    sb.add_turn("user", "during")
    return acct, sb


@pytest.mark.parametrize("step", ["head_locked", "rows_closed", "rows_written", "sandbox_closed", "logged",
                                  "head_advanced"])
def test_a_connection_dropped_mid_commit_writes_nothing(url: str, step: str, monkeypatch: pytest.MonkeyPatch) -> None:
    acct, sb = _two_sandboxes(url, monkeypatch)
    # Another session kills this one's backend: the server rolls the commit back, and the error says so.
    with pytest.raises(SoulpassError, match="was not committed"):
        acct.archive(sb.id, hook=_dropper(url, step, "idle in transaction"))
    again = soulpass.open(url, embedder="none").account("ann")
    assert again.head() == 1 and _turns(again) == {"before"}
    assert again.archive(sb.id).version == 2  # type: ignore[union-attr]
    assert _turns(again) == {"before", "during"}


def test_a_connection_dropped_after_the_commit_is_committed_and_the_retry_says_so(
        url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    from soulpass.store.postgres.connections import close_database

    acct, sb = _two_sandboxes(url, monkeypatch)
    # Every connection of the process dies once the transaction is committed (the network went):
    # removing the sandbox fails, and so does releasing the sandbox lock.
    result = acct.archive(sb.id, hook=_dropper(url, "committed", "idle"))
    assert isinstance(result, soulpass.Committed) and result.version == 2
    assert result.warning is not None and "recovery" in result.warning
    close_database(url)  # the dead connections were that pool's; a process that opens now has its own
    again = soulpass.open(url, embedder="none").account("ann")
    assert again.head() == 2 and _turns(again) == {"before", "during"}
    retry = again.archive(sb.id)
    assert isinstance(retry, soulpass.AlreadyArchived) and retry.version == 2
    assert sb.id not in {m.sandbox_id for m in again.store.sandboxes.list()}  # removed by the retry's recovery
    assert [e.version for e in again.log()] == [1, 2]


def test_a_head_row_changed_by_hand_is_set_back_from_the_log(url: str) -> None:
    """PostgreSQL's ``accounts.head`` is to the ``versions`` log what VERSION.json is to the files':
    a head row set back by hand never makes a commit reissue a version or an id."""
    import psycopg

    acct = soulpass.open(url, embedder="none").create_account("ann")
    for n in range(3):
        sb = acct.create_sandbox(f"s{n}")
        sb.add_turn("user", f"turn {n}")
        sb.archive()
    with psycopg.connect(url.split("&soulpass_cache")[0], autocommit=True) as conn:
        conn.execute("UPDATE accounts SET head = 0 WHERE name = 'ann'")
    assert any(f.check == "version_drift" for f in acct.store.audit())  # reported
    sb = acct.create_sandbox("after")
    sb.add_turn("user", "after the edit")
    assert acct.archive(sb.id).version == 4  # type: ignore[union-attr]
    assert acct.head() == 4 and [e.version for e in acct.log()] == [1, 2, 3, 4]
    ids = [i for e in acct.store.log() for ids in e.added.values() for i in ids]
    assert len(ids) == len(set(ids)) == 4
    assert _turns(acct) == {"turn 0", "turn 1", "turn 2", "after the edit"}
