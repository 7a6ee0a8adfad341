"""benchmarks/policies.py on a tiny budget: the field's set and rolloutlog's presets, each
a row of one markdown table per scenario, the means and ranges of its seeds' runs."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

import pytest

from rolloutlog.core.presets import FIELD, NAMED, FieldPreset

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"
sys.path.insert(0, str(BENCHMARKS))  # as `python benchmarks/policies.py` has it
policies = importlib.import_module("policies")
STACK = FieldPreset("org/stack@abc1234 a.py", {"staleness": "per-group", "admission": "capacity"})


def test_the_presets_are_the_field_set_then_the_named_ones_it_lacks(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(FIELD, "stack", STACK)
    assert policies.presets() == [
        *FIELD, "per-episode", "all", "per-group", "per-episode+capacity", "per-episode+straggler"
    ]  # fmt: skip
    assert set(NAMED) <= set(policies.presets())


def test_seeds_merge_into_means_with_max_figures_the_largest() -> None:
    reports = [
        {"a": 1, "max_trained_age": 2, "flag": True, "name": "x", "b": None},
        {"a": 4, "max_trained_age": 3, "flag": False, "name": "y", "b": 1.0},
    ]
    assert policies.over_seeds(reports) == {"a": 2.5, "max_trained_age": 3}


def test_a_tiny_run_prints_a_markdown_table_per_scenario_with_progress_on_stderr(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(FIELD, "stack", STACK)
    policies.main(["--seeds", "2", "--steps", "2", "--scenarios", "smoke,chaos"])
    captured = capsys.readouterr()
    lines = captured.out.splitlines()
    count = len(policies.presets())
    for scenario in ("smoke", "chaos"):
        assert any(line.startswith(f"**{scenario}** (`max_off_policy_steps = ") for line in lines)
    header = [line for line in lines if line.startswith("| policy |")]
    assert len(header) == 2
    columns = header[0].count("|") - 1
    assert columns == 3 + len(policies.COLUMNS)
    for preset in ("stack", "all", "per-group"):
        rows = [line for line in lines if line.startswith(f"| `{preset}` |")]
        assert [row.count("|") - 1 for row in rows] == [columns, columns]
        assert all(" – " not in row.split("|")[2] for row in rows)  # trained/h: mean (range)
    verdicts = [line for line in lines if "rolloutlog's best preset" in line]
    assert [line.split(":")[0] for line in verdicts] == ["smoke", "chaos"]
    assert lines[-1].startswith(f"{count} presets x 2 seeds x 2 steps per scenario, 2 scenarios")
    progress = captured.err.splitlines()
    assert len(progress) == 2 * count
    assert progress[0].startswith(f"[1/{2 * count}] smoke prime-rl: 2 seeds in ")


def test_the_figures_only_some_rules_have_show_as_a_dash_elsewhere() -> None:
    run = {"episodes_trained": 10, "episodes_trained_past_bound": 0, "ship_waits": 3}
    shows = dict(policies.COLUMNS)
    assert shows["withheld"](run) == "–"
    assert shows["past bound"](run) == "0.0%"
    assert shows["past bound"]({**run, "episodes_trained": 0}) == "–"
    assert shows["ship waits"]({**run, "ship_wait_seconds": 90.0}) == "3 (1.50 min)"


def test_presets_named_on_the_command_line_run_instead(capsys: pytest.CaptureFixture[str]) -> None:
    policies.main(["--seeds", "1", "--steps", "2", "--scenarios", "smoke", "--presets", "all"])
    out = capsys.readouterr().out
    assert "rolloutlog's best preset" not in out  # no per-episode to hold all against
    assert out.splitlines()[-1].startswith("1 presets x 1 seeds")
