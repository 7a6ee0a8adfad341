"""The simulated concurrency controller: moves the permit limit and asks for overload cuts.

Both are Poisson processes in virtual time, independent of what the deciders do, so the
controller's events fall at the same times with the same values under every policy. A new
limit is drawn uniformly in [`limit_min_fraction`·max_inflight, max_inflight]; a cut asks
for up to `overload_max_fraction` of the current limit (at least one episode).
"""

from __future__ import annotations

import math

import numpy as np

from rolloutlog.core.config import RunConfig
from rolloutlog.events.types import LimitSet, OverloadCut
from rolloutlog.runtime.sim.clock import EventQueue
from rolloutlog.runtime.sim.world_config import WorldConfig


class Controller:
    """Schedules `limit_set` and `overload_cut` happenings; off when their interval is 0."""

    def __init__(
        self, world: WorldConfig, run: RunConfig, rng: np.random.Generator, queue: EventQueue
    ) -> None:
        self.world, self.rng, self.queue = world, rng, queue
        self.max_inflight = run.max_inflight
        self.limit = run.max_inflight
        self._intervals = {"limit": world.limit_interval_s, "overload": world.overload_interval_s}

    def start(self) -> None:
        """Schedule the first happening of each enabled process."""
        for kind in ("limit", "overload"):
            self._schedule(0.0, kind)

    def fire(self, now: float, kind: str) -> LimitSet | OverloadCut:
        """The happening `kind` came due: its world event; the next one is scheduled."""
        u = float(self.rng.random())
        self._schedule(now, kind)
        if kind == "limit":
            low = max(1, math.ceil(self.world.limit_min_fraction * self.max_inflight))
            self.limit = low + min(int(u * (self.max_inflight - low + 1)), self.max_inflight - low)
            return LimitSet(t=now, max_inflight=self.limit)
        if kind == "overload":
            n = max(1, round(u * self.world.overload_max_fraction * self.limit))
            return OverloadCut(t=now, n=n)
        raise ValueError(f"unknown controller happening {kind!r}")

    def _schedule(self, now: float, kind: str) -> None:
        mean_s = self._intervals[kind]
        if mean_s > 0.0:
            self.queue.push(now + float(self.rng.exponential(mean_s)), (kind, None))
