#!/usr/bin/env python3
"""Commit scaling: does archiving a session cost the same whatever the size of the master?

For each master size (default 1k, 100k and 1M records) the benchmark

1. builds a master account through the bulk path (``Account.bulk_append``, in chunks of
   ``--chunk`` records, each chunk one version): conversations of one episode and two turns
   (user + LLM, the episode's ``turn_refs`` pointing at them) plus ~5 % semantic facts, with
   ``created_at`` spread over ``--years`` years so month folders hold a few thousand files at most;
2. once every master is built, archives ``--repeats`` fresh sandboxes per master, round-robin over
   the sizes after ``--warmup`` untimed ones: 50 turns (25 user + 25 LLM), 25 episodes, 3 facts (one
   of which contradicts the master's "User lives in ..." fact, so a supersede happens) and one state
   delta, timing only the ``archive()`` call;
3. records the build time, the disk usage of the account and the archive median and minimum, and
   with ``--profile`` a cProfile of one more archive per size.

The figure of merit is ``median(largest) / median(smallest)``: the archive should cost what the
session costs, not what the history costs (target <= 1.2).

Each timed archive also counts the calls that wait for the disk (``os.fsync``, ``os.fdatasync``,
``syncfs``) made by the archiving thread, and the time spent in them; the report sets them beside one
fsync of this disk (``disk_fsync_ms``). Issue 19's goals: the count independent of the master and of
the session, at most 10 for the 50-turn archive, never ``os.sync()``. ``--slow-disk-ms 3.5`` adds
that wait to every such call, as a disk whose fsync takes 3-4 ms would, and ``--before COMMIT``
runs an earlier commit's code (a git worktree first on ``PYTHONPATH``) on the same sizes first.

    .venv/bin/python benchmarks/commit_scaling.py                      # 1k, 100k, 1M
    .venv/bin/python benchmarks/commit_scaling.py --sizes 1000,20000 --repeats 3 --profile
    .venv/bin/python benchmarks/commit_scaling.py --postgres postgresql://127.0.0.1:5432/test
    .venv/bin/python benchmarks/commit_scaling.py --sizes 1000,100000 --before ffd4364 --slow-disk-ms 3.5

With ``--postgres SERVER`` the masters live in a fresh schema of that database (dropped after)
instead of a home folder: a commit is one transaction there (issue 14).
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import os
import platform
import pstats
import random
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import soulpass
from soulpass.ids import new_temp_id

sys.path.insert(0, str(Path(__file__).resolve().parent))  # the sibling modules, also when loaded by path
from disk_waits import FLUSH_TARGET, DiskWaits, disk_fsync_ms, disk_wait_summary, flush_verdict
from pg_common import postgres_schema
from scale_common import earlier_source

from soulpass.records import (
    Episode,
    Record,
    SemanticFact,
    SituationContext,
    StructuredSummary,
    TurnLLM,
    TurnUser,
)

try:  # rich is a dependency of soulpass, but keep the benchmark usable without it
    from rich.console import Console
    from rich.table import Table
except ImportError:  # pragma: no cover
    Console = None  # type: ignore[assignment,misc]
    Table = None  # type: ignore[assignment,misc]

TARGET_RATIO = 1.2
DEFAULT_SIZES = "1000,100000,1000000"
DEFAULT_JSON = Path(__file__).resolve().parent / "results" / "commit_scaling.json"
RECORD_KINDS = ("episode", "turn_user", "turn_llm", "fact", "sensory")

# The timed session.
SESSION_TURN_PAIRS = 25  # 25 user + 25 LLM turns, one episode per pair
SESSION_FACTS = 3
SESSION_STATE_DELTAS = 1

# The master fact every session contradicts ("lives in" is a functional predicate).
HOME_SUBJECT, HOME_PREDICATE = "User", "lives in"
CITIES = ("Lisbon", "Berlin", "Kyoto", "Montreal", "Nairobi", "Oslo", "Lima", "Hanoi", "Perth", "Quito",
          "Dakar", "Tallinn", "Porto", "Seville", "Bergen", "Cusco", "Da Nang", "Graz", "Turin", "Leeds")

_VOCAB = (
    "memory project deadline coffee garden music travel weekend family friend book movie recipe "
    "running training meeting report budget design review python server database backup release "
    "morning evening holiday birthday doctor appointment exercise sleep dream idea plan question "
    "answer problem solution feeling happy tired excited worried calm curious grateful busy quiet "
    "city train flight hotel museum beach mountain river forest snow rain sun autumn spring summer "
    "winter language lesson guitar piano painting photo camera garden tomato bread cheese tea "
    "chapter story letter email message call invoice contract client team manager colleague"
)
_WORDS = tuple(_VOCAB.split())
_PREDICATES_USER = ("likes", "enjoys", "uses", "knows", "visited", "owns", "wants", "speaks", "prefers to read")
_PREDICATES_OTHER = ("works at", "is", "lives in", "likes", "knows", "owns", "uses", "is part of")
_EMOTIONS = ("joy", "calm", "curiosity", "worry", "frustration", "gratitude", None)
_INTENTS = ("ask", "share", "plan", "vent", "decide", None)
_LOCATIONS = ("mobile_ssh", "desktop", "voice", "web", "car")
_MODES = ("assert", "reflect", "hypothesize", "caution")


# --- synthetic history ------------------------------------------------------------------------


class HistoryGenerator:
    """Deterministic (seeded) records: conversations (1 episode + 2 turns) and facts."""

    def __init__(self, seed: int, years: float, fact_share: float, user_fact_share: float,
                 entities: int = 5000, end: datetime | None = None) -> None:
        self.rng = random.Random(seed)
        self.end = end or (datetime.now(UTC) - timedelta(days=1))
        self.span_s = int(years * 365.25 * 86400)
        self.user_fact_share = user_fact_share
        # Probability that the next item is a fact (1 record) rather than a conversation (3 records)
        # so that facts are ``fact_share`` of the records.
        self.p_fact = 3 * fact_share / (1 + 2 * fact_share)
        self.entities = [f"{self.rng.choice(_WORDS).title()} {self.rng.choice(_WORDS).title()} {i}"
                         for i in range(entities)]
        self.seeded_home = False

    def _when(self) -> datetime:
        return self.end - timedelta(seconds=self.rng.randrange(self.span_s))

    def _text(self, lo: int, hi: int) -> str:
        words = self.rng.choices(_WORDS, k=self.rng.randint(lo, hi))
        return " ".join(words).capitalize() + "."

    def chunk(self, n: int) -> list[Record]:
        """Exactly ``n`` records; the episodes' crosslinks stay inside the chunk."""
        rng = self.rng
        out: list[Record] = []
        last_episode: str | None = None
        if not self.seeded_home and n > 0:
            out.append(SemanticFact(id=new_temp_id("fact"), subject=HOME_SUBJECT, predicate=HOME_PREDICATE,
                                    object=CITIES[0], confidence=0.95, created_at=self._when()))
            self.seeded_home = True
        while len(out) < n:
            left = n - len(out)
            if left < 3 or rng.random() < self.p_fact:
                out.append(self._fact(last_episode))
                continue
            at = self._when()
            tu, tl, ep = new_temp_id("turn_user"), new_temp_id("turn_llm"), new_temp_id("episode")
            out.append(TurnUser(id=tu, created_at=at, text_excerpt=self._text(8, 40),
                                emotion_signal=rng.choice(_EMOTIONS), intent=rng.choice(_INTENTS)))
            out.append(TurnLLM(id=tl, created_at=at + timedelta(seconds=rng.randint(2, 30)), agent="eva",
                               text_excerpt=self._text(15, 70), epistemic_mode=rng.choice(_MODES),
                               confidence=round(rng.uniform(0.5, 1.0), 2), reply_to=tu))
            out.append(Episode(
                id=ep, created_at=at + timedelta(seconds=40), agent="eva", turn_refs=(tu, tl),
                situation_context=SituationContext(interaction_mode="chat", location_context=rng.choice(_LOCATIONS)),
                summary=StructuredSummary(action_taken=self._text(4, 10), key_outcome=self._text(4, 10),
                                          future_implication=self._text(4, 10)),
                RI_global=round(rng.random(), 3),
            ))
            last_episode = ep
        return out

    def _fact(self, source: str | None) -> SemanticFact:
        rng = self.rng
        if rng.random() < self.user_fact_share:
            subject, predicate = "User", rng.choice(_PREDICATES_USER)
        else:
            subject, predicate = rng.choice(self.entities), rng.choice(_PREDICATES_OTHER)
        obj = rng.choice(self.entities) if rng.random() < 0.5 else " ".join(rng.choices(_WORDS, k=2))
        return SemanticFact(id=new_temp_id("fact"), subject=subject, predicate=predicate, object=obj,
                            confidence=round(rng.uniform(0.75, 1.0), 2), created_at=self._when(),
                            source_refs=(source,) if source else ())


