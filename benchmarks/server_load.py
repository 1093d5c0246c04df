#!/usr/bin/env python3
"""Server load: N concurrent clients writing and searching the REST API on 127.0.0.1 for a fixed time.

1. makes a fresh home with one account per ``--accounts`` (clients are spread over them) and a key
   for each, then starts ``soulpass serve`` as its own process on a free port of 127.0.0.1;
2. runs ``--clients`` threads for ``--seconds``: each opens its own sandbox and loops over
   ``--mix`` (default: 8 turn writes, 1 sandbox search, 1 account search in 10 requests), every turn
   carrying a unique marker; every request's latency is recorded, errors are counted;
3. each client then archives its sandbox (timed apart), the server is stopped, and the benchmark
   checks from the files that every turn the server acknowledged (201) is in the committed master,
   once, with its text intact; a sample of markers is also searched for through the API before stop.

Prints requests/s and p50/p95/p99 latency overall and per kind of request, and writes
``benchmarks/results/server_load.json`` (or ``--json``). The loop is bounded by time and count
(``--max-requests``) and only ever talks to 127.0.0.1.

With ``--postgres-processes 1,2,4`` the same load then runs, in the same invocation, against 1, 2 and
4 ``soulpass serve`` processes over one PostgreSQL database (a fresh schema of ``--postgres``, dropped
after; clients spread round robin over the processes, keys in the database), each checked the same
way, and the throughput ratios to one process are reported (issue 14).

    .venv/bin/python benchmarks/server_load.py                       # 8 clients, 20 s
    .venv/bin/python benchmarks/server_load.py --clients 16 --seconds 30 --embedder auto
    .venv/bin/python benchmarks/server_load.py --postgres-processes 1,2,4
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

import soulpass
from soulpass.server.keyring import key_store

sys.path.insert(0, str(Path(__file__).resolve().parent))  # the sibling modules, also when loaded by path
from pg_common import postgres_schema

RESULTS = Path(__file__).resolve().parent / "results" / "server_load.json"


@dataclass
class ClientLog:
    latencies: dict[str, list[float]] = field(default_factory=dict)
    errors: dict[str, int] = field(default_factory=dict)
    written: dict[str, str] = field(default_factory=dict)  # temp id -> text the server acknowledged
    sandbox_id: str = ""
    account: str = ""
    archive_s: float = 0.0
    id_map: dict[str, str] = field(default_factory=dict)

    def record(self, kind: str, seconds: float, ok: bool) -> None:
        self.latencies.setdefault(kind, []).append(seconds)
        if not ok:
            self.errors[kind] = self.errors.get(kind, 0) + 1


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _start_server(home: str, port: int, embedder: str, log: Path) -> subprocess.Popen[bytes]:
    code = "from soulpass.cli.main import main; main()"
    cmd = [sys.executable, "-c", code, "--home", home, "serve", "--host", "127.0.0.1", "--port", str(port),
           "--embedder", embedder, "--rate-limit", "0", "--quota-bytes", "0"]
    env = {**os.environ, "SOULPASS_HOME": "", "SOULPASS_ACCOUNT": ""}
    with log.open("wb") as out:  # a file, not a pipe: nobody reads it while the load runs
        proc = subprocess.Popen(cmd, env=env, stdout=out, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"server exited: {log.read_text(errors='replace')[-2000:]}")
        try:
            if httpx.get(f"http://127.0.0.1:{port}/openapi.json", timeout=1).status_code == 200:
                return proc
        except httpx.TransportError:
            time.sleep(0.1)
    proc.kill()
    proc.wait()
    raise SystemExit("server did not start within 60 s")


def _client(n: int, base: str, account: str, key: str, stop_at: float, budget: list[int], mix: list[str],
            log: ClientLog) -> None:
    headers = {"Authorization": f"Bearer {key}"}
    with httpx.Client(base_url=base, headers=headers, timeout=60) as http:
        r = http.post(f"/v1/accounts/{account}/sandboxes", json={"name": f"load-{n}"})
        r.raise_for_status()
        log.sandbox_id, log.account = r.json()["sandbox_id"], account
        sb = f"/v1/accounts/{account}/sandboxes/{log.sandbox_id}"
        i = 0
        while time.monotonic() < stop_at:
            with _budget_lock:
                if budget[0] <= 0:
                    break
                budget[0] -= 1
            kind = mix[i % len(mix)]
            t0 = time.perf_counter()
            if kind == "write":
                text = f"client {n} note {i}: marker c{n}x{i} about the garden and the blue kettle"
                r = http.post(f"{sb}/turns", json={"text": text})
                if r.status_code == 201:
                    log.written[r.json()["id"]] = text
            elif kind == "search_sandbox":
                r = http.post(f"{sb}/search", json={"query": f"garden kettle c{n}x{max(i - 3, 0)}", "k": 5})
            else:
                r = http.post(f"/v1/accounts/{account}/search", json={"query": "blue kettle garden", "k": 5})
            log.record(kind, time.perf_counter() - t0, r.status_code < 300)
            i += 1


_budget_lock = threading.Lock()


def _archive_all(base: str, keys: dict[str, str], logs: list[ClientLog]) -> None:
    for log in logs:
        with httpx.Client(base_url=base, headers={"Authorization": f"Bearer {keys[log.account]}"},
                          timeout=300) as http:
            t0 = time.perf_counter()
            r = http.post(f"/v1/accounts/{log.account}/sandboxes/{log.sandbox_id}/archive", json={})
            log.archive_s = time.perf_counter() - t0
            r.raise_for_status()
            log.id_map = r.json()["summary"]["id_map"]


def _spot_search(base: str, keys: dict[str, str], logs: list[ClientLog], sample: int) -> dict[str, int]:
    found = tried = 0
    for log in logs:
        with httpx.Client(base_url=base, headers={"Authorization": f"Bearer {keys[log.account]}"},
                          timeout=60) as http:
            for temp, text in list(log.written.items())[:sample]:
                marker = text.split("marker ", 1)[1].split(" ", 1)[0]
                hits = http.post(f"/v1/accounts/{log.account}/search", json={"query": marker, "k": 3}).json()["hits"]
                tried += 1
                found += int(any(h["id"] == log.id_map.get(temp) for h in hits))
    return {"tried": tried, "found": found}


def _check_nothing_lost(home: str, logs: list[ClientLog]) -> dict[str, Any]:
    sp = soulpass.open(home, embedder="none")
    committed: dict[str, dict[str, str]] = {}
    for log in logs:
        if log.account not in committed:
            committed[log.account] = {r.id: r.text for r in sp.account(log.account).records("turn_user")}
    written = sum(len(log.written) for log in logs)
    missing = [t for log in logs for t in log.written
               if committed[log.account].get(log.id_map.get(t, "")) != log.written[t]]
    texts = [t for c in committed.values() for t in c.values()]
    return {"acknowledged": written, "committed": len(texts), "missing": len(missing),
            "duplicates": len(texts) - len(set(texts)), "ok": not missing and len(texts) == written}


def _pct(values: list[float], q: float) -> float:
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))] * 1000


def _summary(latencies: list[float], seconds: float, errors: int) -> dict[str, float]:
    return {"requests": len(latencies), "errors": errors, "req_per_s": round(len(latencies) / seconds, 1),
            "p50_ms": round(_pct(latencies, 0.50), 2), "p95_ms": round(_pct(latencies, 0.95), 2),
            "p99_ms": round(_pct(latencies, 0.99), 2),
            "mean_ms": round(statistics.fmean(latencies) * 1000, 2) if latencies else 0.0}


def _run(store: str, work: Path, processes: int, args: argparse.Namespace, mix: list[str]) -> dict[str, Any]:
    """One load against ``processes`` servers over ``store`` (a home folder or a database URL)."""
    sp = soulpass.open(store, embedder="none")
    names = [f"load{i}" for i in range(max(1, args.accounts))]
    for name in names:
        sp.create_account(name)
    keys = {name: key_store(sp).create(name).secret for name in names}
    ports = [_free_port() for _ in range(processes)]
    servers = [_start_server(store, port, args.embedder, work / f"server-{port}.log") for port in ports]
    bases = [f"http://127.0.0.1:{port}" for port in ports]
    try:
        logs = [ClientLog() for _ in range(args.clients)]
        budget = [args.max_requests]
        start = time.monotonic()
        stop_at = start + args.seconds
        threads = [threading.Thread(target=_client, args=(n, bases[n % len(bases)], names[n % len(names)],
                                                          keys[names[n % len(names)]], stop_at, budget, mix,
                                                          logs[n])) for n in range(args.clients)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        elapsed = time.monotonic() - start
        _archive_all(bases[-1], keys, logs)
        spot = _spot_search(bases[0], keys, logs, args.spot_check)
    finally:
        for server in servers:
            server.terminate()
            server.wait(timeout=30)
    check = _check_nothing_lost(store, logs)
    every = [x for log in logs for v in log.latencies.values() for x in v]
    errors = sum(sum(log.errors.values()) for log in logs)
    kinds = sorted({k for log in logs for k in log.latencies})
    return {
        "processes": processes, "accounts": len(names), "elapsed_s": round(elapsed, 2),
        "overall": _summary(every, elapsed, errors),
        "by_kind": {k: _summary([x for log in logs for x in log.latencies.get(k, [])], elapsed,
                                sum(log.errors.get(k, 0) for log in logs)) for k in kinds},
        "archive_s": {"max": round(max(log.archive_s for log in logs), 3),
                      "median": round(statistics.median(log.archive_s for log in logs), 3)},
        "nothing_lost": check, "spot_search": spot,
    }


def _print(title: str, run: dict[str, Any]) -> None:
    print(title)
    print(f"{'kind':<16}{'requests':>10}{'errors':>8}{'req/s':>9}{'p50 ms':>9}{'p95 ms':>9}{'p99 ms':>9}")
    for name, s in [("all", run["overall"]), *run["by_kind"].items()]:
        print(f"{name:<16}{s['requests']:>10}{s['errors']:>8}{s['req_per_s']:>9}{s['p50_ms']:>9}{s['p95_ms']:>9}"
              f"{s['p99_ms']:>9}")
    check, spot = run["nothing_lost"], run["spot_search"]
    print(f"archive per sandbox: median {run['archive_s']['median']} s, max {run['archive_s']['max']} s")
    print(f"nothing lost: {check['ok']} ({check['acknowledged']} acknowledged, {check['committed']} committed, "
          f"{check['missing']} missing, {check['duplicates']} duplicates); "
          f"spot search found {spot['found']}/{spot['tried']}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--accounts", type=int, default=2, help="Clients are spread over this many accounts.")
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--max-requests", type=int, default=200_000, help="Stop after this many in all.")
    parser.add_argument("--mix", default="write*8,search_sandbox,search_account",
                        help="Request kinds in order, 'kind*n' repeats (write, search_sandbox, search_account).")
    parser.add_argument("--embedder", choices=["auto", "none"], default="none")
    parser.add_argument("--spot-check", type=int, default=5, help="Markers per client searched after archive.")
    parser.add_argument("--postgres-processes", default="",
                        help="Also run against this many serve processes over PostgreSQL, e.g. 1,2,4.")
    parser.add_argument("--postgres", default="postgresql://127.0.0.1:5432/test",
                        help="The PostgreSQL server and database (a fresh schema is made in it and dropped).")
    parser.add_argument("--workdir", type=Path, default=None)
    parser.add_argument("--json", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    mix = [kind for part in args.mix.split(",") for kind, _, n in [part.partition("*")] for _ in range(int(n or 1))]
    counts = [int(n) for n in args.postgres_processes.split(",") if n.strip()]
    work = Path(tempfile.mkdtemp(prefix="soulpass-load-", dir=args.workdir))
    postgres: dict[str, Any] = {}
    try:
        files = _run(str(work / "home"), work, 1, args, mix)
        for n in counts:
            url, drop = postgres_schema(args.postgres, work)
            try:
                postgres[str(n)] = _run(url, work, n, args, mix)
            finally:
                drop()
    finally:
        shutil.rmtree(work, ignore_errors=True)

    result: dict[str, Any] = {
        "benchmark": "server_load", "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "machine": {"python": platform.python_version(), "cpus": os.cpu_count(), "platform": platform.platform()},
        "params": {"clients": args.clients, "accounts": files["accounts"], "seconds": args.seconds, "mix": args.mix,
                   "embedder": args.embedder},
        **{k: v for k, v in files.items() if k not in ("processes", "accounts")},
    }
    _print(f"server load: {args.clients} clients on {files['accounts']} account(s), {files['elapsed_s']:.1f} s, "
           f"embedder {args.embedder}, mix {args.mix} (home folder, 1 process)", files)
    if postgres:
        one = postgres.get("1", next(iter(postgres.values())))["overall"]["req_per_s"] or 1.0
        result["postgres"] = postgres
        ratios = {n: round(r["overall"]["req_per_s"] / one, 2) for n, r in postgres.items()}
        result["postgres_throughput_ratio"] = ratios
        for n, run in postgres.items():
            _print(f"PostgreSQL, {n} serve process(es):", run)
        by = ", ".join(f"{n}: {r['overall']['req_per_s']} ({ratios[n]}x)" for n, r in postgres.items())
        print(f"requests/s, PostgreSQL, by processes: {by}; home folder, 1 process: {files['overall']['req_per_s']}")
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    print(f"wrote {args.json}")
    runs = [files, *postgres.values()]
    ok = all(r["nothing_lost"]["ok"] and r["overall"]["errors"] == 0 for r in runs)
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
