"""Crash safety of the commit protocol (soulpass.store.files.commit).

A forked child archives (or rolls back, or bulk-appends) and is SIGKILLed at hundreds of
instants: after every hook call of a full commit (so every name in ``COMMIT_STEPS`` is hit,
the per-file steps once per file) and after random delays that land between the hooks (before
the lock, while planning, mid-write). After each kill the account is reopened, which runs
recovery, and must be exactly version N (not one byte changed) or exactly version N+1 (equal to
a commit that was never interrupted, up to timestamps), with no txn left behind; running
recovery a second time must change nothing.

Expected results are recorded before any kill, by doing the same operation uninterrupted in a
throwaway copy of the same starting tree.
"""

from __future__ import annotations

import functools
import hashlib
import itertools
import json
import os
import random
import shutil
import signal
import statistics
import tempfile
import time
import traceback
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

import soulpass
from soulpass import Committed
from soulpass.consolidation.plan import ConsolidationPlan
from soulpass.errors import NotFound
from soulpass.ids import new_temp_id
from soulpass.records import Episode, Record, SemanticFact, TurnLLM, TurnUser
from soulpass.store import fsio
from soulpass.store.files.commit import COMMIT_STEPS, LOG_FILE, Hook, recover
from soulpass.store.files.layout import history_path
from soulpass.store.fsio import file_lock
from soulpass.store.keys import RECORD_DIRS

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork"),
]

ACCOUNT = "alice"
SEED = 20240611
# Fields that hold the wall-clock time of the commit itself: they differ between two runs.
VOLATILE = frozenset({"timestamp", "updated_at", "archived_at",
                      "chain"})  # a log line's chained checksum covers its timestamp
MIN_ARCHIVE_KILLS = 200

Check = Callable[[soulpass.Account, int], None]


# --- file trees ------------------------------------------------------------------------------


def _acct_path(home: Path) -> Path:
    return home / "accounts" / ACCOUNT


NOTES = (".lock", "copies.sums", "record_tags.jsonl")


def _files(root: Path) -> dict[str, bytes]:
    """Every file under ``root`` (relative path -> bytes), but the lock file and sandbox trash."""
    out: dict[str, bytes] = {}
    for dirpath, _dirs, names in os.walk(root):
        for name in names:
            p = Path(dirpath, name)
            rel = p.relative_to(root).as_posix()
            # copies.sums and pristine/: notes of what each commit wrote, made after it, best effort
            # (a commit a kill cut short is not noted: its files are not judged for hand edits)
            # record_tags.jsonl the same, rebuilt by the next commit (tests/contract/test_record_tags.py)
            if rel in NOTES or rel.startswith(("sandboxes/.trash-", "pristine/")):
                continue  # trash: _verify asserts there is none
            out[rel] = p.read_bytes()
    return out


def _strip(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _strip(v) for k, v in value.items() if k not in VOLATILE}
    if isinstance(value, list):
        return [_strip(v) for v in value]
    return value


def _normalized(files: dict[str, bytes]) -> dict[str, Any]:
    """File contents with the commit's own timestamps removed (JSON parsed, JSONL per line)."""
    out: dict[str, Any] = {}
    for rel, data in files.items():
        if rel.endswith(".jsonl"):
            out[rel] = [_strip(json.loads(line)) for line in data.splitlines() if line.strip()]
        elif rel.endswith(".json"):
            out[rel] = _strip(json.loads(data))
        elif rel == "log.sums":  # checksums of log lines, whose timestamps differ: one per version is what counts
            out[rel] = [line.split()[0] for line in data.splitlines()]
        else:
            out[rel] = data
    return out


def _tree_hash(root: Path) -> str:
    """Hash of every folder name, file name and file content under ``root``."""
    h = hashlib.sha256()
    for dirpath, dirs, names in os.walk(root):
        dirs.sort()
        base = Path(dirpath)
        for d in dirs:
            h.update(b"D" + (base / d).relative_to(root).as_posix().encode() + b"\0")
        for name in sorted(names):
            p = base / name
            h.update(b"F" + p.relative_to(root).as_posix().encode() + b"\0")
            h.update(hashlib.sha256(p.read_bytes()).digest())
    return h.hexdigest()


def _last_logged(path: Path) -> int:
    log = path / LOG_FILE
    if not log.exists():
        return 0
    data = log.read_bytes()
    # A line counts once its newline is written: a kill mid-append leaves a torn tail, which the
    # store cuts on its next open (store/files/commit.py, log_tail_torn) and redoes from the txn.
    whole = data[:data.rfind(b"\n") + 1]
    lines = [line for line in whole.splitlines() if line.strip()]
    return int(json.loads(lines[-1])["version"]) if lines else 0


