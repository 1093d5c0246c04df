"""The process ``cold_open.py`` times: what a user's one-question script does, and nothing else.

    python benchmarks/cold_open_child.py HOME QUERIES.npy MODEL_ID ACCOUNT

Imports numpy and Soulpass, opens HOME and its account ACCOUNT with an embedder that hands back
the first vector of QUERIES.npy (the query vector is given: no model), runs one ``Account.search``
and prints, as one JSON line, the seconds from the interpreter's start (``COLD_OPEN_T0``, the
parent's clock when it started this process) to the end of each step. Kept apart from
``cold_open.py`` so the measured process imports none of the benchmark's own modules (argparse,
subprocess, the hybrid builder): they are not what opening an account costs.
"""

import os
import sys
import time

start = time.perf_counter() - (time.time() - float(os.environ["COLD_OPEN_T0"]))

import numpy as np  # noqa: E402

import soulpass  # noqa: E402

QUERY = "what did they say about the plan?"


class GivenVector:
    """An ``Embedder`` whose every text is the one query vector it was given."""

    def __init__(self, model_id: str, vector: np.ndarray) -> None:  # type: ignore[type-arg]
        self.model_id, self.dim, self._vector = model_id, int(vector.shape[0]), vector

    def embed_batch(self, texts: list[str]) -> np.ndarray:  # type: ignore[type-arg]
        if any(text != QUERY for text in texts):  # the account has records to embed: not a cold open
            raise ValueError(f"only the query has a vector here, asked for {len(texts)} texts")
        return np.repeat(self._vector[None, :], len(texts), axis=0)


def main(home: str, queries: str, model_id: str, account: str) -> None:
    at = {"import": time.perf_counter() - start}
    embedder = GivenVector(model_id, np.asarray(np.load(queries, mmap_mode="r")[0], dtype=np.float32))
    t0 = time.perf_counter()
    acct = soulpass.open(home, embedder=embedder).account(account)
    at["open"] = time.perf_counter() - t0
    t1 = time.perf_counter()
    hits = acct.search(QUERY, 10)
    at["first_result"] = time.perf_counter() - t1
    at["total"] = at["import"] + at["open"] + at["first_result"]
    at["hits"] = len(hits)
    import json

    print(json.dumps(at))


if __name__ == "__main__":
    main(*sys.argv[1:5])
