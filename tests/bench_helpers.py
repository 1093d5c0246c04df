"""Loading a script of ``benchmarks/`` as a module, and a home ``soulpass bench locomo`` filled, for the
benchmarks' smoke tests."""

from __future__ import annotations

import importlib.util
import json
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import ModuleType
from typing import Any

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"


@contextmanager
def benchmark_module(name: str) -> Iterator[ModuleType]:
    """``benchmarks/<name>.py`` as the module ``soulpass_bench_<name>``: registered in ``sys.modules``
    while the block runs (dataclasses look their module up), removed afterwards; ``benchmarks/`` is
    on ``sys.path`` meanwhile, for the scripts' shared modules (``scale_common``, ``pg_common``…)."""
    spec = importlib.util.spec_from_file_location(f"soulpass_bench_{name}", BENCHMARKS / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    sys.path.insert(0, str(BENCHMARKS))
    try:
        spec.loader.exec_module(module)
        yield module
    finally:
        sys.modules.pop(spec.name, None)
        sys.path.remove(str(BENCHMARKS))


def ingested(tmp_path: Path, conversations: list[dict[str, Any]]) -> Path:
    """``conversations`` (the LoCoMo layout) written to ``tmp_path/locomo.json`` and ingested by
    ``soulpass bench locomo`` into the home ``tmp_path/home``, one account each: the data file."""
    from click.testing import CliRunner

    from soulpass.cli.main import cli

    data = tmp_path / "locomo.json"
    data.write_text(json.dumps(conversations), encoding="utf-8")
    res = CliRunner().invoke(cli, ["--home", str(tmp_path / "home"), "bench", "locomo", "--data", str(data),
                                   "--out", str(tmp_path / "bench.json")])
    assert res.exit_code == 0, res.output
    return data