def _copy(src: Path, dst: Path) -> Path:
    shutil.copytree(src, dst, symlinks=True)
    return dst


# --- child processes -------------------------------------------------------------------------


def _spawn(work: Callable[[], object]) -> int:
    """Fork; the child runs ``work`` and exits 0 (3 if it raised), never returning to pytest."""
    pid = os.fork()
    if pid == 0:  # the child
        code = 0
        try:
            work()
        except BaseException:
            traceback.print_exc()
            code = 3
        os._exit(code)
    return pid


def _reap(pid: int) -> bool:
    """True if the child died of SIGKILL, False if it finished; a child that raised fails the test."""
    _, status = os.waitpid(pid, 0)
    if os.WIFSIGNALED(status):
        assert os.WTERMSIG(status) == signal.SIGKILL
        return True
    assert os.WEXITSTATUS(status) == 0, "the child raised (traceback in the captured stderr)"
    return False


def _suicide() -> None:
    os.kill(os.getpid(), signal.SIGKILL)


def _die_at(k: int) -> Hook:
    """A commit hook that SIGKILLs its own process right after the ``k``-th step (1-based)."""
    calls = 0

    def hook(step: str) -> None:
        nonlocal calls
        calls += 1
        if calls == k:
            _suicide()

    return hook


def _die_at_removal(k: int, after_step: str = "log_appended") -> Hook:
    """A hook that, once ``after_step`` ran, kills the process right after its ``k``-th file or
    folder removal: inside the rmtree of the finished txn, then of the archived sandbox."""

    def hook(step: str) -> None:
        if step != after_step:
            return
        removals = 0
        real_unlink, real_rmdir = os.unlink, os.rmdir

        def counted(fn: Callable[..., None]) -> Callable[..., None]:
            def wrapper(*args: Any, **kwargs: Any) -> None:
                nonlocal removals
                fn(*args, **kwargs)
                removals += 1
                if removals == k:
                    _suicide()

            return wrapper

        os.unlink, os.rmdir = counted(real_unlink), counted(real_rmdir)  # the child only

    return hook


def _kill_after(work: Callable[[], object], delay: float) -> bool:
    """Run ``work`` in a child and SIGKILL it ``delay`` seconds after the fork."""
    pid = _spawn(work)
    time.sleep(delay)
    os.kill(pid, signal.SIGKILL)  # harmless if it already exited (a zombie until reaped)
    return _reap(pid)


def _with_hook(acct: soulpass.Account, hook: Hook) -> soulpass.Account:
    """Route ``hook`` into every commit of ``acct`` (bulk_append has no hook parameter)."""
    real_commit = acct.store.commit

    def commit(change: Any, *, parent: int, hook: Hook | None = None, _route: Hook = hook) -> Any:
        return real_commit(change, parent=parent, hook=_route)

    acct.store.commit = commit  # type: ignore[method-assign]
    return acct


@dataclass(frozen=True)
class Timing:
    """Seconds after the fork at which a child's commit passed its hooks, and when it exited."""

    steps: list[str]
    first_hook: float
    last_hook: float
    end: float


def _probe(start: Path, scratch: Path, op: Callable[[Path, Hook], object], runs: int = 3) -> Timing:
    """Time ``op`` in forked children (as the killed runs will be) on copies of ``start``."""
    firsts, lasts, ends = [], [], []
    steps: list[str] = []
    for _ in range(runs):
        folder = Path(tempfile.mkdtemp(prefix="probe", dir=scratch))
        home, out = _copy(start, folder / "home"), folder / "timing.json"
        t0 = time.perf_counter()

        def work(home: Path = home, out: Path = out) -> None:
            seen: list[tuple[str, float]] = []
            op(home, lambda step: seen.append((step, time.perf_counter())))
            out.write_text(json.dumps({"seen": seen, "end": time.perf_counter()}))

        assert not _reap(_spawn(work))
        data = json.loads(out.read_text())
        steps = [s for s, _ in data["seen"]]
        firsts.append(data["seen"][0][1] - t0)
        lasts.append(data["seen"][-1][1] - t0)
        ends.append(data["end"] - t0)
    return Timing(steps, statistics.median(firsts), statistics.median(lasts), statistics.median(ends))


# --- the starting account and the expected results ----------------------------------------------


