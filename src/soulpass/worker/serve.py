"""Start a worker process: connect, load the model, serve until SIGTERM."""

from __future__ import annotations

import logging
from typing import Literal

from soulpass.embed.base import Embedder
from soulpass.embed.redis_queue import connect
from soulpass.embed.wire import QueueNames
from soulpass.errors import BackendUnavailable
from soulpass.worker.loop import Worker, WorkerSettings

__all__ = ["Device", "providers_for", "serve"]

Device = Literal["auto", "cpu", "cuda"]


def providers_for(device: Device) -> tuple[str, ...]:
    """ONNX Runtime providers for ``device``: "cuda" needs onnxruntime-gpu; "auto" uses it when present."""
    if device == "cpu":
        return ("CPUExecutionProvider",)
    try:
        import onnxruntime as ort  # type: ignore[import-untyped,import-not-found,unused-ignore]
    except ImportError:
        return ("CPUExecutionProvider",)  # MiniLM() then names the missing extra
    available = set(ort.get_available_providers())
    if "CUDAExecutionProvider" in available:
        return ("CUDAExecutionProvider", "CPUExecutionProvider")
    if device == "cuda":
        raise BackendUnavailable(f"device cuda: ONNX Runtime offers only {sorted(available)} "
                                 "(install onnxruntime-gpu)", providers=sorted(available))
    return ("CPUExecutionProvider",)


def serve(url: str, *, names: QueueNames | None = None, settings: WorkerSettings | None = None,
          threads: int = 2, device: Device = "auto", embedder: Embedder | None = None,
          worker_id: str | None = None) -> Worker:
    """Serve the queue at ``url`` with ``embedder`` (default: the embedded MiniLM on ``threads`` threads,
    on the GPU when ``device`` is "cuda", or "auto" and ONNX Runtime offers CUDA) until SIGTERM/SIGINT;
    returns the stopped worker (its ``counts``)."""
    if embedder is None:
        from soulpass.embed.minilm import MiniLM

        embedder = MiniLM(threads=threads, providers=providers_for(device))
    worker = Worker(connect(url), embedder, names, settings, worker_id)
    worker.install_signal_handlers()
    logging.getLogger(__name__).info("worker %s: model %s (%d-d) on %s", worker.worker_id, embedder.model_id,
                                     embedder.dim, url)
    worker.run()
    return worker
