"""Every error is ours (issue 38 item 8): hostile values through the library API raise only
Soulpass errors. A few hundred examples here; ``benchmarks/hostile_inputs.py`` runs ≥ 10,000."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import soulpass
from hostile_helpers import CALLS, World, call_once, deep, hostile
from soulpass.errors import InvalidInput


@pytest.fixture(scope="module")
def hostile_world(tmp_path_factory: pytest.TempPathFactory) -> World:
    return World(tmp_path_factory.mktemp("hostile") / "home")


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                   HealthCheck.too_slow])
@given(data=st.data())
def test_hostile_values_raise_only_soulpass_errors(hostile_world: World, data: st.DataObject) -> None:
    index = data.draw(st.integers(0, len(CALLS) - 1), label="call")
    args: list[Any] = [data.draw(hostile, label=f"arg{i}") for i in range(CALLS[index][1])]
    call_once(hostile_world, index, args)


TAKING_VALUES = [n for n, (_name, count, _call) in enumerate(CALLS) if count]


@pytest.mark.parametrize("index", TAKING_VALUES, ids=[CALLS[n][0] for n in TAKING_VALUES])
def test_every_call_refuses_a_deep_value_as_invalid_input(hostile_world: World, index: int) -> None:
    outcome = call_once(hostile_world, index, [deep(3000)] * CALLS[index][1])
    assert outcome in ("InvalidInput", "NotFound"), outcome


def test_the_world_still_reads(hostile_world: World) -> None:
    assert hostile_world.acct.head() >= 1 and [e.version for e in hostile_world.acct.log()][:1] == [1]


DEEP = "[" * 100_000 + "]" * 100_000


@pytest.mark.parametrize("source", ["chatgpt", "claude", "mem0"])
def test_deep_json_in_an_import_file_is_a_clear_error(tmp_path: Path, source: str) -> None:
    from click.testing import CliRunner

    from soulpass.cli.main import cli

    home = tmp_path / "home"
    soulpass.open(home, embedder="none").create_account("ann")
    export = tmp_path / "deep.json"
    export.write_text(DEEP)
    result = CliRunner().invoke(cli, ["--home", str(home), "import-from", source, str(export), "-a", "ann"])
    assert result.exit_code == InvalidInput.exit_code, result.output
    assert "nested more than 64 levels deep" in result.output and "Traceback" not in result.output


def test_deep_json_in_edit_set_and_a_huge_k_are_clear_errors(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from soulpass.cli.main import cli

    world = World(tmp_path / "home")  # its own: the property test's hostile calls may edit the shared one's turn
    home = str(world.sp.home)
    record = world.ids["@turn"]
    runner = CliRunner()
    edit = runner.invoke(cli, ["--home", home, "edit", record, "-a", "ann", "--set", f"tags={DEEP[:3000]}"])
    assert edit.exit_code == InvalidInput.exit_code and "nested more than 64 levels deep" in edit.output
    search = runner.invoke(cli, ["--home", home, "search", "-a", "ann", "Lyon", "-k", "99999999999999999999"])
    assert search.exit_code == InvalidInput.exit_code and "k must be a positive integer" in search.output


def test_deep_json_over_rest_import_is_a_json_422(client: Any, world: Any) -> None:
    r = client.post("/v1/accounts/ann/import", headers=world.ann.auth, json={"source": "mem0", "content": DEEP})
    assert r.status_code == 422 and "nested more than 64 levels deep" in r.json()["message"]


def test_a_storage_failure_is_backend_unavailable_naming_the_file(tmp_path: Path) -> None:
    """An OSError (here: the home is a file, not a folder) reaches the caller as ours."""
    home = tmp_path / "not-a-folder"
    home.write_text("x")
    with pytest.raises(soulpass.BackendUnavailable, match="not-a-folder") as caught:
        soulpass.open(home, embedder="none").create_account("ann")
    assert not isinstance(caught.value, soulpass.StorageFull) and caught.value.details["errno"] == "ENOTDIR"
