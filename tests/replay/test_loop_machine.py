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

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    precondition,
    rule,
    run_state_machine_as_test,
)

from rolloutlog.core.account import Account
from rolloutlog.core.config import RunConfig
from rolloutlog.core.loop import ReactionLoop
from rolloutlog.events.schema import SCHEMA_VERSION
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
# Its world never interrupts, recycles or waits for a drain (the scripted world does):
# freeze runs only.
FREEZE = {"weight_update": "freeze", "recycle": False}
binding_configs = st.integers(4, 12).flatmap(
    lambda g: run_configs(group_size=g, max_inflight=g // 2 + 1, **FREEZE)
)


class LoopMachine(RuleBasedStateMachine):
    """The world around one `ReactionLoop`; the checker raises at the first broken property."""

    batches_per_run: list[int] = []  # noqa: RUF012  (measured by the test at the end)

    @initialize(
        config=st.one_of(binding_configs, run_configs(**FREEZE)),
        warm_up=st.integers(2, 4),
        seed=st.integers(0, 10**6),
    )
    def start(self, config: RunConfig, warm_up: int, seed: int) -> None:
        """Open the run and play it to its first batches, so that every run, however few
        rules Hypothesis draws for it, starts with steps and versions already moving."""
        self.config = config
        self.loop = ReactionLoop(config, observers=(Account(config),))
        self.log: list[Event] = []
        self.cancelled: list[str] = []
        self.arrived: list[str] = []
        self.finished = False
        self.published = 0
        self.t = 0.0
        self._feed(
            RunStarted(
                t=0.0,
                config=config.to_dict(),
                seed=0,
                schema_version=SCHEMA_VERSION,
                code_version="t",
            )
        )
        for batch in range(warm_up):
            self.run_to_next_batch(seed + batch)
            self.publish(jump=1, live_later=False)

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
        self.arrived.append(episode_id)

    @precondition(lambda self: self.loop.dispatcher_state.inflight)
    @rule(picks=st.lists(st.integers(0, 10**6), min_size=2, max_size=8), dt=st.floats(0, 5))
    def complete_several(self, picks: list[int], dt: float) -> None:
        """A burst of completions, so that runs ship several batches."""
        for pick in picks:
            if self._inflight():
                self.complete(pick, reward=float(pick % 3) / 2, dt=dt / len(picks))

    @precondition(lambda self: self.loop.dispatcher_state.inflight)
    @rule(seed=st.integers(0, 10**6))
    def run_to_next_batch(self, seed: int) -> None:
        """Complete in-flight episodes (in a drawn order) until a batch ships, at most 100."""
        step = self.loop.sink_state.step
        for i in range(100):
            if self.loop.sink_state.step > step or not self._inflight():
                return
            self.complete(seed + 7919 * i, reward=float((seed + i) % 3) / 2, dt=0.1)

    @precondition(lambda self: self.loop.dispatcher_state.inflight)
    @rule(pick=st.integers(0, 10**6))
    def fail(self, pick: int) -> None:
        inflight = self._inflight()
        episode_id = inflight[pick % len(inflight)]
        self._feed(EpisodeFailed(t=self._tick(0.5), episode_id=episode_id, error="x"))
        self.arrived.append(episode_id)

    @rule(jump=st.integers(1, 3), live_later=st.booleans())
    def publish(self, jump: int, live_later: bool) -> None:
        """The trainer publishes a version it has a batch for (possibly skipping some)."""
        shipped = self.loop.sink_state.step - 1
        if self.finished:
            return
        if shipped <= self.published:
            return
        self.published = min(shipped, self.published + jump)
        self._feed(VersionPending(t=self._tick(1.0), version=self.published))
        if not live_later:
            self._feed(VersionLive(t=self._tick(0.5), version=self.published))

    @precondition(lambda self: not self.finished)
    @rule(limit=st.integers(1, 16))
    def set_limit(self, limit: int) -> None:
        self._feed(LimitSet(t=self._tick(0.1), max_inflight=limit))

    @precondition(lambda self: self.loop.dispatcher_state.inflight and not self.finished)
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

    @precondition(lambda self: self.arrived)
    @rule(pick=st.integers(0, 10**6))
    def arrive_again(self, pick: int) -> None:
        """A second delivery of an arrival: recorded and ignored (docs/contract.md § Dispatcher)."""
        episode_id = self.arrived[pick % len(self.arrived)]
        self._feed(EpisodeFailed(t=self._tick(0.2), episode_id=episode_id, error="again"))

    @precondition(lambda self: not self.finished and self.loop.sink_state.step > 3)
    @rule()
    def finish(self) -> None:
        """The run ends; later arrivals (late, duplicate) come after run_finished."""
        self._feed(RunFinished(t=self._tick(1.0), reason="fuzz"))  # quiescence is checked
        self.finished = True

    def teardown(self) -> None:
        if not hasattr(self, "loop"):
            return
        LoopMachine.batches_per_run.append(self.loop.sink_state.step - 1)
        if not self.finished:
            self._feed(RunFinished(t=self._tick(1.0), reason="fuzz"))  # quiescence is checked
        difference = first_difference(self.log, PLAIN_FOLD, TODAYS_DECIDERS, ("events", "digests"))
        assert difference is None, str(difference)


# Long runs: most ship several batches (measured below), so that steps and versions move.
STEPS = 60
TestLoopMachine = LoopMachine.TestCase
TestLoopMachine.settings = settings(settings.default, stateful_step_count=STEPS)


def test_most_stateful_runs_ship_several_batches() -> None:
    """Measured on a fixed sample: runs that ship fewer than three batches barely test the
    step and version rules."""
    LoopMachine.batches_per_run.clear()
    sample = settings(
        max_examples=30,
        derandomize=True,
        database=None,
        deadline=None,
        stateful_step_count=STEPS,
        suppress_health_check=list(HealthCheck),
    )
    run_state_machine_as_test(LoopMachine, settings=sample)
    runs = sorted(LoopMachine.batches_per_run)
    several = sum(batches >= 3 for batches in runs) / len(runs)
    print(f"{len(runs)} runs; batches shipped: median {runs[len(runs) // 2]}; >= 3: {several:.0%}")
    assert several >= 0.5, f"only {several:.0%} of runs ship three or more batches: {runs}"