def _build_start(home: Path) -> str:
    """Versions 1 and 2, plus a ready sandbox on version 2 whose archive touches everything."""
    acct = soulpass.open(home).account(ACCOUNT, create=True)
    sb = acct.create_sandbox("first chat")
    t = sb.add_turn("user", "I live in Paris and I like tea", emotion_signal="joy")
    sb.add_fact("User", "lives in", "Paris", confidence=0.9, source_refs=[t])
    sb.add_fact(content="User likes tea", confidence=0.9)
    sb.update_state("ire", {"mood": "calm", "energy": 3})
    sb.update_profile({"name": "Ann"})
    sb.propose_core("identity", "EVA", key="name", confidence=0.95, reason="setup")
    assert isinstance(sb.archive(), Committed)
    sb = acct.create_sandbox("second chat")
    t = sb.add_turn("user", "I started at Acme")
    sb.add_turn("eva", "Congratulations", epistemic_mode="reflect", confidence=0.8)
    sb.add_fact("User", "works at", "Acme", confidence=0.9, source_refs=[t])
    sb.add_sensory("offer letter text", source="mail://offer")
    sb.update_state("ire", {"energy": 5})
    assert isinstance(sb.archive(), Committed)

    sb = acct.create_sandbox("the chat that gets killed")
    turns = []
    for i in range(4):
        turns.append(sb.add_turn("user", f"user turn {i}", emotion_signal="joy"))
        turns.append(sb.add_turn("eva", f"eva turn {i}", epistemic_mode="assert", confidence=0.9))
    sb.write_episode({"summary": {"action_taken": "Talked about the move", "key_outcome": "Ann moves to Berlin",
                                  "future_implication": "Berlin tips"},
                      "turn_refs": turns[:4], "situation_context": {"location_context": "mobile_ssh"}})
    sb.write_episode({"summary": {"action_taken": "Talked about drinks", "key_outcome": "coffee now",
                                  "future_implication": "offer coffee"}, "turn_refs": turns[4:]})
    sb.add_fact("User", "lives in", "Berlin", confidence=0.95, source_refs=[turns[0]])  # supersedes Paris
    sb.add_fact(content="User dislikes tea", confidence=0.9)  # contradicts "likes tea"
    sb.add_fact(content="User likes coffee", confidence=0.9)
    sb.add_fact(content="User owns a bike", confidence=0.9)
    sb.add_sensory("moving checklist", source="http://example.org/checklist")
    sb.update_state("ire", {"mood": "excited"})
    sb.update_state("focus", {"topic": "moving"})
    sb.update_profile({"city": "Berlin"})
    sb.propose_core("values", "honesty", confidence=0.95, reason="stated twice")
    sb.propose_core("worldview", "open", key="stance", confidence=0.95, reason="stated")
    assert acct.head() == 2
    return sb.id


def _bulk_records() -> list[Record]:
    recs: list[Record] = []
    for e in range(12):
        turns: list[Record] = [TurnUser(id=new_temp_id("turn_user"), text_excerpt=f"imported {e}.{i}")
                               for i in range(6)]
        turns.append(TurnLLM(id=new_temp_id("turn_llm"), text_excerpt=f"reply {e}", agent="eva"))
        recs += turns
        recs.append(Episode(id=new_temp_id("episode"), turn_refs=tuple(t.id for t in turns),
                            summary={"action_taken": f"imported session {e}"}))
    recs += [SemanticFact(id=new_temp_id("fact"), subject="User", predicate="owns", object=f"item {i}",
                          confidence=0.9) for i in range(20)]
    return recs


@dataclass
class Case:
    """One operation from ``start`` (version ``n``) and its uninterrupted result ``done`` (n + 1)."""

    start: Path
    done: Path
    n: int
    steps: list[str]
    base: dict[str, bytes] = field(init=False)
    done_norm: dict[str, Any] = field(init=False)
    base_counts: dict[str, int] = field(init=False)

    def __post_init__(self) -> None:
        self.base = _files(_acct_path(self.start))
        self.done_norm = _normalized(_files(_acct_path(self.done)))
        acct = soulpass.open(self.start).account(ACCOUNT)
        self.base_counts = {kind: len(list(acct.records(kind))) for kind in RECORD_DIRS}


@dataclass
class Scenario:
    root: Path
    sandbox_id: str
    plan: ConsolidationPlan
    archive: Case
    rollback: Case
    bulk: Case
    bulk_records: list[Record]


def _record_steps(steps: list[str]) -> Hook:
    return steps.append


