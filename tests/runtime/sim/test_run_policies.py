"""`runs.simulate.run_policies`, the loop `simulate --compare` and `whatif` share: each
policy is the run it would be alone, and a run that fails is named by the error it raises,
the logs of the runs before it kept."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from rolloutlog.replay.source import open_log
from rolloutlog.replay.verify import verify_log
from rolloutlog.runs.simulate import OnStep, PolicyRunError, run_policies, run_policy
from rolloutlog.runtime.sim import simulation
from rolloutlog.runtime.sim.scenario import Scenario, load_scenario, parse_set_options
from rolloutlog.runtime.sim.simulation import SimulationBoundError


def _policies(steps: int) -> dict[str, Scenario]:
    base = load_scenario("smoke").with_steps(steps)
    return {name: base.with_policy(name) for name in ("per-episode", "per-group")}


def test_each_policy_runs_as_it_would_alone_and_is_shown_step_by_step() -> None:
    policies = _policies(3)
    shown: list[tuple[str, int]] = []

    @contextmanager
    def watch(name: str, scenario: Scenario) -> Iterator[OnStep]:
        assert scenario is policies[name]
        shown.append((name, 0))
        yield lambda step: shown.append((name, step))

    runs = run_policies(policies, watch=watch)
    assert list(runs.reports) == list(policies)
    for name, scenario in policies.items():
        alone, result = run_policy(scenario)
        assert runs.reports[name] == alone
        assert runs.series[name] == result.wasted_series
    assert shown == [(name, step) for name in policies for step in range(4)]


def test_a_failed_run_is_named_and_the_logs_before_it_are_kept(tmp_path: Path) -> None:
    policies = _policies(2)
    logs = {name: tmp_path / f"run.{name}.arrow" for name in policies}
    logs["per-group"].mkdir()  # its log cannot be written
    with pytest.raises(PolicyRunError) as failed:
        run_policies(policies, log_paths=logs)
    assert (failed.value.name, failed.value.log_path) == ("per-group", logs["per-group"])
    assert isinstance(failed.value.error, IsADirectoryError)
    assert verify_log(open_log(logs["per-episode"])).ok


def test_a_run_that_makes_no_progress_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    # the bound lowered from 200,000 world events, which took 20 s to reach
    monkeypatch.setattr(simulation, "WORLD_EVENTS_PER_STEP_MAX", 2_000)
    stuck = load_scenario("smoke", parse_set_options(["batch_size=1000000"])).with_steps(1)
    with pytest.raises(PolicyRunError) as failed:
        run_policies({"stuck": stuck})
    assert failed.value.scenario is stuck
    assert isinstance(failed.value.error, SimulationBoundError)
