"""``soulpass worker``: the embedding "muscle" of seed 004 (Volition 7.0) serving ``queue:gpu_heavy``.

An entry point (like the CLI and the server): it may read the environment. Start one with
``soulpass worker --redis redis://host:6379/0`` or ``python -m soulpass.worker --redis …``.
"""

from soulpass.worker.loop import Worker, WorkerSettings
from soulpass.worker.serve import serve

__all__ = ["Worker", "WorkerSettings", "serve"]
