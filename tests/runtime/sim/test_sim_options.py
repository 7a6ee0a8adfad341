"""`simulate --policy/--compare` with `--set`: an explicit `--set` wins over a preset, the
report names the policy actually run, and presets that `--set` makes equal are refused."""

from __future__ import annotations

import json

from click.testing import CliRunner, Result

from rolloutlog.cli.simulate import simulate_command

SHORT = ("--scenario", "smoke", "--steps", "1", "--json")


def invoke(*args: str) -> Result:
    return CliRunner().invoke(simulate_command, [*SHORT, *args], catch_exceptions=False)


def test_set_wins_over_the_preset_and_the_report_names_the_policy_run() -> None:
    result = invoke("--policy", "per-episode", "--set", "straggler_cut=true")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["policy"] == "per-episode+straggler"
    assert "--set straggler_cut=true wins over preset per-episode" in result.stderr


def test_compare_runs_each_preset_with_the_set_applied() -> None:
    result = invoke("--compare", "per-episode,per-group", "--set", "straggler_cut=true")
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert list(report) == ["per-episode+straggler", "per-group+straggler"]
    assert [run["policy"] for run in report.values()] == list(report)


def test_presets_that_set_makes_one_policy_are_refused_naming_both() -> None:
    result = invoke("--compare", "per-episode,per-episode+straggler", "--set", "straggler_cut=true")
    assert result.exit_code == 2
    assert "presets per-episode and per-episode+straggler both run" in result.output


def test_a_set_that_does_not_touch_the_preset_changes_nothing_in_its_name() -> None:
    result = invoke("--policy", "per-group", "--set", "group_size=2")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["policy"] == "per-group" and "note" not in result.stderr


def test_presets_that_name_one_policy_in_two_rule_orders_are_refused_without_a_set() -> None:
    result = invoke("--compare", "per-episode+straggler+capacity,per-episode+capacity+straggler")
    assert result.exit_code == 2
    assert result.output.rstrip().endswith("both run per-episode+capacity+straggler")
    alone = invoke("--policy", "per-episode+straggler+capacity")
    assert alone.exit_code == 0, alone.output
    assert "note:" not in alone.output  # no --set won over anything
