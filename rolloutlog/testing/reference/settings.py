"""The run configuration as the reference reads it: straight from `run_started.config`."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import MISSING, dataclass, fields
from typing import Any

# Keys that change no decision of the deciders (only the drivers read them).
_NOT_DECISIONS = frozenset({"zero_output_batches"})
# A lag no run reaches: no gate (`dispatch_gate` false), or neither gate nor hold ("none").
NO_LAG = 1 << 62


class UnknownSettingError(ValueError):
    """The config has a key the reference does not model: a rule it would silently miss."""


@dataclass(frozen=True)
class Settings:
    """Every config key that changes a decision, as plain values."""

    max_inflight: int
    max_off_policy_steps: int
    group_size: int
    batch_size: int | None
    token_batch_size: int | None
    target_lag: int
    staleness: str
    filter_zero_advantages: bool
    seed: int
    tasks: int
    eval_interval: int
    frozen_fraction: float
    admission_smoothing: bool
    curriculum: str
    admission: str
    straggler_cut: bool
    batch_order: str
    requeue: str = "none"  # a log recorded before the key existed never requeues
    requeue_order: str = "first"  # behind-fresh: tinker's builder queue
    # The field presets' keys; a log recorded before they existed decides as they default.
    gate_lag: str = "target-lag"
    dispatch_gate: bool = True  # false: the lag holds only the ship (AReaL, ROLL)
    liveness: bool = True  # false: with no train group open, admission still decides
    outstanding_depth: int | None = None  # outstanding admission's batches out past one
    stale_cancel: str = "in-flight"
    stale_step: str = "current"  # before-release: prime-rl's dispatcher hears the update first
    gate_check: str = "every-event"  # ship-and-live: prime-rl's gate, read only there
    stale_check: str = "at-finalize"
    queue_sweep: str = "at-ship"
    overload_count: str = "owed"
    admission_window: str = "fixed"
    eval_first: bool = False
    staleness_threshold: float = 0.1  # verl admission's θ
    updates_per_sync: int = 1  # K: a version every K batches
    ship_wait: str = "none"
    # `drain` holds train dispatch while an update waits; `interrupt` changes no decision
    # (an interrupted episode keeps its permit and its dispatch stamp).
    weight_update: str = "freeze"
    recycle: bool = False  # recycled work holds train dispatch until it is resumed
    # until-live: train dispatch and the ship wait for the update to go live (dispatch also
    # for the work it interrupted to be resumed)
    update_pause: str = "none"
    # submit-first: at version_pending and version_live the dispatcher answers before the sink
    step_order: str = "ship-first"
    stale_tokens: str = "drop"  # mask: drops read an episode's end; old segments are masked
    stale_member: str = "cancel"
    max_lag: int = 0  # read only under admission = "max-lag"
    queue_limit: int = 0  # the sink's queue is unbounded
    queue_eviction: str = "oldest-episode"
    over_sampling_batch_size: int | None = None
    leftovers: str = "run-on"
    group_redundancy: int = 0  # r: members dispatched past G; the first G arrivals finalize
    async_generation_ratio: float = 0.0  # α: ROLL admission's head start, in batches

    @property
    def lag(self) -> int:
        """How far the trainer may lag the step before train dispatch and shipping wait:
        `target_lag`, or one whatever the bound (prime-rl's constant), or zero (slime's
        synchronous train.py), and K − 1 more when the trainer publishes every K batches (the
        sync interval)."""
        lag = {"one": 1, "zero": 0, "none": NO_LAG}.get(self.gate_lag, self.target_lag)
        return lag + self.updates_per_sync - 1

    @property
    def gate(self) -> int:
        """How far the trainer may lag the step before train dispatch waits: `lag`, or no
        limit where the source has no gate (`dispatch_gate` false)."""
        return self.lag if self.dispatch_gate else NO_LAG

    @classmethod
    def from_config(cls, config: Mapping[str, Any]) -> Settings:
        """Refuse a config with a key the reference does not know, naming the key."""
        known = set(cls.__dataclass_fields__)
        unknown = sorted(set(config) - known - _NOT_DECISIONS)
        if unknown:
            raise UnknownSettingError(
                f"run_started.config: the reference model does not know {unknown[0]!r}; "
                "teach it the rule (rolloutlog/testing/reference/)"
            )
        defaulted = {f.name for f in fields(cls) if f.default is not MISSING}
        return cls(**{n: config[n] for n in known if n in config or n not in defaulted})
