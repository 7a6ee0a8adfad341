"""benchmarks/policies.py on a tiny budget: the field's set and rolloutlog's presets, each
a row of the turned table per scenario, the means and ranges of its seeds' runs."""

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


def test_a_tiny_run_prints_a_turned_table_per_scenario_in_80_columns(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(FIELD, "stack", STACK)
    policies.main(["--seeds", "2", "--steps", "2", "--scenarios", "smoke,chaos"])
    lines = capsys.readouterr().out.splitlines()
    assert max(map(len, lines)) <= 80
    for scenario in ("smoke", "chaos"):
        assert any(line.startswith(f"{scenario} (max_off_policy_steps = ") for line in lines)
    for preset in ("stack", "all", "per-group"):  # short, and no other row starts so
        rows = [line.split() for line in lines if line.split()[:1] == [preset]]
        assert [len(row) for row in rows] == [9, 3, 9, 3]  # the means, then the ranges
    verdicts = [line for line in lines if "rolloutlog's best preset" in line]
    assert [line.split(":")[0] for line in verdicts] == ["smoke", "chaos"]
    count = len(policies.presets())
    assert lines[-1].startswith(f"{count} presets x 2 seeds x 2 steps per scenario")


def test_presets_named_on_the_command_line_run_instead(capsys: pytest.CaptureFixture[str]) -> None:
    policies.main(["--seeds", "1", "--steps", "2", "--scenarios", "smoke", "--presets", "all"])
    out = capsys.readouterr().out
    assert "rolloutlog's best preset" not in out  # no per-episode to hold all against
    assert out.splitlines()[-1].startswith("1 presets x 1 seeds")
