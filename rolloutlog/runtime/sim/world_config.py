"""The world model's knobs: tasks, inference, failures, the trainer, the controller.

`WorldConfig` is what the simulator draws from; it never reaches the deciders, which see
only `RunConfig`. It is built with the core's strict `build_config`, so a bad key or value
in a scenario file or a `--set` override is refused with a message that names the key.
Durations are virtual seconds; token counts are per episode.
"""

from __future__ import annotations

from typing import Any, Literal

import attrs

from rolloutlog.core.config import AtLeast, Between, ConfigError, build_config, checked

DurationDistribution = Literal["lognormal", "pareto", "exponential"]
InferenceModel = Literal["independent", "shared"]
RewardModel = Literal["bernoulli", "fractional"]


@attrs.frozen(kw_only=True)
class WorldConfig:
    """The simulated world: everything the deciders cannot see and the simulator draws."""

    # tasks
    task_length_tokens: int = checked(1024, AtLeast(1), "median completion length of a task")
    task_length_sigma: float = checked(0.6, AtLeast(0.0), "lognormal spread of task lengths")
    solve_rate_alpha: float = checked(1.0, AtLeast(0.01), "Beta(a, b) of the task solve rate")
    solve_rate_beta: float = checked(1.0, AtLeast(0.01), "Beta(a, b) of the task solve rate")
    reward: RewardModel = checked("bernoulli", None, "bernoulli 0/1, or fractional in [0, 1]")
    prompt_tokens: int = checked(256, AtLeast(0), "prompt tokens of every episode")
    max_completion_tokens: int = checked(8192, AtLeast(1), "generation cap (truncation)")
    # inference
    duration: DurationDistribution = checked("lognormal", None, "episode length noise")
    duration_shape: float = checked(0.8, AtLeast(0.01), "lognormal sigma, or pareto alpha")
    seconds_per_token: float = checked(0.01, AtLeast(0.0), "decode time per completion token")
    episode_overhead_s: float = checked(1.0, AtLeast(0.0), "environment time per episode")
    concurrency_slowdown: float = checked(0.0, AtLeast(0.0), "decode slows 1+x at full limit")
    pause_inference_on_update: bool = checked(True, None, "inference pauses until version_live")
    prefill_tokens_per_s: float = checked(
        20000.0, AtLeast(1.0), "prefill rate: a resumed episode re-reads prompt and tokens"
    )
    prefill_shared: bool = checked(
        False, None, "the resumptions of one update queue for one prefill rate (else each alone)"
    )
    # shared inference (`inference = "shared"`: runtime.sim.shared_inference)
    inference: InferenceModel = checked(
        "independent", None, "independent: each episode alone; shared: episodes share servers"
    )
    inference_servers: int = checked(1, AtLeast(1), "shared: inference servers (replicas)")
    decode_step_s: float = checked(0.01, AtLeast(1e-9), "shared: a decode step of one sequence")
    decode_s_per_seq: float = checked(0.0, AtLeast(0.0), "shared: step time per running sequence")
    decode_compute_s_per_seq: float = checked(
        0.0, AtLeast(0.0), "shared: compute-bound floor of the step per running sequence"
    )
    request_steps: float = checked(
        0.0, AtLeast(0.0), "shared: decode steps a request pays off the batch (hand-back)"
    )
    max_running: int = checked(256, AtLeast(1), "shared: sequences a server decodes at once")
    kv_capacity_tokens: int = checked(1_000_000, AtLeast(1), "shared: KV cache per server")
    prefix_caching: bool = checked(True, None, "shared: a group's prompt is read and held once")
    # failures and aborts racing a finishing request
    failure_rate: float = checked(0.0, Between(0.0, 1.0), "probability an episode fails")
    late_arrival_rate: float = checked(0.0, Between(0.0, 1.0), "cancelled episode still arrives")
    # the trainer
    train_step_s: float = checked(20.0, AtLeast(0.0), "trainer time per batch, fixed part")
    train_s_per_episode: float = checked(0.0, AtLeast(0.0), "trainer time per trained episode")
    train_s_per_token: float = checked(0.0, AtLeast(0.0), "trainer time per token of a batch")
    colocated: bool = checked(False, None, "shared: training and inference share the compute")
    colocation_coupling: float = checked(
        0.0, AtLeast(0.0), "colocated: each slows the other by up to 1 + x"
    )
    weight_update_s: float = checked(5.0, AtLeast(0.0), "publish to live: the weight update")
    trainer_jitter: float = checked(0.1, AtLeast(0.0), "lognormal sigma of trainer times")
    version_skip_rate: float = checked(0.0, Between(0.0, 1.0), "skip a publish when ahead")
    # the concurrency controller
    limit_interval_s: float = checked(0.0, AtLeast(0.0), "mean time between limit_set (0: off)")
    limit_min_fraction: float = checked(0.5, Between(0.0, 1.0), "lowest limit, x max_inflight")
    overload_interval_s: float = checked(0.0, AtLeast(0.0), "mean time between cuts (0: off)")
    overload_max_fraction: float = checked(0.25, Between(0.0, 1.0), "largest cut, x the limit")

    def __attrs_post_init__(self) -> None:
        if self.duration == "pareto" and self.duration_shape <= 1.0:
            raise ConfigError(
                f"world.duration_shape: pareto needs alpha > 1 for a finite mean "
                f"(got {self.duration_shape})"
            )
        longest = self.prompt_tokens + self.max_completion_tokens
        if self.inference == "shared" and self.kv_capacity_tokens < longest:
            raise ConfigError(
                f"world.kv_capacity_tokens: {self.kv_capacity_tokens} cannot hold the longest "
                f"episode (prompt_tokens + max_completion_tokens = {longest})"
            )
        if self.colocated and self.inference != "shared":
            raise ConfigError('world.colocated: needs inference = "shared" (servers to slow)')

    def to_dict(self) -> dict[str, Any]:
        """Plain data, for reports and the scenario echo in `--json`."""
        return attrs.asdict(self)

    @classmethod
    def from_mapping(cls, data: dict[str, Any], where: str = "world") -> WorldConfig:
        """Build from plain data, refusing unknown keys and bad values by name."""
        return build_config(cls, data, where)


WORLD_KEYS = frozenset(f.name for f in attrs.fields(WorldConfig))
