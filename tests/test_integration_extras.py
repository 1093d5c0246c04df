"""An adapter imported without its framework says which extra to install."""

from __future__ import annotations

import importlib
import sys

import pytest

from soulpass import BackendUnavailable


@pytest.mark.parametrize(("module", "framework", "extra"), [
    ("langgraph", "langgraph", "langgraph"),
    ("openai_agents", "agents", "openai-agents"),
    ("pydantic_ai", "pydantic_ai", "pydantic-ai"),
])
def test_a_missing_framework_names_the_extra(module: str, framework: str, extra: str,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    for name in [m for m in sys.modules if m == framework or m.startswith(framework + ".")]:
        monkeypatch.setitem(sys.modules, name, None)  # as if not installed (restored afterwards)
    monkeypatch.setitem(sys.modules, framework, None)
    monkeypatch.delitem(sys.modules, f"soulpass.integrations.{module}", raising=False)
    with pytest.raises(BackendUnavailable, match=rf"pip install 'soulpass\[{extra}\]'") as caught:
        importlib.import_module(f"soulpass.integrations.{module}")
    assert caught.value.details["extra"] == extra
