"""What the `whatif` tests share: a recorded log of a built-in scenario, and the figures
a what-if run is held to."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rolloutlog.runs.simulate import run_policy
from rolloutlog.runtime.sim.scenario import Scenario, load_scenario

FIGURES = ("finished_rollouts_discarded", "trained_episodes_per_hour", "mean_trained_age")


def independent_scenario(name: str, overrides: Mapping[str, Any] | None = None) -> Scenario:
    """A built-in scenario in the independent world: a what-if replays recorded durations,
    which is that world's truth (the built-in scenarios share inference by default)."""
    return load_scenario(name, {"world.inference": "independent", **(overrides or {})})


def relative_errors(got: dict, want: dict) -> dict[str, float]:
    return {k: abs(got[k] - want[k]) / abs(want[k]) for k in FIGURES}


def recorded_log(tmp_path, scenario: str, policy: str, steps: int):
    """Simulate `policy` on a built-in scenario, writing its log; (log path, report)."""
    path = tmp_path / f"{scenario}.{policy}.arrow"
    truth = independent_scenario(scenario).with_steps(steps).with_policy(policy)
    report, _ = run_policy(truth, log_path=path)
    return path, report