# --- measuring ------------------------------------------------------------------------------------


def _out(msg: str) -> None:
    print(msg, flush=True)


def peak_rss_mb() -> float:
    """Peak resident set size of this process so far (Linux reports KiB, macOS bytes)."""
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak / (1024 * 1024) if sys.platform == "darwin" else peak / 1024


def source_revision() -> str | None:
    """``git describe``-style revision of the checkout the benchmark runs from (``+dirty`` if modified)."""
    git = shutil.which("git")
    if not git:
        return None
    repo = Path(__file__).resolve().parents[1]
    try:
        head = subprocess.run([git, "-C", str(repo), "rev-parse", "--short", "HEAD"],
                              capture_output=True, text=True, check=True, timeout=10).stdout.strip()
        dirty = subprocess.run([git, "-C", str(repo), "status", "--porcelain", "--", "src"],
                               capture_output=True, text=True, check=True, timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None
    return f"{head}+dirty" if dirty else head or None


def version_counts(acct: soulpass.Account) -> dict[str, int]:
    """The record counts of HEAD, from its log entry (either backend)."""
    return {k: int(v) for k, v in acct.store.snapshot().entry().counts.items()}


def record_total(counts: dict[str, int]) -> int:
    return sum(counts.get(k, 0) for k in RECORD_KINDS)


def build_master(acct: soulpass.Account, size: int, chunk: int, gen: HistoryGenerator) -> dict[str, Any]:
    """Bulk-append ``size`` records in chunks; returns the timings."""
    t0 = time.perf_counter()
    append_s = 0.0
    done = 0
    while done < size:
        n = min(chunk, size - done)
        records = gen.chunk(n)
        ta = time.perf_counter()
        acct.bulk_append(records)
        append_s += time.perf_counter() - ta
        done += n
        del records
        elapsed = time.perf_counter() - t0
        _out(f"    built {done:>10,}/{size:,} records  {done / elapsed:>9,.0f} rec/s  "
             f"(bulk_append {append_s:6.1f} s, total {elapsed:6.1f} s, peak RSS {peak_rss_mb():,.0f} MB)")
    build_s = time.perf_counter() - t0
    return {"build_s": build_s, "append_s": append_s, "generate_s": build_s - append_s,
            "build_rec_per_s": size / build_s if build_s > 0 else 0.0, "versions": acct.head()}


def fill_session(sb: soulpass.Sandbox, repeat: int, rng: random.Random) -> str:
    """50 turns, 25 episodes, 3 facts (one contradicting the master), 1 state delta; returns the new city."""
    first_turn = None
    for i in range(SESSION_TURN_PAIRS):
        words = " ".join(rng.choices(_WORDS, k=20))
        tu = sb.add_turn("user", f"Turn {i}: {words}?", emotion_signal=rng.choice(_EMOTIONS[:-1]))
        tl = sb.add_turn("eva", f"Answer {i}: {words} {' '.join(rng.choices(_WORDS, k=30))}.",
                         epistemic_mode="assert", confidence=0.9, reply_to=tu)
        first_turn = first_turn or tu
        sb.write_episode({
            "summary": {"action_taken": f"talked about {words[:40]}", "key_outcome": "agreed on a next step",
                        "future_implication": "follow up next week"},
            "turn_refs": [tu, tl],
            "situation_context": {"location_context": "mobile_ssh", "interaction_mode": "chat"},
        })
    # The master's current home is CITIES[repeat % (n-1)] (CITIES[0] before the first session), so a
    # different city supersedes exactly one fact every time.
    city = CITIES[1 + repeat % (len(CITIES) - 1)]
    sb.add_fact(HOME_SUBJECT, HOME_PREDICATE, city, confidence=0.95, source_refs=[first_turn] if first_turn else [])
    tag = f"{repeat}-{rng.getrandbits(32):08x}"
    sb.add_fact("User", "enjoys", f"weekend hike {tag}", confidence=0.9)
    sb.add_fact(f"Topic {tag}", "relates to", "travel plans", confidence=0.85)
    sb.update_state("ire", {"valence": round(rng.uniform(-1, 1), 3), "arousal": round(rng.random(), 3)})
    return city


def archive_once(acct: soulpass.Account, n: int, rng: random.Random, waits: DiskWaits) -> dict[str, Any]:
    """Fill a fresh sandbox with the benchmark session and time its ``archive()`` call alone."""
    sb = acct.create_sandbox(f"bench session {n}")
    fill_session(sb, n, rng)
    with waits.counting():
        t0 = time.perf_counter()
        result = sb.archive()
        dt = time.perf_counter() - t0
    if not isinstance(result, soulpass.Committed):
        raise RuntimeError(f"archive returned {result!r}, expected Committed")
    plan = result.plan
    added = {k: len(v) for k, v in plan.added.items()}
    expected = {"episode": SESSION_TURN_PAIRS, "turn_user": SESSION_TURN_PAIRS,
                "turn_llm": SESSION_TURN_PAIRS, "fact": SESSION_FACTS}
    if added != expected or len(plan.superseded) != 1:
        raise RuntimeError(f"unexpected archive outcome: added {added}, superseded {plan.superseded}, "
                           f"rejected {plan.rejected}, duplicates {plan.duplicates}")
    files = len(plan.change.records) + len(plan.change.documents) + 1  # + the sandbox's ARCHIVED.json
    return {"seconds": dt, "version": result.version, "files_written": files,
            "superseded": len(plan.superseded), "disk_waits": dict(waits.calls),
            "disk_wait_s": waits.seconds}


def profile_archive(acct: soulpass.Account, rng: random.Random, offset: int, path: Path, top: int = 40) -> float:
    """One more archive under cProfile; writes the stats (binary + text) next to ``path``."""
    sb = acct.create_sandbox("bench profiled session")
    fill_session(sb, offset, rng)
    prof = cProfile.Profile()
    t0 = time.perf_counter()
    prof.enable()
    sb.archive()
    prof.disable()
    dt = time.perf_counter() - t0
    path.parent.mkdir(parents=True, exist_ok=True)
    prof.dump_stats(str(path.with_suffix(".prof")))
    buf = io.StringIO()
    stats = pstats.Stats(prof, stream=buf)
    stats.sort_stats("cumulative").print_stats(top)
    stats.sort_stats("tottime").print_stats(top)
    path.write_text(buf.getvalue(), "utf-8")
    return dt


# --- reporting --------------------------------------------------------------------------------


def print_table(results: list[dict[str, Any]], ratio: float | None, passed: bool | None) -> None:
    headers = ("size", "records", "build s", "build rec/s", "disk MB", "archive median ms", "archive min ms")
    rows = [(f"{r['size']:,}", f"{r['master_records']:,}", f"{r['build_s']:.1f}", f"{r['build_rec_per_s']:,.0f}",
             f"{r['disk_bytes'] / 1e6:,.1f}", f"{r['archive_median_ms']:.1f}", f"{r['archive_min_ms']:.1f}")
            for r in results]
    verdict = "n/a" if ratio is None else f"{ratio:.3f} -> {'PASS' if passed else 'FAIL'} (target <= {TARGET_RATIO})"
    if Console is not None and Table is not None:
        table = Table(title="Soulpass commit scaling: archive a 50-turn session")
        for i, h in enumerate(headers):
            table.add_column(h, justify="left" if i == 0 else "right")
        for row in rows:
            table.add_row(*row)
        console = Console(width=120)
        console.print(table)
        console.print(f"ratio median(largest)/median(smallest): {verdict}", markup=False, highlight=False)
        return
    widths = [max(len(h), *(len(row[i]) for row in rows)) for i, h in enumerate(headers)]  # pragma: no cover
    _out("  ".join(h.rjust(w) for h, w in zip(headers, widths, strict=True)))  # pragma: no cover
    for row in rows:  # pragma: no cover
        _out("  ".join(c.rjust(w) for c, w in zip(row, widths, strict=True)))
    _out(f"ratio median(largest)/median(smallest): {verdict}")  # pragma: no cover


def parse_sizes(text: str) -> list[int]:
    try:
        sizes = [int(s.replace("_", "")) for s in text.split(",") if s.strip()]
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"--sizes must be comma-separated integers, got {text!r}") from exc
    if not sizes or any(s < 1 for s in sizes):
        raise argparse.ArgumentTypeError("--sizes needs at least one positive size")
    return sorted(set(sizes))


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--sizes", type=parse_sizes, default=parse_sizes(DEFAULT_SIZES),
                   help=f"master sizes in records, comma-separated (default {DEFAULT_SIZES})")
    p.add_argument("--postgres", default=None, metavar="SERVER",
                   help="build the masters in a fresh schema of this PostgreSQL database instead of a home folder")
    p.add_argument("--workdir", type=Path, default=None,
                   help="folder for the Soulpass home (default: a new temp dir under $TMPDIR or /tmp); "
                        "a 1M-record master needs ~5-8 GB")
    p.add_argument("--keep", action="store_true", help="keep the built accounts instead of deleting them")
    p.add_argument("--repeats", type=int, default=15, help="timed archives per size (default 15)")
    p.add_argument("--warmup", type=int, default=1, help="untimed archives per size before timing (default 1)")
    p.add_argument("--json", type=Path, default=DEFAULT_JSON, help=f"result file (default {DEFAULT_JSON})")
    p.add_argument("--chunk", type=int, default=50_000, help="records per bulk_append call / version (default 50000)")
    p.add_argument("--years", type=float, default=20.0, help="history span the created_at dates cover (default 20)")
    p.add_argument("--fact-share", type=float, default=0.05, help="share of the records that are facts (default 0.05)")
    p.add_argument("--user-fact-share", type=float, default=0.4,
                   help="share of the facts whose subject is 'User' (one hub node; default 0.4)")
    p.add_argument("--seed", type=int, default=20260128, help="random seed (default 20260128)")
    p.add_argument("--profile", action="store_true",
                   help="also run one archive per size under cProfile; stats go next to the JSON file")
    p.add_argument("--strict", action="store_true", help="exit with status 1 when the ratio misses the target")
    p.add_argument("--slow-disk-ms", type=float, default=0.0,
                   help="add this wait to every fsync/syncfs of the timed archives (a slower disk; default 0)")
    p.add_argument("--before", default=None, metavar="COMMIT",
                   help="first run an earlier commit's code on the same sizes and report both")
    return p