@pytest.fixture(scope="module")
def scenario(tmp_path_factory: pytest.TempPathFactory) -> Scenario:
    root = tmp_path_factory.mktemp("crash")
    start = root / "start"
    sid = _build_start(start)

    # The uninterrupted archive, twice: the second run checks that normalisation hides nothing
    # but timestamps (both runs must compare equal).
    archive_steps: list[str] = []
    done = _copy(start, root / "archived")
    result = soulpass.open(done).account(ACCOUNT).sandbox(sid).archive(hook=_record_steps(archive_steps))
    assert isinstance(result, Committed) and result.version == 3
    again = _copy(start, root / "archived-again")
    assert isinstance(soulpass.open(again).account(ACCOUNT).sandbox(sid).archive(), Committed)
    assert _normalized(_files(_acct_path(again))) == _normalized(_files(_acct_path(done)))
    archive = Case(start, done, 2, archive_steps)
    assert archive.done_norm != _normalized(archive.base)

    # Rollback from version 3 to 1: retires, restored facts, replaced documents.
    rb_steps: list[str] = []
    rolled = _copy(done, root / "rolled-back")
    assert soulpass.open(rolled).account(ACCOUNT).rollback(1, hook=_record_steps(rb_steps)) == 4
    rollback = Case(done, rolled, 3, rb_steps)

    # Bulk append on version 2.
    records = _bulk_records()
    bulk_steps: list[str] = []
    bulked = _copy(start, root / "bulked")
    assert _with_hook(soulpass.open(bulked).account(ACCOUNT), _record_steps(bulk_steps)).bulk_append(records) == 3
    bulk = Case(start, bulked, 2, bulk_steps)
    return Scenario(root, sid, result.plan, archive, rollback, bulk, records)


# --- checks after a kill -----------------------------------------------------------------------


def _stage(home: Path, n: int, sandbox_id: str | None = None) -> str:
    """Where the killed commit was, judged from the files before anything reopens them."""
    path = _acct_path(home)
    txn_root, txn = path / "txn", path / "txn" / f"{n + 1:08d}"
    logged = _last_logged(path) == n + 1
    if txn_root.is_dir() and any(txn_root.iterdir()):
        if logged:
            return "txn removal"
        return "apply" if (txn / "COMMITTED").exists() else "txn write"
    if logged:
        sandboxes = path / "sandboxes"
        if (sandbox_id and (sandboxes / sandbox_id).exists()) or any(sandboxes.glob(".trash-*")):
            return "sandbox removal"
        return "finished"
    return "before txn"


def _reopen_and_check(case: Case, home: Path) -> tuple[soulpass.Account, int]:
    """Reopen (recovers a pending txn), run the store's recovery (sweeps finished sandbox folders,
    as the next commit would) and check the invariants every outcome must satisfy."""
    acct = soulpass.open(home).account(ACCOUNT)
    path = acct.store.path
    txn_root = path / "txn"
    assert not txn_root.exists() or not list(txn_root.iterdir()), "a txn was left behind"
    acct.store.recover()
    head = acct.head()
    assert head in (case.n, case.n + 1)
    log = [e.to_json() for e in acct.log()]
    versions = [int(e["version"]) for e in log]
    assert versions == list(range(1, head + 1)), f"log versions {versions} at HEAD {head}"
    assert all(int(e["parent"]) == int(e["version"]) - 1 for e in log)
    doc = acct.store.store.version_doc()
    assert doc["version"] == head
    for kind in RECORD_DIRS:
        records = list(acct.records(kind))  # every record at HEAD parses (no Corrupted)
        assert len(records) == int(doc["counts"].get(kind, 0)), f"VERSION counts disagree for {kind}"
        assert all(0 < r.version <= head for r in records)
    files = _files(path)
    if head == case.n:
        assert files == case.base, "version N must be untouched: no changed or stray file"
        assert {kind: len(list(acct.records(kind))) for kind in RECORD_DIRS} == case.base_counts
    else:
        assert _normalized(files) == case.done_norm, "version N+1 differs from an uninterrupted commit"
        assert versions.count(case.n + 1) == 1 and versions[-1] == case.n + 1
    # Recovery is idempotent: running it again on the recovered tree changes nothing.
    before = _tree_hash(path)
    with acct.store.store.locked():
        assert recover(path) == []
    assert _tree_hash(path) == before
    return acct, head


