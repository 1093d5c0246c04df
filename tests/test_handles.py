"""Several handles on one account: in one process (they share the open vector index) and across
processes (``soulpass search`` while a server holds the account: the second process reads)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import zlib
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

import soulpass
from soulpass.cli.main import cli
from soulpass.embed.base import Vectors
from soulpass.vectors import SharedIndex

WORDS = 64


class BagOfWords:
    """A tiny deterministic embedder: one dimension per hashed word."""

    model_id = "test/bag-of-words"
    dim = WORDS

    def embed_batch(self, texts: Sequence[str]) -> Vectors:
        out = np.zeros((len(texts), WORDS), dtype=np.float32)
        for row, text in enumerate(texts):
            for word in text.lower().split():
                out[row, zlib.crc32(word.encode()) % WORDS] += 1.0
            out[row, 0] += 1e-3  # never a zero vector
        out /= np.linalg.norm(out, axis=1, keepdims=True)
        return out


def _remember(acct: soulpass.Account, *texts: str) -> None:
    sb = acct.create_sandbox("notes")
    for text in texts:
        sb.add_turn("user", text)
    assert isinstance(sb.archive(), soulpass.Committed)


def _top(acct: soulpass.Account, query: str) -> str:
    return acct.search(query, 1)[0].text


def test_two_handles_in_one_process(tmp_path: Path) -> None:
    first = soulpass.open(tmp_path, embedder=BagOfWords()).account("ann", create=True)
    _remember(first, "herons wade in the shallow tide", "the kettle is on the stove")
    assert "herons" in _top(first, "heron tide")
    second = soulpass.open(tmp_path, embedder=BagOfWords()).account("ann")  # e.g. the CLI beside a server
    assert "kettle" in _top(second, "kettle stove")
    _remember(second, "the lighthouse keeper counts ships at dusk")
    assert "lighthouse" in _top(first, "lighthouse ships")  # the first handle sees the second's commit
    vectors = first.index().vectors
    assert vectors is not None and vectors.count() == 3
    second.close()
    assert "lighthouse" in _top(first, "lighthouse ships")  # closing one handle leaves the other open
    first.close()


def test_one_handle_shared_by_threads(tmp_path: Path) -> None:
    acct = soulpass.open(tmp_path, embedder=BagOfWords()).account("ann", create=True)
    _remember(acct, *(f"note {i} about herons" for i in range(20)))
    errors: list[BaseException] = []

    def search() -> None:
        try:
            for _ in range(5):
                assert acct.search("herons", 5)
        except BaseException as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=search) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    acct.close()


def test_cli_search_while_another_handle_is_open(tmp_path: Path) -> None:
    pytest.importorskip("onnxruntime", reason="the 'embed' extra is not installed")
    from soulpass.embed.minilm import MiniLM

    minilm = MiniLM(threads=1)  # the CLI's embedder ("auto"): the same vector folder
    held = soulpass.open(tmp_path, embedder=minilm).account("ann", create=True)  # like `soulpass serve`
    _remember(held, "herons wade in the shallow tide")
    held.search("heron")  # the held handle's vector index is open and embedded
    _remember(held, "the lighthouse keeper counts ships at dusk")  # committed, not embedded yet
    args = ["--home", str(tmp_path), "search", "-a", "ann", "--json"]
    # In this process: the CLI's handle shares the open index.
    result = CliRunner().invoke(cli, [*args, "heron tide"])
    assert result.exit_code == 0, result.output
    assert "herons" in json.loads(result.output)[0]["text"]
    # In another process: it reads the index the held handle writes, and finds the new record by full text.
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    code = "from soulpass.cli.main import main; main()"
    proc = subprocess.run([sys.executable, "-c", code, *args, "lighthouse ships"], capture_output=True,
                          text=True, env=env, timeout=300, check=False)
    assert proc.returncode == 0, proc.stderr
    hits = json.loads(proc.stdout)
    assert "lighthouse" in hits[0]["text"] and any("herons" in h["text"] for h in hits)
    held.close()


def test_after_the_holder_closes_a_new_handle_writes(tmp_path: Path) -> None:
    held = soulpass.open(tmp_path, embedder=BagOfWords()).account("ann", create=True)
    _remember(held, "herons wade in the shallow tide")
    held.search("heron")
    held.close()
    again = soulpass.open(tmp_path, embedder=BagOfWords()).account("ann")
    _remember(again, "the lighthouse keeper counts ships at dusk")
    assert "lighthouse" in _top(again, "lighthouse ships")
    vectors = again.index().vectors
    assert isinstance(vectors, SharedIndex) and not vectors.read_only and vectors.count() == 2
    again.close()

