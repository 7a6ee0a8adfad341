"""A scripted world: turns a stream of small choices into valid world events for a loop.

Property tests and the equivalence harness need logs that are valid by construction, not
filtered: every choice is an index into what the loop currently allows (an in-flight
episode to complete, a cancelled one to arrive late, how far the trainer's version
jumps). The chooser is any `choose(n) -> int in [0, n)`: a hypothesis `data.draw`, or a
seeded `random.Random` for the simulator-free fuzz of benchmarks.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable

from rolloutlog.core.config import RunConfig
from rolloutlog.core.loop import ReactionLoop
from rolloutlog.events.types import (
    EpisodeCompleted,
    EpisodeFailed,
    Event,
    LimitSet,
    OverloadCut,
    RunFinished,
    RunStarted,
    VersionLive,
    VersionPending,
)

Chooser = Callable[[int], int]

ACTIONS = ("complete", "fail", "publish", "limit", "overload", "late")
# Rewards from a small set, so that equal-reward groups (zero advantages) are common.
REWARDS = (0.0, 0.25, 0.5, 1.0)
LATE_MEMORY = 64


class ScriptedWorld:
    """Drives a `ReactionLoop` with world events chosen by `choose`; records the log."""

    def __init__(
        self,
        loop: ReactionLoop,
        choose: Chooser,
        *,
        weights: dict[str, int] | None = None,
        single_version_groups: bool = False,
    ) -> None:
        self.loop, self.choose = loop, choose
        # Publish only while no group is part-dispatched, so every member of a group is
        # dispatched at one version: the condition under which the two policies agree.
        self.single_version_groups = single_version_groups
        self.weights = weights or {
            "complete": 12,
            "fail": 1,
            "publish": 3,
            "limit": 1,
            "overload": 1,
            "late": 1,
        }
        self.t = 0.0
        self.log: list[Event] = []
        self.recently_cancelled: deque[str] = deque(maxlen=LATE_MEMORY)
        self.published = 0
        config = loop.config
        self._feed(
            RunStarted(
                t=0.0,
                config=config.to_dict(),
                seed=config.seed,
                schema_version=1,
                code_version="scripted",
            )
        )

    def _feed(self, event: Event) -> None:
        appended = self.loop.feed(event)
        for e in appended:
            if e.kind == "episodes_cancelled":
                self.recently_cancelled.extend(e.episode_ids)  # type: ignore[union-attr]
        self.log.extend(appended)

    def step(self) -> None:
        """Advance virtual time a little and apply one chosen world event (or nothing)."""
        self.t += (1 + self.choose(20)) / 4
        action = self._pick_action()
        getattr(self, f"_{action}")()

    def _pick_action(self) -> str:
        total = sum(self.weights.get(a, 0) for a in ACTIONS)
        pick = self.choose(total)
        for action in ACTIONS:
            pick -= self.weights.get(action, 0)
            if pick < 0:
                return action
        return ACTIONS[0]

    def _inflight(self) -> list[str]:
        return list(self.loop.dispatcher_state.inflight)

    def _complete(self) -> None:
        inflight = self._inflight()
        if inflight:
            episode_id = inflight[self.choose(len(inflight))]
            reward = REWARDS[self.choose(len(REWARDS))]
            tokens = 1 + self.choose(64)
            self._feed(
                EpisodeCompleted(
                    t=self.t,
                    episode_id=episode_id,
                    reward=reward,
                    prompt_tokens=8,
                    completion_tokens=tokens,
                )
            )

    def _fail(self) -> None:
        inflight = self._inflight()
        if inflight:
            episode_id = inflight[self.choose(len(inflight))]
            self._feed(EpisodeFailed(t=self.t, episode_id=episode_id, error="scripted failure"))

    def _publish(self) -> None:
        """The trainer publishes a version it has a batch for, jumping by one or more."""
        shipped = self.loop.sink_state.step - 1
        if self.single_version_groups and self.loop.dispatcher_state.owing:
            return
        if shipped > self.published:
            self.published += 1 + self.choose(shipped - self.published)
            self._feed(VersionPending(t=self.t, version=self.published))
            self._feed(VersionLive(t=self.t, version=self.published))

    def _limit(self) -> None:
        limit = 1 + self.choose(2 * self.loop.config.max_inflight)
        self._feed(LimitSet(t=self.t, max_inflight=limit))

    def _overload(self) -> None:
        inflight = len(self.loop.dispatcher_state.inflight)
        if inflight:
            self._feed(OverloadCut(t=self.t, n=1 + self.choose(inflight)))

    def _late(self) -> None:
        if self.recently_cancelled:
            episode_id = self.recently_cancelled[self.choose(len(self.recently_cancelled))]
            self.recently_cancelled.remove(episode_id)
            self._feed(
                EpisodeCompleted(
                    t=self.t,
                    episode_id=episode_id,
                    reward=1.0,
                    prompt_tokens=8,
                    completion_tokens=8,
                )
            )

    def finish(self) -> list[Event]:
        """End the run (everything owed is cancelled as `shutdown`) and return the log."""
        self._feed(RunFinished(t=self.t, reason="scripted"))
        return self.log


def scripted_log(
    config: RunConfig,
    choose: Chooser,
    steps: int,
    *,
    loop: ReactionLoop | None = None,
    single_version_groups: bool = False,
) -> list[Event]:
    """A complete log of `steps` scripted world events under `config`."""
    loop = loop or ReactionLoop(config)
    world = ScriptedWorld(loop, choose, single_version_groups=single_version_groups)
    for _ in range(steps):
        world.step()
    return world.finish()