def _verify(label: str, case: Case, home: Path, check: Check, sandbox_id: str | None = None) -> int:
    """Full check of one killed run (``label`` says where it was killed); returns HEAD."""
    try:
        acct, head = _reopen_and_check(case, home)
        check(acct, head)
        trash = sorted(p.name for p in (acct.store.path / "sandboxes").glob(".trash-*"))
        assert not trash, f"half-removed sandbox folders left behind: {trash}"
    except AssertionError as exc:
        raise AssertionError(f"killed at {label}: {exc}") from exc
    return head


def _archive_check(sc: Scenario, rearchive: bool = True) -> Check:
    case, plan, sid = sc.archive, sc.plan, sc.sandbox_id
    v = case.n + 1
    new_ids = [rid for ids in plan.added.values() for rid in ids]
    assert len(new_ids) >= 15 and plan.superseded and plan.replaced

    def check(acct: soulpass.Account, head: int) -> None:
        path = acct.store.path
        live = {s.sandbox_id for s in acct.sandboxes()}
        if head == v:
            for rid in new_ids:
                assert acct.record(rid).version == v
            for s in plan.superseded:
                old, then = acct.record(s["fact"]), acct.record(s["fact"], at=case.n)
                assert isinstance(old, SemanticFact) and isinstance(then, SemanticFact)
                assert old.superseded_by == s["by"] and old.valid_to_version == v
                assert then.superseded_by is None
            for rel in plan.replaced:  # the copy that version v replaced is in history/
                assert (path / history_path(rel, v)).read_bytes() == case.base[rel]
            entry = acct.log()[-1].to_json()
            assert entry["source_sandbox"] == sid and entry["added"] == plan.added
            assert sid not in live, "an archived sandbox must not be archivable again"
        else:
            for rid in new_ids:
                with pytest.raises(NotFound):
                    acct.record(rid)
            for s in plan.superseded:
                fact = acct.record(s["fact"])
                assert isinstance(fact, SemanticFact) and fact.superseded_by is None
            assert sid in live, "an uncommitted sandbox must survive the crash"
            if not rearchive:  # the tree is byte-identical to version N: archiving would be the same
                return
            # ... and archiving it later gives exactly the uninterrupted result.
            result = acct.sandbox(sid).archive()
            assert isinstance(result, Committed) and result.version == v
            assert result.plan.id_map == plan.id_map
            assert _normalized(_files(path)) == case.done_norm

    return check


def _archive_work(home: Path, sandbox_id: str, hook: Hook | None = None) -> Callable[[], object]:
    def work() -> None:
        soulpass.open(home).account(ACCOUNT).sandbox(sandbox_id).archive(hook=hook)

    return work


def _delay(rng: random.Random, t: Timing, i: int) -> float:
    """Odd ``i``: anywhere in the run (open, lock, planning...); even ``i``: inside the commit."""
    if i % 2:
        return rng.uniform(0.0, t.end * 1.05)
    span = t.last_hook - t.first_hook
    return rng.uniform(max(0.0, t.first_hook - 0.3 * span), t.last_hook + 0.1 * span)


# --- the tests -----------------------------------------------------------------------------------