def run_before(args: argparse.Namespace, workdir: Path) -> dict[str, Any]:
    """This benchmark with ``args.before``'s code in a child process; its report."""
    out = workdir / "before.json"
    child = [sys.executable, str(Path(__file__).resolve()), "--sizes", ",".join(map(str, args.sizes)),
             "--repeats", str(args.repeats), "--warmup", str(args.warmup), "--chunk", str(args.chunk),
             "--years", str(args.years), "--fact-share", str(args.fact_share),
             "--user-fact-share", str(args.user_fact_share), "--seed", str(args.seed),
             "--slow-disk-ms", str(args.slow_disk_ms), "--workdir", str(workdir), "--json", str(out)]
    if args.postgres:
        child += ["--postgres", args.postgres]
    _out(f"  first {args.before}'s code, in a child process")
    with earlier_source(Path(__file__).resolve().parents[1], args.before) as src:
        proc = subprocess.run(child, env={**os.environ, "PYTHONPATH": str(src)}, check=False,
                              capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"the run of {args.before} failed:\n{proc.stderr[-4000:]}")
    report = json.loads(out.read_text("utf-8"))
    out.unlink()
    return {"revision": args.before, "disk_fsync_ms": report["disk_fsync_ms"], "ratio": report["ratio"],
            "results": [{k: r[k] for k in ("size", "archive_median_ms", "archive_min_ms", "disk_waits_per_archive",
                                           "disk_waits_by_call", "disk_wait_median_ms", "disk_wait_share")}
                        for r in report["results"]]}


