"""A deterministic world around the real deciders, for answers that hold by construction.

Each episode takes `duration(episode_id)` seconds and completes (reward: its member's
parity, so that no group has zero advantage); the trainer is sequential as the
simulator's: it trains each shipped batch for `train_s`, publishes (`version_pending`),
updates for `update_s(step)` and then takes the next. Nothing else happens, so a test can
say exactly when every event falls.
"""

from __future__ import annotations

import heapq
from collections import deque
from collections.abc import Callable
from typing import Any

from rolloutlog.core.config import RunConfig
from rolloutlog.core.loop import ReactionLoop
from rolloutlog.events.schema import SCHEMA_VERSION
from rolloutlog.events.types import (
    EpisodeCompleted,
    Event,
    RunFinished,
    RunStarted,
    VersionLive,
    VersionPending,
)


class TinyWorld:
    """Feeds the loop its world events in time order until `steps` batches shipped."""

    def __init__(
        self,
        config: RunConfig,
        duration: Callable[[str], float],
        *,
        train_s: float = 0.5,
        update_s: Callable[[int], float] = lambda step: 0.0,
    ) -> None:
        self.loop = ReactionLoop(config)
        self.duration, self.train_s, self.update_s = duration, train_s, update_s
        self.agenda: list[tuple[float, int, str, Any]] = []
        self.order = 0
        self.cancelled: set[str] = set()
        self.backlog: deque[int] = deque()
        self.training = False
        self.shipped = 0
        self.log: list[Event] = []

    def run(self, steps: int) -> list[Event]:
        self._feed(
            RunStarted(
                t=0.0,
                config=self.loop.config.to_dict(),
                seed=0,
                schema_version=SCHEMA_VERSION,
                code_version="tests",
            )
        )
        while self.agenda and self.shipped < steps:
            t, _, what, key = heapq.heappop(self.agenda)
            self._happen(t, what, key)
        self._feed(RunFinished(t=self.log[-1].t, reason="steps"))
        return self.log

    def _at(self, t: float, what: str, key: Any) -> None:
        self.order += 1
        heapq.heappush(self.agenda, (t, self.order, what, key))

    def _happen(self, t: float, what: str, key: Any) -> None:
        if what == "arrive" and key not in self.cancelled:
            member = int(key.rpartition("/")[2])
            self._feed(
                EpisodeCompleted(
                    t=t,
                    episode_id=key,
                    reward=float(member % 2),
                    prompt_tokens=10,
                    completion_tokens=20,
                )
            )
        elif what == "trained":
            self._feed(VersionPending(t=t, version=key))
            self._at(t + self.update_s(key), "live", key)
        elif what == "live":
            self._feed(VersionLive(t=t, version=key))
            self.training = False
            self._train(t)

    def _train(self, t: float) -> None:
        if not self.training and self.backlog:
            self.training = True
            self._at(t + self.train_s, "trained", self.backlog.popleft())

    def _feed(self, event: Event) -> None:
        appended = self.loop.feed(event)
        self.log += appended
        for decided in appended[1:]:
            if decided.kind == "episode_dispatched":
                self._at(
                    decided.t + self.duration(decided.episode_id), "arrive", decided.episode_id
                )
            elif decided.kind == "episodes_cancelled":
                self.cancelled.update(decided.episode_ids)
            elif decided.kind == "batch_shipped":
                self.shipped = decided.step
                self.backlog.append(decided.step)
                self._train(decided.t)
