"""The simulated trainer: trains shipped batches in order, publishes, updates the weights.

The trainer is sequential: it trains batch s for a step time, publishes `v_s`
(`version_pending`), then takes part in the weight update until `version_live(s)`, and only
then starts on the next batch. With `version_skip_rate` it may skip publishing `v_s` when
batch s+1 is already waiting, so versions jump by more than one; it never skips when
nothing is waiting, since a skipped version with no next batch would hold the run forever.
With `updates_per_sync = K` it publishes only after every K-th batch (verl's
`trigger_parameter_sync_step`): between syncs the next batch starts as soon as one ends,
and a sync is skipped only when the K batches of the next one are already waiting.

Every batch draws the same three numbers from the `trainer` stream (step jitter, update
jitter, skip), whatever happens to it, so the trainer's randomness lines up across
policies. The backlog is bounded by the sink's ship hold.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Callable
from typing import Literal

import attrs
import numpy as np

from rolloutlog.runtime.sim.clock import EventQueue
from rolloutlog.runtime.sim.world_config import WorldConfig

Phase = Literal["idle", "training", "updating"]
# (step, trained episodes) -> (train seconds, weight-update seconds, skip uniform)
BatchTimes = Callable[[int, int], tuple[float, float, float]]


@attrs.frozen
class Publish:
    """The trainer published `version`; inference updates for `update_s` seconds."""

    version: int
    update_s: float


@attrs.define(slots=True)
class _Batch:
    step: int
    train_s: float
    update_s: float
    skip: float


class Trainer:
    """Batches waiting to train, the one in progress, and how long the trainer was busy."""

    def __init__(
        self,
        world: WorldConfig,
        rng: np.random.Generator,
        queue: EventQueue,
        times: BatchTimes | None = None,
        updates_per_sync: int = 1,
        *,
        defer_live: bool = False,
    ) -> None:
        """`times` replaces the drawn batch times (a recorded trace's, for example);
        `defer_live`: the driver schedules `version_live` itself, after what the update
        waits for (`weight_update = drain`, `runtime.sim.drain`) or the aborts it makes
        (`interrupt`), which a zero-second update must not overtake."""
        self.world, self.rng, self.queue = world, rng, queue
        self.updates_per_sync = updates_per_sync
        self.defer_live = defer_live
        self.times = times or self.drawn_times
        self.backlog: deque[_Batch] = deque()
        self.current: _Batch | None = None
        self.phase: Phase = "idle"
        self.busy_s = 0.0
        self._busy_since = 0.0

    def drawn_times(self, step: int, trained: int) -> tuple[float, float, float]:
        """Batch times from the world's knobs: train and update seconds, skip uniform."""
        normal_train, normal_update = self.rng.standard_normal(2).tolist()
        skip = float(self.rng.random())
        spread = self.world.trainer_jitter
        base_s = self.world.train_step_s + self.world.train_s_per_episode * trained
        train_s = base_s * math.exp(spread * normal_train)
        return train_s, self.world.weight_update_s * math.exp(spread * normal_update), skip

    def shipped(self, now: float, step: int, trained: int) -> None:
        """Batch `step` reached the trainer with `trained` episodes to learn from."""
        train_s, update_s, skip = self.times(step, trained)
        self.backlog.append(_Batch(step=step, train_s=train_s, update_s=update_s, skip=skip))
        if self.phase == "idle":
            self._busy_since = now
            self._start(now)

    def trained(self, now: float, step: int) -> Publish | None:
        """Training of batch `step` ended: publish it, or skip when the next one waits."""
        batch = self._expect(step)
        if step % self.updates_per_sync:  # between syncs: no version, on to the next batch
            self._next(now)
            return None
        waiting = len(self.backlog) >= self.updates_per_sync  # the next sync's batches
        if waiting and batch.skip < self.world.version_skip_rate:
            self._start(now)
            return None
        self.phase = "updating"
        if not self.defer_live:
            self.queue.push(now + batch.update_s, ("live", step))
        return Publish(step, batch.update_s)

    def live(self, now: float, version: int) -> None:
        """The weight update of `version` finished; start on the next batch if one waits."""
        self._expect(version)
        self._next(now)

    def _next(self, now: float) -> None:
        """The batch in hand is done: start on the next if one waits, else go idle."""
        self.current = None
        if self.backlog:
            self._start(now)
            return
        self.phase = "idle"
        self.busy_s += now - self._busy_since

    def busy_seconds(self, now: float) -> float:
        """Seconds spent training or updating up to `now`."""
        return self.busy_s + (now - self._busy_since if self.phase != "idle" else 0.0)

    def _start(self, now: float) -> None:
        self.current = self.backlog.popleft()
        self.phase = "training"
        self.queue.push(now + self.current.train_s, ("trained", self.current.step))

    def _expect(self, step: int) -> _Batch:
        if self.current is None or self.current.step != step:
            held = self.current.step if self.current else None
            raise ValueError(f"trainer event for batch {step}, but it holds batch {held}")
        return self.current