def test_archive_killed_at_every_step_and_at_random_instants(scenario: Scenario, tmp_path: Path) -> None:
    sc, case, sid = scenario, scenario.archive, scenario.sandbox_id
    steps = case.steps
    assert set(COMMIT_STEPS) - set(steps) == {"retired"}, steps  # an archive retires nothing
    assert steps.count("txn_file") == steps.count("file_applied") >= 15
    assert steps.count("history_copied") == len(sc.plan.replaced)
    check, quick_check = _archive_check(sc), _archive_check(sc, rearchive=False)
    per_step: Counter[str] = Counter()
    outcomes: Counter[int | None] = Counter()

    # 1. Right after every hook call of a full archive.
    for k in range(1, len(steps) + 1):
        home = _copy(case.start, tmp_path / f"hook{k}")
        assert _reap(_spawn(_archive_work(home, sid, _die_at(k)))), f"never reached hook call {k}"
        per_step[steps[k - 1]] += 1
        outcomes[_verify(f"hook {k}", case, home, check, sid)] += 1
    # Killed before the commit point -> N, after it -> N+1.
    committed = steps.index("committed") + 1
    assert outcomes == {case.n: committed - 1, case.n + 1: len(steps) - committed + 1}

    # 2. After random delays, between the hooks.
    def probe() -> Timing:
        return _probe(case.start, tmp_path, lambda home, hook: _archive_work(home, sid, hook)())

    timing = probe()
    assert timing.steps == steps
    rng = random.Random(SEED)
    stages: Counter[str] = Counter()
    timer_outcomes: Counter[int | None] = Counter()
    wanted = MIN_ARCHIVE_KILLS + 10 - outcomes.total()
    for i in itertools.count():
        if stages.total() >= wanted:
            break
        # Timer kills depend on the machine's load; only a runaway loop is a failure (every step is
        # already covered deterministically by the hook kills above).
        assert i < 10 * wanted, "most children finished before their kill"
        if i and i % 20 == 0:
            timing = probe()  # follow the machine's load
        delay = _delay(rng, timing, i)
        home = _copy(case.start, tmp_path / f"timer{i}")
        if not _kill_after(_archive_work(home, sid), delay):
            assert _verify(f"timer {delay:.4f}s", case, home, check, sid) == case.n + 1  # finished first
            continue
        stages[_stage(home, case.n, sid)] += 1
        every_8th = check if i % 8 == 0 else quick_check
        timer_outcomes[_verify(f"timer {delay:.4f}s", case, home, every_8th, sid)] += 1

    instants = outcomes.total() + timer_outcomes.total()
    print(f"\narchive: {instants} kill instants; after hook calls, per step: {dict(per_step)}; "
          f"after random delays ({timing.end * 1000:.0f} ms per archive), per stage: {dict(stages)}; "
          f"outcomes {dict(outcomes)} / {dict(timer_outcomes)}")
    assert instants >= MIN_ARCHIVE_KILLS
    assert set(per_step) == set(COMMIT_STEPS) - {"retired"}
    assert per_step["txn_file"] == per_step["file_applied"] == steps.count("file_applied")
    assert per_step["history_copied"] == len(sc.plan.replaced)
    # The random kills land on both sides of the commit point and inside the commit.
    assert {case.n, case.n + 1} <= set(timer_outcomes), timer_outcomes
    assert stages["before txn"] and stages["txn write"] + stages["apply"] >= 10, stages


def test_rollback_killed_at_every_step(scenario: Scenario, tmp_path: Path) -> None:
    case = scenario.rollback
    steps = case.steps
    assert set(steps) == set(COMMIT_STEPS), steps  # rollback also retires files
    target = 1

    def work(home: Path, hook: Hook | None) -> Callable[[], object]:
        def run() -> None:
            soulpass.open(home).account(ACCOUNT).rollback(target, hook=hook)

        return run

    def check(acct: soulpass.Account, head: int) -> None:
        for kind in RECORD_DIRS:
            now = {r.id: r.model_copy(update={"version": 0}) for r in acct.records(kind)}
            if head == case.n + 1:
                assert now == {r.id: r.model_copy(update={"version": 0}) for r in acct.records(kind, at=target)}
            else:
                assert len(now) == case.base_counts[kind]
        entry = acct.log()[-1].to_json()
        if head == case.n + 1:
            assert entry["kind"] == "rollback" and len(entry["retired"]) == steps.count("retired")
            for rel in entry["retired"]:  # retired files moved to history, not deleted
                assert (acct.store.path / history_path(rel, head)).exists()
                assert not (acct.store.path / rel).exists()
        else:
            assert entry["kind"] == "archive"
            assert acct.rollback(target) == case.n + 1  # rolling back later gives the same result
            assert _normalized(_files(acct.store.path)) == case.done_norm

    per_step: Counter[str] = Counter()
    outcomes: Counter[int | None] = Counter()
    for k in range(1, len(steps) + 1):
        home = _copy(case.start, tmp_path / f"hook{k}")
        assert _reap(_spawn(work(home, _die_at(k))))
        per_step[steps[k - 1]] += 1
        outcomes[_verify(f"hook {k}", case, home, check)] += 1
    committed = steps.index("committed") + 1
    assert outcomes == {case.n: committed - 1, case.n + 1: len(steps) - committed + 1}
    timing = _probe(case.start, tmp_path, lambda home, hook: work(home, hook)())
    rng = random.Random(SEED + 1)
    timer_kills = 0
    for i in range(12):
        delay = _delay(rng, timing, i)
        home = _copy(case.start, tmp_path / f"timer{i}")
        timer_kills += _kill_after(work(home, None), delay)
        _verify(f"timer {delay:.4f}s", case, home, check)
    print(f"\nrollback: {outcomes.total() + timer_kills} kill instants; after hook calls, per step: {dict(per_step)}")
    assert set(per_step) == set(COMMIT_STEPS) and per_step["retired"] >= 10


