"""Scenarios: the built-ins load, overrides resolve against both tables, refusals name keys."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from rolloutlog.core.config import ConfigError
from rolloutlog.runtime.sim.scenario import (
    load_scenario,
    parse_set_options,
    resolve_overrides,
    scenario_names,
)


def test_the_built_in_scenarios_are_there_and_valid() -> None:
    assert {"default", "tight", "loose", "smoke"} <= set(scenario_names())
    for name in scenario_names():
        scenario = load_scenario(name)
        assert scenario.name == name
        assert scenario.description
        assert scenario.run.seed == scenario.seed


def test_the_default_scenario_makes_groups_straddle_versions() -> None:
    run = load_scenario("default").run
    assert run.group_size > run.max_inflight  # a group cannot be dispatched at once
    assert load_scenario("tight").run.max_off_policy_steps == 1
    assert load_scenario("loose").run.max_off_policy_steps == 4


def test_the_partial_rollout_scenarios_stress_what_they_name() -> None:
    """`long-gen`, `long-tail`, `slow-update`: what benchmarks/partial.py compares on."""
    long = load_scenario("long-gen").world
    assert long.task_length_tokens * long.seconds_per_token > 2 * long.train_step_s
    assert long.prefill_shared and long.concurrency_slowdown > 0
    assert load_scenario("long-tail").world.duration == "pareto"
    slow = load_scenario("slow-update").world
    assert slow.weight_update_s > slow.train_step_s and slow.prefill_shared


def test_unqualified_keys_resolve_to_their_table() -> None:
    resolved = resolve_overrides(
        {"group_size": 4, "failure_rate": 0.1, "world.seconds_per_token": 1}
    )
    assert resolved == {
        "run.group_size": 4,
        "world.failure_rate": 0.1,
        "world.seconds_per_token": 1,
    }


def test_overrides_apply_with_toml_values() -> None:
    overrides = parse_set_options(
        ["group_size=4", "world.reward=fractional", "staleness=per-group"]
    )
    scenario = load_scenario("smoke", overrides)
    assert scenario.run.group_size == 4
    assert scenario.run.staleness == "per-group"
    assert scenario.world.reward == "fractional"


@pytest.mark.parametrize(
    ("items", "named"),
    [
        (["no_such_key=1"], "no_such_key"),
        (["run.failure_rate=0.1"], "run.failure_rate"),
        (["cosmos.group_size=1"], "cosmos.group_size"),
        (["group_size"], "group_size"),
        (["run.seed=3"], "run.seed"),
        (["batch_size=4", "batch_size=8"], "batch_size is given twice"),
        (["batch_size=4", "run.batch_size=8"], "--set batch_size and --set run.batch_size"),
    ],
)
def test_bad_override_keys_are_refused_by_name(items: list[str], named: str) -> None:
    with pytest.raises(ConfigError, match=named.replace(".", r"\.")):
        load_scenario("smoke", parse_set_options(items))


@pytest.mark.parametrize(
    ("items", "named"),
    [
        (["group_size=0"], "group_size"),
        (["failure_rate=2"], "failure_rate"),
        (["duration=weibull"], "duration"),
        (["world.duration=pareto", "world.duration_shape=0.5"], "duration_shape"),
        (["max_inflight=many"], "max_inflight"),
    ],
)
def test_bad_override_values_are_refused_by_name(items: list[str], named: str) -> None:
    with pytest.raises(ConfigError, match=named):
        load_scenario("smoke", parse_set_options(items))


def test_a_scenario_file_loads_and_bad_files_name_the_problem(tmp_path: Path) -> None:
    good = tmp_path / "mine.toml"
    good.write_text("steps = 3\nseed = 7\n[run]\ngroup_size = 2\n[world]\nfailure_rate = 0.5\n")
    scenario = load_scenario(str(good))
    assert (scenario.name, scenario.steps, scenario.seed) == ("mine", 3, 7)
    assert scenario.run.group_size == 2
    assert scenario.world.failure_rate == 0.5
    bad = tmp_path / "bad.toml"
    bad.write_text("stepz = 3\n")
    with pytest.raises(ConfigError, match="stepz"):
        load_scenario(str(bad))
    bad.write_text("[world]\nwarp_drive = true\n")
    with pytest.raises(ConfigError, match="warp_drive"):
        load_scenario(str(bad))
    with pytest.raises(ConfigError, match="neither a built-in scenario"):
        load_scenario(str(tmp_path / "missing.toml"))


def test_seed_steps_and_policy_can_be_changed() -> None:
    scenario = load_scenario("smoke").with_seed(9).with_steps(2).with_policy("per-group")
    assert (scenario.seed, scenario.run.seed, scenario.steps) == (9, 9, 2)
    assert scenario.run.staleness == "per-group"
    with pytest.raises(ConfigError, match="steps"):
        scenario.with_steps(0)


@pytest.mark.parametrize(
    ("text", "named"),
    [
        (b"\xff\xfe garbage", "not UTF-8 text (byte 1)"),
        (b"description = 5\n", "description: must be a string"),
        (b"seed = 9223372036854775808\n", "seed: must be at most 9223372036854775807"),
        (b"steps = 5\n[trace]\nseed = 0\n", "[trace].episodes: no finished episode"),
        (b"[run]\nmax_inflight = 100001\n", "max_inflight: at most 100,000, got 100,001"),
    ],
)
def test_a_bad_scenario_file_is_refused_when_loaded_naming_the_problem(
    tmp_path: Path, text: bytes, named: str
) -> None:
    """Each of these got past loading before: a traceback, a crash writing the log after
    the run, or a run that never settles."""
    path = tmp_path / "bad.toml"
    path.write_bytes(text)
    with pytest.raises(ConfigError, match=re.escape(named)):
        load_scenario(str(path))