def print_before(before: dict[str, Any], results: list[dict[str, Any]]) -> None:
    _out(f"before ({before['revision']}) -> now, archive median ms and disk waits per archive:")
    for old, new in zip(before["results"], results, strict=True):
        _out(f"  {new['size']:>9,}: {old['archive_median_ms']:7.1f} -> {new['archive_median_ms']:7.1f} ms "
             f"(x{new['archive_median_ms'] / old['archive_median_ms']:.2f}); waits "
             f"{statistics.median(old['disk_waits_per_archive']):.0f} -> "
             f"{statistics.median(new['disk_waits_per_archive']):.0f}; wait time "
             f"{old['disk_wait_median_ms']:.1f} -> {new['disk_wait_median_ms']:.1f} ms")


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.repeats < 1 or args.chunk < 1 or args.warmup < 0:
        raise SystemExit("--repeats and --chunk must be at least 1, --warmup at least 0")
    if args.workdir is None:
        workdir = Path(tempfile.mkdtemp(prefix="soulpass-commit-scaling-"))
        own_workdir = True
    else:
        workdir = args.workdir.expanduser().resolve()
        workdir.mkdir(parents=True, exist_ok=True)
        own_workdir = False
    home = workdir / f"home-{datetime.now(UTC):%Y%m%dT%H%M%S}-{os.getpid()}"
    json_path: Path = args.json.expanduser().resolve()
    json_path.parent.mkdir(parents=True, exist_ok=True)

    started = datetime.now(UTC)
    revision = source_revision()  # before the run: the code that was imported
    before = run_before(args, workdir) if args.before else None
    fsync_ms = disk_fsync_ms(workdir / ".probe")
    waits = DiskWaits(args.slow_disk_ms / 1000)
    _out(f"Soulpass commit scaling: sizes {', '.join(f'{s:,}' for s in args.sizes)}, {args.repeats} repeats, "
         f"home {home}")
    drop_schema = None
    if args.postgres:
        url, drop_schema = postgres_schema(args.postgres, workdir)
        _out(f"  in PostgreSQL: a fresh schema of {args.postgres}")
    sp = soulpass.open(url if args.postgres else home)
    results: list[dict[str, Any]] = []
    accounts: list[soulpass.Account] = []
    try:
        # 1. Build every master first, so the timed archives below run under the same conditions.
        for size in args.sizes:
            _out(f"  building a master of {size:,} records (chunks of {args.chunk:,})")
            acct = sp.account(f"m{size}", create=True)
            gen = HistoryGenerator(args.seed + size, args.years, args.fact_share, args.user_fact_share)
            rss_before = peak_rss_mb()
            build = build_master(acct, size, args.chunk, gen)
            counts = version_counts(acct)
            disk = acct.store.stored_bytes()
            _out(f"    {record_total(counts):,} records, {disk / 1e6:,.1f} MB on disk")
            accounts.append(acct)
            results.append({
                "size": size,
                "account": acct.name,
                "account_path": str(getattr(acct.store, "path", acct.store.index_location().folder)),
                "master_records": record_total(counts),
                "counts": counts,
                **build,
                "disk_bytes": disk,
                "peak_rss_mb_before_build": rss_before,
                "peak_rss_mb_after_build": peak_rss_mb(),
            })
        # 2. Time the archives round-robin over the sizes (after untimed warm-ups), so drifts in
        #    disk or cache state hit every size alike.
        rngs = [random.Random(args.seed * 7 + size) for size in args.sizes]
        runs: list[list[dict[str, Any]]] = [[] for _ in args.sizes]
        n = 0
        with waits.installed():
            for _ in range(args.warmup):
                for acct, rng in zip(accounts, rngs, strict=True):
                    archive_once(acct, n, rng, waits)
                n += 1
            for r in range(args.repeats):
                for i, (acct, rng) in enumerate(zip(accounts, rngs, strict=True)):
                    runs[i].append(archive_once(acct, n, rng, waits))
                n += 1
                _out(f"  round {r + 1}/{args.repeats}: " + ", ".join(
                    f"{size:,}: {rs[-1]['seconds'] * 1000:.1f} ms ({sum(rs[-1]['disk_waits'].values())} flushes)"
                    for size, rs in zip(args.sizes, runs, strict=True)))
        for entry, rs in zip(results, runs, strict=True):
            secs = [x["seconds"] for x in rs]
            entry |= {
                "archive_s": secs,
                "archive_median_ms": statistics.median(secs) * 1000,
                "archive_min_ms": min(secs) * 1000,
                "archive_max_ms": max(secs) * 1000,
                "archive_files_written": rs[0]["files_written"],
                "superseded_per_archive": [x["superseded"] for x in rs],
                **disk_wait_summary(rs),
            }
        # 3. Optionally one more archive per size under cProfile.
        if args.profile:
            for entry, acct, rng in zip(results, accounts, rngs, strict=True):
                prof_path = json_path.with_name(f"{json_path.stem}_profile_{entry['size']}.txt")
                entry["profile_archive_ms"] = profile_archive(acct, rng, n, prof_path) * 1000
                entry["profile_file"] = str(prof_path)
    except BaseException:
        _out(f"failed: the work folder {workdir if own_workdir else home} is kept")
        raise
    finally:
        for acct in accounts:
            acct.close()
        if drop_schema is not None:
            drop_schema()

    ratio: float | None = None
    passed: bool | None = None
    if len(results) > 1 and results[0]["archive_median_ms"] > 0:
        ratio = results[-1]["archive_median_ms"] / results[0]["archive_median_ms"]
        passed = ratio <= TARGET_RATIO
    print_table(results, ratio, passed)
    flushes = flush_verdict(results, fsync_ms)
    _out(f"disk waits per archive: {flushes['calls_per_archive']} (one fsync here {fsync_ms:.2f} ms): "
         f"{'PASS' if flushes['pass'] else 'FAIL'} (target <= {FLUSH_TARGET}, the same for every size)")
    if before is not None:
        print_before(before, results)
    report = {
        "benchmark": "commit_scaling",
        "backend": "postgres" if args.postgres else "files",
        "date": started.isoformat(timespec="seconds"),
        "duration_s": (datetime.now(UTC) - started).total_seconds(),
        "machine": {
            "nproc": os.cpu_count(),
            "python": platform.python_version(),
            "implementation": platform.python_implementation(),
            "platform": platform.platform(),
            "machine": platform.machine(),
            "soulpass": soulpass.__version__,
            "revision": revision,
        },
        "params": {
            "sizes": args.sizes, "repeats": args.repeats, "warmup": args.warmup, "chunk": args.chunk,
            "years": args.years,
            "fact_share": args.fact_share, "user_fact_share": args.user_fact_share, "seed": args.seed,
            "session": {"turns": 2 * SESSION_TURN_PAIRS, "episodes": SESSION_TURN_PAIRS, "facts": SESSION_FACTS,
                        "superseding_facts": 1, "state_deltas": SESSION_STATE_DELTAS},
        },
        "home": str(home),
        "kept": bool(args.keep),
        "results": results,
        "ratio": ratio,
        "ratio_basis": "archive median of the largest master / archive median of the smallest",
        "target": TARGET_RATIO,
        "pass": passed,
        "peak_rss_mb": peak_rss_mb(),
        "disk_fsync_ms": fsync_ms,
        "slow_disk_ms": args.slow_disk_ms,
        "disk_waits": flushes,
        "before": before,
    }
    tmp = json_path.with_name(json_path.name + ".tmp")
    tmp.write_text(json.dumps(report, indent=2, sort_keys=False) + "\n", "utf-8")
    os.replace(tmp, json_path)
    _out(f"results written to {json_path}")
    if not args.keep:  # after the results: deleting a 1M-record home takes minutes
        shutil.rmtree(workdir if own_workdir else home, ignore_errors=True)
    return 1 if args.strict and passed is False else 0


if __name__ == "__main__":
    sys.exit(main())