def test_bulk_append_killed_at_every_step_and_at_random_instants(scenario: Scenario, tmp_path: Path) -> None:
    case, records = scenario.bulk, scenario.bulk_records
    steps = case.steps
    assert {"txn_file", "committed", "file_applied", "version_written", "log_appended", "done"} <= set(steps)

    def work(home: Path, hook: Hook | None = None, die_at_sync: bool = False) -> Callable[[], object]:
        def run() -> None:
            acct = soulpass.open(home).account(ACCOUNT)
            if hook:
                _with_hook(acct, hook)
            if die_at_sync:  # every record file written straight into place, nothing committed yet
                fsio.DurableBatch.sync = lambda *_: _suicide()
            acct.bulk_append(records)

        return run

    def check(acct: soulpass.Account, head: int, redo: bool = True) -> None:
        path = acct.store.path
        if head == case.n + 1:
            added = json.loads((path / f"log/added/{head:08d}.json").read_text())["added"]
            assert sum(map(len, added.values())) == len(records)
            for ids in added.values():
                for rid in ids:
                    assert acct.record(rid).version == head
        else:
            # No stray record file: nothing anywhere carries version N+1.
            for rel, data in _files(path).items():
                if rel.endswith(".json"):
                    assert int(json.loads(data).get("version", 0)) <= case.n, rel
            if not redo:  # the tree is byte-identical to version N: the import would go the same way
                return
            assert acct.bulk_append(records) == case.n + 1  # and the import can simply be redone
            assert _normalized(_files(path)) == case.done_norm

    def strays(home: Path) -> int:
        return sum(1 for rel in _files(_acct_path(home)) if rel.startswith("core/") and rel not in case.base)

    outcomes: Counter[int | None] = Counter()
    for k in range(1, len(steps) + 1):
        home = _copy(case.start, tmp_path / f"hook{k}")
        assert _reap(_spawn(work(home, _die_at(k))))
        outcomes[_verify(f"hook {k}", case, home, check)] += 1
    # Killed with every record file already in place but no commit marker: recovery deletes them.
    home = _copy(case.start, tmp_path / "sync")
    assert _reap(_spawn(work(home, die_at_sync=True)))
    assert strays(home) >= len(records)
    outcomes[_verify("at os.sync", case, home, check)] += 1
    # Random instants, half of them inside the commit (the direct writes come before the hooks).
    timing = _probe(case.start, tmp_path, lambda home, hook: work(home, hook)())
    rng = random.Random(SEED + 2)
    stages: Counter[str] = Counter()
    uncommitted_with_strays = 0
    for i in range(30):
        delay = _delay(rng, timing, i)
        home = _copy(case.start, tmp_path / f"timer{i}")
        killed = _kill_after(work(home), delay)
        stage = _stage(home, case.n)
        uncommitted_with_strays += stage == "txn write" and strays(home) > 0
        every_4th = check if i % 4 == 0 else functools.partial(check, redo=False)
        head = _verify(f"timer {delay:.4f}s", case, home, every_4th)
        if killed:
            outcomes[head] += 1
            stages[stage] += 1
    print(f"\nbulk: {outcomes.total()} kill instants, outcomes {dict(outcomes)}; after random delays "
          f"({timing.end * 1000:.0f} ms per bulk_append of {len(records)} records), per stage: {dict(stages)}; "
          f"uncommitted kills with record files for recovery to delete: {uncommitted_with_strays + 1}")
    assert {case.n, case.n + 1} <= set(outcomes)


def test_recovery_killed_at_every_step(scenario: Scenario, tmp_path: Path) -> None:
    """A crash during recovery itself: the next open must still finish the committed version."""
    case, sid = scenario.archive, scenario.sandbox_id
    steps = case.steps
    committed = steps.index("committed") + 1
    mid_apply = committed + steps[committed:].count("file_applied") // 2
    assert steps[mid_apply - 1] in ("file_applied", "history_copied")
    check = _archive_check(scenario)

    def recovery(home: Path, hook: Hook) -> Callable[[], object]:
        def run() -> None:
            path = _acct_path(home)
            with file_lock(path / ".lock"):
                recover(path, hook)

        return run

    kills = 0
    for first in (committed, mid_apply):
        crashed = _copy(case.start, tmp_path / f"crashed{first}")
        assert _reap(_spawn(_archive_work(crashed, sid, _die_at(first))))
        assert _stage(crashed, case.n, sid) == "apply"
        redo: list[str] = []
        dry = _copy(crashed, tmp_path / f"dry{first}")
        with file_lock(_acct_path(dry) / ".lock"):
            recover(_acct_path(dry), _record_steps(redo))
        assert redo[-3:] == ["version_written", "log_appended", "done"]
        assert redo.count("file_applied") == steps.count("file_applied")  # every file again, from the journal
        assert _verify("dry", case, dry, check, sid) == case.n + 1
        for k in range(1, len(redo) + 1):
            home = _copy(crashed, tmp_path / f"crashed{first}-{k}")
            assert _reap(_spawn(recovery(home, _die_at(k))))
            assert _verify(f"{first}/{k}", case, home, check, sid) in (case.n + 1, None)
            kills += 1
    print(f"\nrecovery: {kills} kill instants")
    assert kills >= 2 * steps.count("file_applied")


