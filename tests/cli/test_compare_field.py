"""`--compare field` in `simulate`, `sweep` and `whatif`: every field preset under its own
name (its column, its log, its `policy`), then `per-episode` and `all`."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from rolloutlog.cli.main import main
from rolloutlog.cli.policies import parse_policies
from rolloutlog.cli.sim_report import _folded
from rolloutlog.core.presets import FIELD, FieldPreset, field_set
from rolloutlog.runs.simulate import policy_name, run_policy
from rolloutlog.runtime.sim.scenario import load_scenario
from rolloutlog.studies.grid import expand

# Rules no named preset has, under new names, as other stacks' rows would be.
ROWS: dict[str, dict[str, Any]] = {
    "stack-a": {"staleness": "per-group", "admission": "capacity"},
    "stack-b": {"staleness": "per-group", "straggler_cut": True},
    "stack-c": {"staleness": "per-group", "batch_order": "oldest-first"},
}
FIELD_SET = [*ROWS, "per-episode", "all"]


@pytest.fixture
def field() -> Iterator[None]:
    """`FIELD` holding exactly `ROWS` (the real rows put back after)."""
    saved = dict(FIELD)
    FIELD.clear()
    FIELD.update(
        {name: FieldPreset(f"org/{name}@abc1234 a.py", keys) for name, keys in ROWS.items()}
    )
    yield
    FIELD.clear()
    FIELD.update(saved)


@pytest.mark.parametrize("command", ["simulate", "sweep", "whatif"])
def test_each_command_that_takes_a_list_says_what_field_runs(command: str) -> None:
    result = CliRunner().invoke(main, [command, "--help"], terminal_width=200)
    shown = "".join(result.output.split())  # however click wraps the help (at hyphens too)
    assert "".join(f"'field' runs the field's set: {', '.join(field_set())}".split()) in shown


@pytest.mark.usefixtures("field")
def test_a_field_preset_runs_under_its_own_name_with_or_without_rules() -> None:
    base = load_scenario("smoke")
    for name in [*ROWS, "stack-a+oldest-first", "per-group", "per-episode+oldest-first"]:
        assert policy_name(base.with_policy(name)) == name


@pytest.mark.usefixtures("field")
def test_simulate_compare_field_runs_each_preset_with_its_own_log(tmp_path: Path) -> None:
    log = tmp_path / "run.arrow"
    args = ["simulate", "--scenario", "smoke", "--steps", "3", "--compare", "field"]
    result = CliRunner().invoke(main, [*args, "--log", str(log), "--json"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert list(report) == FIELD_SET
    assert [run["policy"] for run in report.values()] == FIELD_SET
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        f"run.{name}.arrow" for name in FIELD_SET
    )
    shown = CliRunner().invoke(main, args).stdout
    assert "metric" not in shown  # five presets: the table turned
    assert all(f"\n{name} " in shown for name in FIELD_SET)


@pytest.mark.usefixtures("field")
def test_sweep_compare_field_makes_a_cell_per_preset() -> None:
    cells = expand(["smoke"], parse_policies("field", "--compare"), [0, 1], {}, 2)
    assert [cell.preset for cell in cells] == [p for p in FIELD_SET for _ in (0, 1)]
    assert {policy_name(cell.scenario()) for cell in cells} == set(FIELD_SET)


@pytest.mark.usefixtures("field")
def test_whatif_compare_field_reports_the_recorded_run_beside_each_preset(
    tmp_path: Path,
) -> None:
    log = tmp_path / "run.arrow"
    run_policy(load_scenario("smoke").with_steps(3).with_policy("stack-a"), log_path=log)
    report = json.loads(CliRunner().invoke(main, ["whatif", str(log), "--json"]).stdout)
    assert report["recorded"]["policy"] == "stack-a"
    assert list(report["policies"]) == ["stack-a"]  # the recorded policy, re-run by name
    result = CliRunner().invoke(main, ["whatif", str(log), "--compare", "field"])
    assert result.exit_code == 0, result.output
    assert "metric" not in result.stdout
    assert all(f"\n{name} " in result.stdout for name in ["recorded", *FIELD_SET])


def test_a_long_preset_name_folds_after_a_hyphen_or_before_a_rule() -> None:
    assert _folded("verl-fully-async", 12) == "verl-fully-\nasync"
    assert _folded("prime-rl-withhold", 12) == "prime-rl-\nwithhold"
    assert _folded("per-episode+straggler", 12) == "per-episode\n+straggler"
    assert _folded("tinker-822", 12) == "tinker-822"
