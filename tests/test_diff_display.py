"""What a person changed, in the CLI's diff (issue 40, item 13): the knowledge graph's own files
are one flag away; the library's diff and ``--json`` keep everything."""

from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner

import soulpass
from soulpass.cli.main import cli
from soulpass.consolidation.internals import personal_diff
from ui_world import seed


def test_the_cli_diff_hides_the_graphs_files_until_asked(tmp_path: Path) -> None:
    world = seed(tmp_path / "home")
    runner = CliRunner()
    base = ["--home", str(world.home), "diff", "-a", "maya", "1", "2"]
    shown = runner.invoke(cli, base, env={"COLUMNS": "200"})
    assert shown.exit_code == 0, shown.output
    assert world.new_fact in shown.output and f"{world.old_fact} by {world.new_fact}" in shown.output
    assert "fact_refs" not in shown.output and "Genesis_Knowledge_System" not in shown.output
    assert "internal changes of the knowledge graph's files hidden (--internal lists them)" in shown.output
    everything = runner.invoke(cli, [*base, "--internal"], env={"COLUMNS": "200"})
    assert "fact_refs" in everything.output and "hidden" not in everything.output
    as_json = runner.invoke(cli, [*base, "--json"])
    assert "fact_refs" in as_json.output


def test_personal_diff_keeps_every_change_a_person_made(tmp_path: Path) -> None:
    world = seed(tmp_path / "home")
    acct = soulpass.open(world.home, embedder="none").account("maya")
    full = acct.diff(1, 2).to_json()
    mine, hidden = personal_diff(full)
    assert mine["added"] == full["added"] and mine["superseded"] == full["superseded"]
    files = {d["path"] for d in full["documents"]} | set(full["replaced"])
    assert mine["documents"] == [] and mine["replaced"] == [] and hidden == len(files) == 5  # graph: 4, old fact: 1
    edit = acct.edit(world.turn_id, text_excerpt="I adopted a grey cat named Pixel", reason="typo")
    edited, none_hidden = personal_diff(acct.diff(edit - 1, edit).to_json())
    assert none_hidden == 0 and [Path(p).stem for p in edited["replaced"]] == [world.turn_id]


def test_index_status_counts_records_a_person_keeps(tmp_path: Path) -> None:
    world = seed(tmp_path / "home")
    runner = CliRunner()
    base = ["--home", str(world.home), "index", "status", "-a", "maya"]
    plain = runner.invoke(cli, base, env={"COLUMNS": "200"})
    assert plain.exit_code == 0 and "in force: turn_user" in plain.output and "gks" not in plain.output
    assert "in force: gks" in runner.invoke(cli, [*base, "--internal"], env={"COLUMNS": "200"}).output
