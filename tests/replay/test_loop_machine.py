"""The whole reaction loop under a random world, every property checked after every event.

A `RuleBasedStateMachine` plays the world (as `ScriptedWorld` does, one rule per world
action): completions and failures of in-flight episodes, trainer version updates that may
jump several versions, concurrency-limit changes, overload cuts and late completions of
cancelled episodes. The configuration is drawn so that limits bind: with G up to 12 and a
handful of permits, groups start staggered across versions. The core's raising
`Account` observes every appended event (bound, conservation, permits, late
events, scoring) and every settled world event; the teardown finishes the run (quiescence)
and checks the log replays and re-decides to the same digests (determinism).
"""

from __future__ import annotations

from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, precondition, rule

from rolloutlog.core.account import Account
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
from rolloutlog.testing.equivalence import PLAIN_FOLD, TODAYS_DECIDERS, first_difference
from rolloutlog.testing.strategies import run_configs

# Limits that bind: a large G against a handful of permits staggers each group's starts.
binding_configs = st.integers(4, 12).flatmap(
    lambda g: run_configs(group_size=g, max_inflight=g // 2 + 1)
)


class LoopMachine(RuleBasedStateMachine):
    """The world around one `ReactionLoop`; the checker raises at the first broken property."""

    @initialize(config=st.one_of(binding_configs, run_configs()))
    def start(self, config: RunConfig) -> None:
        self.config = config
        self.loop = ReactionLoop(config, observers=(Account(config),))
        self.log: list[Event] = []
        self.cancelled: list[str] = []
        self.published = 0
        self.t = 0.0
        self._feed(
            RunStarted(t=0.0, config=config.to_dict(), seed=0, schema_version=1, code_version="t")
        )

    def _feed(self, event: Event) -> None:
        appended = self.loop.feed(event)
        for e in appended:
            if e.kind == "episodes_cancelled":
                self.cancelled.extend(e.episode_ids)  # type: ignore[attr-defined]
        self.log.extend(appended)

    def _tick(self, dt: float) -> float:
        self.t += dt
        return self.t

    def _inflight(self) -> list[str]:
        return list(self.loop.dispatcher_state.inflight)

    @precondition(lambda self: self.loop.dispatcher_state.inflight)
    @rule(pick=st.integers(0, 10**6), reward=st.sampled_from([0.0, 0.5, 1.0]), dt=st.floats(0, 5))
    def complete(self, pick: int, reward: float, dt: float) -> None:
        inflight = self._inflight()
        episode_id = inflight[pick % len(inflight)]
        self._feed(
            EpisodeCompleted(
                t=self._tick(dt),
                episode_id=episode_id,
                reward=reward,
                prompt_tokens=8,
                completion_tokens=1 + pick % 64,
            )
        )

    @precondition(lambda self: self.loop.dispatcher_state.inflight)
    @rule(pick=st.integers(0, 10**6))
    def fail(self, pick: int) -> None:
        inflight = self._inflight()
        episode_id = inflight[pick % len(inflight)]
        self._feed(EpisodeFailed(t=self._tick(0.5), episode_id=episode_id, error="x"))

    @rule(jump=st.integers(1, 3), live_later=st.booleans())
    def publish(self, jump: int, live_later: bool) -> None:
        """The trainer publishes a version it has a batch for (possibly skipping some)."""
        shipped = self.loop.sink_state.step - 1
        if shipped <= self.published:
            return
        self.published = min(shipped, self.published + jump)
        self._feed(VersionPending(t=self._tick(1.0), version=self.published))
        if not live_later:
            self._feed(VersionLive(t=self._tick(0.5), version=self.published))

    @rule(limit=st.integers(1, 16))
    def set_limit(self, limit: int) -> None:
        self._feed(LimitSet(t=self._tick(0.1), max_inflight=limit))

    @precondition(lambda self: self.loop.dispatcher_state.inflight)
    @rule(n=st.integers(1, 8))
    def overload(self, n: int) -> None:
        self._feed(OverloadCut(t=self._tick(0.1), n=n))

    @precondition(lambda self: self.cancelled)
    @rule(pick=st.integers(0, 10**6), fail=st.booleans())
    def arrive_late(self, pick: int, fail: bool) -> None:
        episode_id = self.cancelled.pop(pick % len(self.cancelled))
        t = self._tick(0.2)
        late: Event = (
            EpisodeFailed(t=t, episode_id=episode_id, error="late")
            if fail
            else EpisodeCompleted(
                t=t, episode_id=episode_id, reward=1.0, prompt_tokens=1, completion_tokens=1
            )
        )
        self._feed(late)

    def teardown(self) -> None:
        if not hasattr(self, "loop"):
            return
        self._feed(RunFinished(t=self._tick(1.0), reason="fuzz"))  # quiescence is checked
        difference = first_difference(self.log, PLAIN_FOLD, TODAYS_DECIDERS, ("events", "digests"))
        assert difference is None, str(difference)


TestLoopMachine = LoopMachine.TestCase
