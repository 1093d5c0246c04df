"""Stateless API processes (issue 14, item 5): two ``soulpass serve`` processes over one PostgreSQL
serve the same accounts with keys kept in the database; a sandbox opened through one is written and
archived through the other; a key revoked anywhere stops working in both."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from postgres_helpers import postgres_url


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _cli(home: str, *args: str) -> str:
    done = subprocess.run([sys.executable, "-c", "from soulpass.cli.main import main; main()", "--home", home, *args],
                          capture_output=True, text=True, timeout=120, env=_env())
    assert done.returncode == 0, done.stderr
    return done.stdout


def _env() -> dict[str, str]:
    src = str(Path(__file__).resolve().parents[1] / "src")
    return {**os.environ, "SOULPASS_HOME": "", "SOULPASS_ACCOUNT": "", "PYTHONPATH": src}


@pytest.fixture
def two_servers(tmp_path: Path) -> Iterator[tuple[str, list[str]]]:
    for url in postgres_url(tmp_path):
        _cli(url, "account", "create", "ann")
        ports = [_free_port(), _free_port()]
        procs = [subprocess.Popen([sys.executable, "-c", "from soulpass.cli.main import main; main()", "--home", url,
                                   "serve", "--port", str(p), "--embedder", "none"],
                                  env=_env(), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE) for p in ports]
        try:
            bases = [f"http://127.0.0.1:{p}" for p in ports]
            deadline = time.monotonic() + 60
            for base, proc in zip(bases, procs, strict=True):
                while True:
                    try:
                        if httpx.get(f"{base}/openapi.json", timeout=2).status_code == 200:
                            break
                    except httpx.TransportError:
                        pass
                    assert proc.poll() is None, proc.stderr.read().decode() if proc.stderr else "exited"
                    assert time.monotonic() < deadline, "serve did not start"
                    time.sleep(0.1)
            yield url, bases
        finally:
            for proc in procs:
                proc.terminate()
                proc.wait(timeout=30)
                if proc.stderr is not None:
                    proc.stderr.close()


def test_two_processes_share_accounts_keys_and_sandboxes(two_servers: tuple[str, list[str]]) -> None:
    url, (a, b) = two_servers
    key = _cli(url, "key", "create", "ann").split()[0]
    h = {"Authorization": f"Bearer {key}"}
    api_a, api_b = f"{a}/v1/accounts/ann", f"{b}/v1/accounts/ann"
    sid = httpx.post(f"{api_a}/sandboxes", headers=h, json={"name": "chat"}).json()["sandbox_id"]
    assert httpx.post(f"{api_b}/sandboxes/{sid}/turns", headers=h, json={"text": "I moved to Lyon"}).status_code == 201
    assert httpx.post(f"{api_a}/sandboxes/{sid}/turns", headers=h, json={"text": "near the river"}).status_code == 201
    done = httpx.post(f"{api_b}/sandboxes/{sid}/archive", headers=h, json={}).json()
    assert done["status"] == "committed" and done["version"] == 1
    again = httpx.post(f"{api_a}/sandboxes/{sid}/archive", headers=h, json={}).json()
    assert again["status"] == "already_archived" and again["version"] == 1  # one commit, whoever asks
    hits = httpx.post(f"{api_a}/search", headers=h, json={"query": "Lyon"}).json()["hits"]
    assert hits and "Lyon" in hits[0]["text"]
    versions = httpx.get(f"{api_b}/versions", headers=h).json()
    assert [v["version"] for v in versions] == [1]

    listed = _cli(url, "key", "list", "--json")
    assert key.split("_")[1] in listed  # the key lives in the database, not in a local file
    _cli(url, "key", "revoke", key.split("_")[1])
    for api in (api_a, api_b):
        assert httpx.get(f"{api}/versions", headers=h).status_code == 401
