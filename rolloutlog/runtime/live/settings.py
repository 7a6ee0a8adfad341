"""The live runtime's knobs, beside the deciders' `RunConfig`, and `--set` for both.

`rolloutlog train --set key=value` takes a `RunConfig` key (`batch_size`,
`max_off_policy_steps`, ...) or a `LiveSettings` key (`learning_rate`, `servers`, ...);
`run.key` and `live.key` name the section explicitly. The two sets of names are disjoint.

`TRAIN_RUN_DEFAULTS` are the deciders' defaults for training on the digit task; they differ
from `RunConfig`'s generic ones where the task and two CPU cores ask for it (see
benchmarks/RESULTS.md for the measurements behind them).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final, Literal

import attrs

from rolloutlog.core.config import (
    AtLeast,
    Between,
    ConfigError,
    RunConfig,
    apply_overrides,
    build_config,
    checked,
)
from rolloutlog.core.overrides import qualify_overrides

ServerMode = Literal["process", "thread"]
ISCorrection = Literal["none", "tis", "mask", "decoupled"]

TRAIN_RUN_DEFAULTS: Final[dict[str, Any]] = {
    "group_size": 8,
    "batch_size": 256,
    "max_inflight": 128,
    "max_off_policy_steps": 1,
}
# torch threads of one process: more than any CPU machine has cores (a server asked for
# 100,000 threads dies at start rather than refusing)
MAX_THREADS: Final = 256


@attrs.frozen(kw_only=True)
class LiveSettings:
    """How the live runtime trains and serves; recorded nowhere in the log (the deciders
    never read them), reported beside it."""

    learning_rate: float = checked(5e-4, Between(1e-7, 1.0), "trainer learning rate (AdamW)")
    entropy_coefficient: float = checked(0.02, AtLeast(0.0), "entropy bonus of the loss")
    clip_epsilon: float = checked(0.2, Between(0.0, 1.0), "PPO clip of the importance ratio")
    temperature: float = checked(1.0, Between(0.0, 2.0), "sampling temperature")
    hidden_size: int = checked(128, AtLeast(8), "model width (heads of 32)")
    layers: int = checked(2, AtLeast(1), "decoder layers")
    servers: int = checked(1, AtLeast(1), "local CPU inference servers (--backend cpu)")
    server_mode: ServerMode = checked("process", None, "local servers as processes or threads")
    server_threads: int = checked(1, Between(1, MAX_THREADS), "torch threads per local server")
    server_min_step_s: float = checked(
        0.0, Between(0.0, 10.0), "local servers: a decode step lasts at least this long"
    )
    trainer_threads: int = checked(1, Between(1, MAX_THREADS), "torch threads of the trainer")
    generate_timeout_s: float = checked(120.0, AtLeast(0.01), "one generate call, at most")
    publish_attempts: int = checked(3, AtLeast(1), "tries of a weight update that failed")
    endpoint_wait_s: float = checked(
        30.0, Between(0.0, 86400.0), "no endpoint left: wait this long for one to come back"
    )
    check_invariants: bool = checked(False, None, "check every property on every event")
    hard_task_share: float = checked(0.0, Between(0.0, 1.0), "share of hard digit tasks")
    eval_every: int = checked(
        0, AtLeast(0), "score the held-out tasks after every N-th step (0: never)"
    )
    eval_tasks: int = checked(64, AtLeast(1), "held-out tasks (the hard share included)")
    is_correction: ISCorrection = checked(
        "none", None, "stale tokens: none, tis, mask or decoupled"
    )
    is_cap: float = checked(2.0, AtLeast(1.0), "tis: the cap C of the truncated ratio")
    is_band_low: float = checked(0.5, Between(0.0, 1.0), "mask: lowest ratio that trains")
    is_band_high: float = checked(2.0, AtLeast(1.0), "mask: highest ratio that trains")
    minibatches: int = checked(1, AtLeast(1), "optimizer steps per batch, on its slices")
    is_decoupled_cap: float = checked(
        5.0, AtLeast(1.0), "decoupled: highest proximal/behaviour weight that trains"
    )

    def __attrs_post_init__(self) -> None:
        if self.hidden_size % 32 != 0:
            raise ConfigError(
                "live.hidden_size: must be a multiple of 32, the head size "
                f"(got {self.hidden_size})"
            )


RUN_KEYS: Final = frozenset(f.name for f in attrs.fields(RunConfig))
LIVE_KEYS: Final = frozenset(f.name for f in attrs.fields(LiveSettings))
SECTIONS: Final = {"run": RUN_KEYS, "live": LIVE_KEYS}  # what `--set` may name
RESERVED: Final = {"run.seed": "the run seed is the training seed; use --seed"}


def build_settings(overrides: Mapping[str, Any], *, seed: int) -> tuple[RunConfig, LiveSettings]:
    """The run config (train defaults, then overrides, then `seed`) and the live settings."""
    qualified = qualify_overrides(overrides, SECTIONS, reserved=RESERVED)
    run = {key: value for (section, key), value in qualified.items() if section == "run"}
    live = {key: value for (section, key), value in qualified.items() if section == "live"}
    run = apply_overrides(TRAIN_RUN_DEFAULTS, {**run, "seed": seed})
    config = RunConfig.from_mapping(run, where="run")
    if config.frozen_fraction > 0:  # refused here, before a run creates any file
        raise ConfigError(
            f"--set frozen_fraction={config.frozen_fraction}: the live runtime has no frozen "
            "policy (leave it 0)"
        )
    return config, build_config(LiveSettings, live, where="live")
