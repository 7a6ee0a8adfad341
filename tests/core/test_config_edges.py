"""Config edges: the default gate lag follows the staleness bound, and one batch key set
clears the other."""

from __future__ import annotations

import re

import pytest

from rolloutlog.core.config import ConfigError, RunConfig, apply_overrides
from rolloutlog.runtime.live.settings import build_settings
from rolloutlog.runtime.sim.scenario import load_scenario, parse_set_options

LAG_REFUSAL = re.escape("target_lag: must be <= max_off_policy_steps (0), got 1")


@pytest.mark.parametrize(("bound", "lag"), [(0, 0), (1, 1), (2, 1), (8, 1)])
def test_target_lag_defaults_to_at_most_the_bound(bound: int, lag: int) -> None:
    assert RunConfig.from_mapping({"max_off_policy_steps": bound}).target_lag == lag
    assert RunConfig(max_off_policy_steps=bound).target_lag == lag


def test_one_flag_goes_fully_on_policy_and_an_explicit_conflict_is_still_refused() -> None:
    on_policy = load_scenario("default", parse_set_options(["max_off_policy_steps=0"]))
    assert (on_policy.run.max_off_policy_steps, on_policy.run.target_lag) == (0, 0)
    assert build_settings({"max_off_policy_steps": 0}, seed=0)[0].target_lag == 0
    with pytest.raises(ConfigError, match=LAG_REFUSAL):
        load_scenario("default", parse_set_options(["max_off_policy_steps=0", "target_lag=1"]))
    with pytest.raises(ConfigError, match=LAG_REFUSAL):
        RunConfig.from_mapping({"max_off_policy_steps": 0, "target_lag": 1})


def test_setting_one_batch_key_clears_the_other() -> None:
    tokens = load_scenario("default", parse_set_options(["token_batch_size=4000"]))
    assert (tokens.run.batch_size, tokens.run.token_batch_size) == (None, 4000)
    with pytest.raises(ConfigError, match="set exactly one"):
        load_scenario("default", parse_set_options(["token_batch_size=4000", "batch_size=8"]))
    episodes = apply_overrides({"batch_size": None, "token_batch_size": 4000}, {"batch_size": 8})
    assert episodes == {"batch_size": 8, "token_batch_size": None}
    trained = build_settings({"token_batch_size": 4000}, seed=0)[0]
    assert (trained.batch_size, trained.token_batch_size) == (None, 4000)