def test_archive_killed_during_the_cleanup_after_commit(scenario: Scenario, tmp_path: Path) -> None:
    """Kill after each single file or folder removal once the log line is written: the removal of
    the finished txn, then of the archived sandbox."""
    case, sid = scenario.archive, scenario.sandbox_id
    check = _archive_check(scenario)
    stages: Counter[str] = Counter()
    k = 0
    while True:
        k += 1
        assert k < 500
        home = _copy(case.start, tmp_path / f"rm{k}")
        if not _reap(_spawn(_archive_work(home, sid, _die_at_removal(k)))):
            assert _verify("no kill", case, home, check, sid) == case.n + 1
            break
        stages[_stage(home, case.n, sid)] += 1
        assert _verify(f"removal {k}", case, home, check, sid) in (case.n + 1, None)
    print(f"\ncleanup after archive: {k - 1} kill instants, per stage {dict(stages)}")
    assert stages["txn removal"] >= 1 and stages["sandbox removal"] >= 3  # a txn is one journal file


def test_bulk_killed_during_the_cleanup_after_commit(scenario: Scenario, tmp_path: Path) -> None:
    case, records = scenario.bulk, scenario.bulk_records

    def work(home: Path, k: int) -> Callable[[], object]:
        def run() -> None:
            _with_hook(soulpass.open(home).account(ACCOUNT), _die_at_removal(k)).bulk_append(records)

        return run

    def check(acct: soulpass.Account, head: int) -> None:
        assert head == case.n + 1

    k = 0
    while True:
        k += 1
        assert k < 500
        home = _copy(case.start, tmp_path / f"rm{k}")
        if not _reap(_spawn(work(home, k))):
            _verify("no kill", case, home, check)
            break
        _verify(f"removal {k}", case, home, check)
    print(f"\ncleanup after bulk: {k - 1} kill instants")
    assert k > 3


def test_long_lived_handle_commits_after_another_process_crashed(scenario: Scenario, tmp_path: Path) -> None:
    """Another process dies mid-commit while this one keeps an Account open and commits next."""
    case, sid, plan = scenario.archive, scenario.sandbox_id, scenario.plan
    steps = case.steps
    committed = steps.index("committed") + 1
    said = "said while the other process crashed"
    failures: list[str] = []
    for name in ("txn_written", "committed", "file_applied", "version_written", "log_appended"):
        k = steps.index(name) + 1
        home = _copy(case.start, tmp_path / name)
        acct = soulpass.open(home).account(ACCOUNT)  # e.g. a server's handle, opened before the crash
        other = acct.create_sandbox("meanwhile")
        other.add_turn("user", said)
        assert _reap(_spawn(_archive_work(home, sid, _die_at(k))))
        assert isinstance(acct.sandbox(other.id).archive(), Committed)
        fresh = soulpass.open(home).account(ACCOUNT)
        versions = [int(e.version) for e in fresh.log()]
        turns = list(fresh.records("turn_user"))
        texts = [t.text_excerpt for t in turns if isinstance(t, TurnUser)]
        assert len(texts) == len(turns)
        live = {s.sandbox_id for s in fresh.sandboxes()}
        if k < committed:  # the crashed commit never happened: its sandbox is still there
            assert fresh.head() == case.n + 1 and versions == list(range(1, case.n + 2))
            assert sid in live and said in texts
            continue
        try:
            assert fresh.head() == case.n + 2, f"HEAD is {fresh.head()}"
            assert versions == list(range(1, case.n + 3)), f"log versions {versions}"
            assert said in texts, "the commit made through the long-lived handle is not visible"
            assert sid not in live
            for ids in plan.added.values():
                for rid in ids:
                    fresh.record(rid)
        except (AssertionError, NotFound) as exc:
            failures.append(f"killed after {name}: {exc}".split("\n")[0])
    assert not failures, ("a handle opened before another process crashed mid-commit must recover under "
                          f"the lock before it commits: {failures}")
