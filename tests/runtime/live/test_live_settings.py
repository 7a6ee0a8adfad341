"""`--set` for `rolloutlog train`: RunConfig keys and live keys, each refused by name."""

from __future__ import annotations

import pytest

from rolloutlog.core.config import ConfigError
from rolloutlog.runtime.live.session import train_config
from rolloutlog.runtime.live.settings import TRAIN_RUN_DEFAULTS, build_settings
from rolloutlog.runtime.live.trainer import TrainerConfig


def test_keys_go_to_their_section_and_the_train_defaults_apply():
    config, settings = build_settings(
        {"batch_size": 64, "live.learning_rate": 1e-3, "run.group_size": 4, "servers": 2},
        seed=9,
    )
    assert (config.batch_size, config.group_size, config.seed) == (64, 4, 9)
    assert config.max_inflight == TRAIN_RUN_DEFAULTS["max_inflight"]
    assert (settings.learning_rate, settings.servers) == (1e-3, 2)


def test_the_correction_keys_reach_the_trainer_and_default_to_none():
    _, settings = build_settings({}, seed=0)
    assert train_config(settings) == TrainerConfig()
    assert settings.hard_task_share == 0.0
    _, settings = build_settings(
        {"live.is_correction": "mask", "is_band_low": 0.25, "is_band_high": 4, "is_cap": 3},
        seed=0,
    )
    config = train_config(settings)
    assert (config.is_correction, config.is_band, config.is_cap) == ("mask", (0.25, 4.0), 3.0)


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"nope": 1}, "unknown key"),
        ({"world.batch_size": 1}, "section must be `run` or `live`"),
        ({"run.learning_rate": 1e-3}, "unknown key"),
        ({"run.seed": 3}, "use --seed"),
        ({"hidden_size": 100}, "live.hidden_size: must be a multiple of 32"),
        ({"server_mode": "fork"}, "must be one of"),
        ({"temperature": 3.0}, "must be in [0.0, 2.0]"),
        ({"frozen_fraction": 0.5}, "frozen_fraction=0.5: the live runtime has no frozen policy"),
        ({"server_threads": 100000}, "server_threads: must be in [1, 256]"),
        ({"trainer_threads": 257}, "trainer_threads: must be in [1, 256]"),
        (
            {"batch_size": 64, "run.batch_size": 128},
            "--set batch_size and --set run.batch_size: two values for run.batch_size",
        ),
        ({"live.layers": 3, "layers": 4}, "--set live.layers and --set layers: two values"),
        ({"is_correction": "clip"}, "live.is_correction: must be one of 'none', 'tis', 'mask'"),
        ({"is_cap": 0.5}, "live.is_cap: must be >= 1.0"),
        ({"is_band_low": 1.5}, "live.is_band_low: must be in [0.0, 1.0]"),
        ({"is_band_high": 0.9}, "live.is_band_high: must be >= 1.0"),
        ({"hard_task_share": 1.2}, "live.hard_task_share: must be in [0.0, 1.0]"),
    ],
)
def test_bad_settings_are_refused_by_name(overrides, message):
    with pytest.raises(ConfigError, match=message.replace("[", r"\[").replace("]", r"\]")):
        build_settings(overrides, seed=0)
