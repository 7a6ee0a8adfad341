"""The simulated world under `weight_update = drain` (docs/contract.md, "Weight updates and
work in flight").

A published version waits until the train episodes in flight when it was announced have
arrived or been cancelled (the dispatcher sends no train work meanwhile); then inference
pauses for the weight update and `version_live` follows it. What the wait needs is only
the outcomes already scheduled, never a dispatch or a shipped batch, so it always ends:
the no-deadlock property the contract states. Episodes cancelled whose completion still
races (`late_arrival_rate`) hold nothing: they no longer generate for the run.
"""

from __future__ import annotations

from rolloutlog.runtime.sim.clock import EventQueue
from rolloutlog.runtime.sim.inference import Serving
from rolloutlog.runtime.sim.trainer import Publish


class Drainer:
    """The update that waits, and the train episodes it waits for."""

    def __init__(self, queue: EventQueue, inference: Serving) -> None:
        self.queue, self.inference = queue, inference
        self.waiting: Publish | None = None
        self.inflight: set[str] = set()

    def announced(self, now: float, publish: Publish) -> None:
        """`version_pending`: wait for the train work generating now, if any."""
        flights = self.inference.flights.values()
        self.inflight = {f.episode_id for f in flights if f.plan.train and f.cancelled is None}
        self.waiting = publish
        self._start_if_drained(now)

    def left(self, now: float, episode_id: str) -> None:
        """An episode arrived or was cancelled: the update starts once none is left."""
        if self.waiting is not None:
            self.inflight.discard(episode_id)
            self._start_if_drained(now)

    def _start_if_drained(self, now: float) -> None:
        publish = self.waiting
        if publish is None or self.inflight:
            return
        self.waiting = None
        self.inference.pause(now, publish.update_s)
        self.queue.push(now + publish.update_s, ("live", publish.version))
