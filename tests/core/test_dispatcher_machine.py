"""The dispatcher alone, driven by random world events in a RuleBasedStateMachine.

Step advances are fed as bare `batch_shipped` events (the dispatcher only reads the step
from them), so this exercises the dispatcher without the sink.
"""

from __future__ import annotations

import attrs
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from rolloutlog.core import dispatcher
from rolloutlog.core.config import RunConfig
from rolloutlog.core.presets import rules_for
from rolloutlog.core.staleness import is_stale
from rolloutlog.events.schema import SCHEMA_VERSION
from rolloutlog.events.types import (
    BatchShipped,
    EpisodeCompleted,
    EpisodeFailed,
    Event,
    LimitSet,
    OverloadCut,
    RunStarted,
    VersionPending,
)


class DispatcherMachine(RuleBasedStateMachine):
    """Shadow bookkeeping beside the dispatcher; every rule feeds one world event."""

    @initialize(
        group_size=st.integers(1, 8),
        extra=st.integers(0, 12),
        bound=st.integers(0, 2),
        lag=st.integers(0, 2),
        policy=st.sampled_from(["per-episode", "per-group"]),
        eval_interval=st.sampled_from([0, 2]),
        frozen=st.sampled_from([0.0, 0.4]),
    )
    def start(self, group_size, extra, bound, lag, policy, eval_interval, frozen):
        self.config = RunConfig(
            group_size=group_size,
            max_inflight=1 + extra,
            max_off_policy_steps=bound,
            target_lag=min(lag, bound),
            staleness=policy,
            eval_interval=eval_interval,
            frozen_fraction=frozen,
        )
        self.state = dispatcher.initial_state(self.config)
        self.rules = rules_for(self.config)
        self.t = 0.0
        self.seq = 0
        self.limit = self.config.max_inflight
        self.inflight: dict[str, tuple[str, int]] = {}  # episode -> (group, version)
        self.groups: dict[str, tuple[bool, bool, int]] = {}  # group -> (train, frozen, start)
        self.terminal: dict[str, str] = {}  # episode -> how it ended
        self.cancelled_recently: list[str] = []
        self.cancellations: list[Event] = []
        self._apply(
            RunStarted(
                t=0.0,
                config=self.config.to_dict(),
                seed=0,
                schema_version=SCHEMA_VERSION,
                code_version="t",
            )
        )

    # --- the driver: evolve, then decide, then apply decisions (dispatcher only) -------------

    def _apply(self, event: Event) -> None:
        """Like the reaction loop: a decider's whole answer is applied before it decides again."""
        owed = [self._evolve(event)]
        while owed:
            current = owed.pop(0)
            owed.extend(self._evolve(e) for e in dispatcher.decide(self.rules, self.state, current))

    def _evolve(self, event: Event) -> Event:
        self._observe_before(event)
        event = attrs.evolve(event, seq=self.seq)
        self.seq += 1
        self.state = dispatcher.evolve(self.rules, self.state, event)
        return event

    def _observe_before(self, event) -> None:
        kind = event.kind
        if kind == "episode_dispatched":
            assert len(self.inflight) < self.limit, "admitted above the limit"
            train, frozen, start = self.groups[event.group_id]
            expected = start if self.config.staleness == "per-group" else self.state.version
            # Unscheduled members, even of a partly cancelled group, go out at the version
            # current when they are dispatched (per-group: the group's start version).
            assert event.policy_version == expected
            self.inflight[event.episode_id] = (event.group_id, event.policy_version)
        elif kind == "group_opened":
            self.groups[event.group_id] = (
                event.work == "train",
                event.frozen,
                event.policy_version,
            )
        elif kind == "episodes_cancelled":
            self.cancellations.append(event)
            train, frozen, _ = self.groups[event.group_id]
            for episode_id in event.episode_ids:
                assert episode_id not in self.terminal, f"{episode_id} has two terminal events"
                _, version = self.inflight.pop(episode_id)
                self.terminal[episode_id] = "cancelled"
                self.cancelled_recently.append(episode_id)
                if event.reason == "stale":
                    assert is_stale(
                        version,
                        self.state.step,
                        self.config.max_off_policy_steps,
                        train=train,
                        frozen=frozen,
                    ), f"{episode_id} cancelled as stale at age {self.state.step - 1 - version}"
        elif kind in ("episode_completed", "episode_failed"):
            if event.episode_id in self.inflight:
                del self.inflight[event.episode_id]
                self.terminal[event.episode_id] = kind
            # otherwise late: must change nothing (checked by the permit invariant)
        elif kind == "limit_set":
            self.limit = event.max_inflight

    # --- rules -------------------------------------------------------------------------------

    def _tick(self) -> float:
        self.t += 1.0
        return self.t

    @precondition(lambda self: self.inflight)
    @rule(pick=st.integers(0, 10**6), fail=st.booleans())
    def arrive(self, pick, fail):
        episode_id = sorted(self.inflight)[pick % len(self.inflight)]
        if fail:
            self._apply(EpisodeFailed(t=self._tick(), episode_id=episode_id, error="x"))
        else:
            self._apply(
                EpisodeCompleted(
                    t=self._tick(),
                    episode_id=episode_id,
                    reward=1.0,
                    prompt_tokens=1,
                    completion_tokens=1,
                )
            )

    @precondition(lambda self: self.cancelled_recently)
    @rule(pick=st.integers(0, 10**6))
    def late_arrival(self, pick):
        episode_id = self.cancelled_recently.pop(pick % len(self.cancelled_recently))
        held, late = len(self.state.inflight), self.state.late_events
        self._apply(
            EpisodeCompleted(
                t=self._tick(),
                episode_id=episode_id,
                reward=1.0,
                prompt_tokens=1,
                completion_tokens=1,
            )
        )
        assert self.terminal[episode_id] == "cancelled"
        assert len(self.state.inflight) == held, "a late event changed the permits held"
        assert self.state.late_events == late + 1

    @precondition(lambda self: self.state.version >= self.state.step - 1 - self.config.target_lag)
    @rule()
    def advance_step(self):
        """A batch ships; like the sink, only once the trainer is close enough (ship hold)."""
        self._apply(
            BatchShipped(
                t=self._tick(), step=self.state.step, episode_ids=(), trained_ids=(), tokens=0
            )
        )

    @precondition(lambda self: self.state.version < self.state.step - 1)
    @rule(jump=st.integers(1, 3))
    def publish(self, jump):
        version = min(self.state.version + jump, self.state.step - 1)
        self._apply(VersionPending(t=self._tick(), version=version))
        if self.config.staleness == "per-group":
            return  # per-group stamps late members with the group's start version: they may
            # be dispatched already stale, and the sink drops them (the waste per-episode removes)
        stale_left = [
            e
            for e, (g, v) in self.inflight.items()
            if is_stale(
                v,
                self.state.step,
                self.config.max_off_policy_steps,
                train=self.groups[g][0],
                frozen=self.groups[g][1],
            )
        ]
        assert not stale_left, f"stale episodes left in flight: {stale_left}"

    @rule(limit=st.integers(1, 20))
    def set_limit(self, limit):
        self._apply(LimitSet(t=self._tick(), max_inflight=limit))

    @precondition(lambda self: self.inflight)
    @rule(n=st.integers(1, 20))
    def overload(self, n):
        open_groups = list(self.state.groups)
        owed = sum(g.owed() for g in self.state.groups.values())
        self.cancellations = []
        self._apply(OverloadCut(t=self._tick(), n=n))
        cut = [e for e in self.cancellations if e.reason == "overload"]
        count = sum(len(e.episode_ids) + e.unscheduled for e in cut)
        assert count >= min(n, owed), f"cut {count} of {owed} owed, asked for {n}"
        # Whole groups, youngest first: exactly the newest open groups, newest first.
        assert [e.group_id for e in cut] == open_groups[::-1][: len(cut)]
        # No more than needed: without the last (oldest) victim the cut would be short.
        assert count - len(cut[-1].episode_ids) - cut[-1].unscheduled < n

    # --- invariants ---------------------------------------------------------------------

    @invariant()
    def permits_match_inflight(self):
        held = len(self.state.inflight)
        assert held == len(self.inflight) >= 0, (held, len(self.inflight))
        assert sum(len(g.inflight) for g in self.state.groups.values()) == held

    @invariant()
    def groups_account_for_members(self):
        for group in self.state.groups.values():
            assert group.owed() > 0, f"{group.group_id} owes nothing but is still open"
            assert group.dispatched + group.unscheduled <= group.size


TestDispatcherMachine = DispatcherMachine.TestCase
