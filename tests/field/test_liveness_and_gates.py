"""The liveness exception and the gate as rows of the rule table, one per preset; a config a
faithful preset cannot progress under is refused at start, and a run that starves stops
with one line naming the rule that starves it.

Each preset's row is its source's (docs/policies.md): the sources of `areal`, `roll-flash`,
`tinker-822`, `verl-fully-async`, `verl-wait` and `verl-drop` wait where rolloutlog's
exception would open a group; only `prime-rl`, slime's synchronous loop and verl's v1 loop
have a dispatch gate.
"""

from __future__ import annotations

import pytest

from rolloutlog.core.config import ConfigError, RunConfig
from rolloutlog.core.presets import FIELD, preset_overrides, rules_for
from rolloutlog.core.rules import admission, admission_field
from rolloutlog.core.state import TrainLedger
from rolloutlog.runtime.sim.scenario import load_scenario, scenario_names
from rolloutlog.runtime.sim.simulation import SimulationBoundError, simulate
from tests.invoke import one_line_error, run

NO_LIVENESS = {"areal", "roll-flash", "tinker-822", "verl-fully-async", "verl-wait", "verl-drop"}
NO_GATE = {
    "areal",
    "roll-flash",
    "tinker",
    "tinker-822",
    "verl-fully-async",
    "slime-lag",
    "pipelinerl",
}


def _config(preset: str, **keys: object) -> RunConfig:
    return RunConfig.from_mapping({**preset_overrides(preset), **keys})


@pytest.mark.parametrize("preset", list(FIELD))
def test_each_preset_carries_its_sources_exception_and_gate(preset: str) -> None:
    config = _config(preset)
    rules = rules_for(config)
    assert config.liveness == (preset not in NO_LIVENESS)
    gate = rules.gate(rules.lag(config))
    assert (gate < admission.NO_LAG) == (preset not in NO_GATE)


def test_without_the_exception_an_idle_run_opens_nothing_past_its_rule() -> None:
    """Nothing open and AReaL's capacity spent (2 groups accepted of (0 + 0 + 1) x 2): the
    preset opens nothing; with the exception set, one group of 4."""
    ledger = TrainLedger(accepted=8)
    for liveness, allowed in ((False, 0), (True, 4)):
        config = _config(
            "areal", group_size=4, batch_size=8, max_off_policy_steps=0, liveness=liveness
        )
        rules = rules_for(config)
        left = rules.allowance(config, ledger, 0)
        assert left == 0
        assert rules.live(left, rules.idle_floor(config, ledger, 0)) == allowed


@pytest.mark.parametrize("preset", sorted(NO_LIVENESS - {"verl-wait", "verl-drop"}))
def test_batches_that_are_not_whole_groups_are_refused_at_start(preset: str) -> None:
    """`admission` counts ⌊B/G⌋ groups a batch, its source trains whole groups: without the
    exception batches of 10 from groups of 4 would starve."""
    with pytest.raises(ConfigError) as refused:
        _config(preset, group_size=4, batch_size=10, max_off_policy_steps=0)
    assert str(refused.value).startswith("liveness: false with admission = ")
    assert "(batch_size 10, group_size 4)" in str(refused.value)
    _config(preset, group_size=4, batch_size=8, max_off_policy_steps=0)  # whole groups start
    _config(preset, group_size=4, batch_size=10, liveness=True)  # with the exception too


def test_verl_keeps_two_batches_out_whatever_the_bound() -> None:
    """verl's warmup batch and the step's (`outstanding_depth = 1`), even at bound 0, where
    `target_lag` is 0: two batches of 2 groups, so part groups start too."""
    config = _config("verl-wait", group_size=4, batch_size=10, max_off_policy_steps=0)
    assert config.target_lag == 0
    assert admission_field.outstanding_cap(config, 10) == 4


def test_a_refused_config_is_one_line_at_start() -> None:
    result = run(
        "simulate", "--scenario", "smoke", "--steps", "2", "--policy", "areal",
        "--set", "group_size=4", "--set", "batch_size=10",
    )  # fmt: skip
    assert result.exit_code == 2
    assert "liveness: false with admission = 'areal' needs batches of whole groups" in (
        one_line_error(result)
    )


def test_a_run_that_starves_stops_naming_the_rule() -> None:
    """rolloutlog's own capacity admission without the exception: a group of 8 larger than
    the room at bound 0 never finalizes, so no batch ever fills."""
    result = run(
        "simulate", "--scenario", "smoke", "--steps", "3", "--policy", "per-episode+capacity",
        "--set", "group_size=8", "--set", "batch_size=2", "--set", "max_inflight=8",
        "--set", "max_off_policy_steps=0", "--set", "target_lag=0", "--set", "liveness=false",
    )  # fmt: skip
    assert result.exit_code == 2
    error = result.stderr.splitlines()[-1]
    assert error.startswith("rolloutlog: error: scenario 'smoke', ")
    assert "admission = 'capacity' lets no train episode out" in error
    assert "no liveness exception (liveness)" in error
    assert error.endswith("the run makes no progress")


def test_capacity_without_the_exception_names_the_rule() -> None:
    """rolloutlog's own capacity admission, the exception off: a group larger than the room
    (8 members, room for 2 at bound 0) never finalizes."""
    setup = load_scenario("smoke").with_steps(3).with_policy("per-episode+capacity")
    setup = setup.with_run(
        group_size=8,
        batch_size=2,
        max_inflight=8,
        max_off_policy_steps=0,
        target_lag=0,
        liveness=False,
    )
    with pytest.raises(SimulationBoundError, match="admission = 'capacity' lets no train"):
        simulate(setup)


@pytest.mark.parametrize("scenario", scenario_names())
@pytest.mark.parametrize("preset", sorted(NO_LIVENESS | NO_GATE))
def test_the_changed_presets_run_each_built_in_scenario(scenario: str, preset: str) -> None:
    """Every built-in scenario, a few steps: none starves (the full length: the report)."""
    base = load_scenario(scenario)
    if preset == "pipelinerl" and (base.run.batch_size or 0) > 128:
        pytest.skip("pipelinerl's ring buffer of 128 is smaller than this scenario's batch")
    setup = base.with_policy(preset).with_steps(5)
    result = simulate(setup)
    assert result.finished_reason == "steps"
