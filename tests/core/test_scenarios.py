"""Hand-written scenarios: the race from the change description, the per-group divergence,
the gate, the ship hold, eval and frozen groups, smoothing, the zero-output guard."""

from __future__ import annotations

import attrs
import pytest

from rolloutlog.core import dispatcher, sink
from rolloutlog.core.account import Account
from rolloutlog.core.config import RunConfig
from rolloutlog.core.dispatcher import gated
from rolloutlog.core.errors import InconsistentLogError
from rolloutlog.core.loop import ReactionLoop
from rolloutlog.core.presets import rules_for
from rolloutlog.core.sink import zero_output_reason
from rolloutlog.core.tasks import task_for_group
from rolloutlog.events.schema import SCHEMA_VERSION
from rolloutlog.events.types import (
    BatchShipped,
    EpisodeCompleted,
    EpisodeFailed,
    EpisodesCancelled,
    Event,
    LimitSet,
    OverloadCut,
    RunFinished,
    RunStarted,
    VersionLive,
    VersionPending,
)
from tests.core.core_events import dispatched, opened


class Run:
    """A loop with a raising invariant checker, fed by name."""

    def __init__(self, **config: object) -> None:
        self.config = RunConfig.from_mapping(config)
        self.loop = ReactionLoop(self.config, observers=(Account(self.config),))
        self.log: list[Event] = []
        self.t = 0.0
        self.feed(
            RunStarted(
                t=0.0,
                config=self.config.to_dict(),
                seed=0,
                schema_version=SCHEMA_VERSION,
                code_version="t",
            )
        )

    def feed(self, event: Event) -> list[Event]:
        out = self.loop.feed(event)
        self.log.extend(out)
        return out

    def complete(self, *episode_ids: str, reward: float = 1.0) -> list[Event]:
        out: list[Event] = []
        for episode_id in episode_ids:
            self.t += 1
            out += self.feed(
                EpisodeCompleted(
                    t=self.t,
                    episode_id=episode_id,
                    reward=reward,
                    prompt_tokens=3,
                    completion_tokens=5,
                )
            )
        return out

    def publish(self, version: int) -> list[Event]:
        self.t += 1
        return self.feed(VersionPending(t=self.t, version=version))

    def update(self, version: int) -> list[Event]:
        """A whole weight update: `version` announced, then live (what a run under
        `update_pause = "until-live"` waits for before new train work goes out)."""
        announced = self.publish(version)
        self.t += 1
        return announced + self.feed(VersionLive(t=self.t, version=version))

    def inflight(self) -> list[str]:
        return sorted(self.loop.dispatcher_state.inflight)

    def of_kind(self, kind: str, events: list[Event] | None = None) -> list[Event]:
        return [e for e in (self.log if events is None else events) if e.kind == kind]


def _versions(run: Run) -> dict[str, int]:
    return {e.episode_id: e.policy_version for e in run.of_kind("episode_dispatched")}


class Deciders:
    """Both deciders driven by hand: `apply` evolves both states, `decide` asks one of them.

    Lets a test build histories that our own fill order never produces but another
    orchestrator recording rolloutlog logs could (members of two groups straddling a bump).
    """

    def __init__(self, config: RunConfig) -> None:
        self.dispatcher = dispatcher.initial_state(config)
        self.sink = sink.initial_state(config)
        self.rules = rules_for(config)
        self.seq = 0

    def apply(self, *events: Event) -> list[Event]:
        applied = []
        for event in events:
            event = attrs.evolve(event, seq=self.seq)
            self.seq += 1
            sink.evolve(self.rules, self.sink, event)
            dispatcher.evolve(self.rules, self.dispatcher, event)
            applied.append(event)
        return applied

    def react(self, event: Event) -> list[Event]:
        """Apply `event` and settle it as the reaction loop does (sink, then dispatcher)."""
        (event,) = self.apply(event)
        out, owed = [], [event]
        while owed:
            current = owed.pop(0)
            decided = self.apply(*sink.decide(self.rules, self.sink, current))
            decided += self.apply(*dispatcher.decide(self.rules, self.dispatcher, current))
            out += decided
            owed[:0] = decided
        return out


def _shipped(step: int) -> BatchShipped:
    return BatchShipped(t=0.0, step=step, episode_ids=(), trained_ids=(), tokens=0)


def test_race_two_groups_each_with_a_stale_and_a_fresh_member():
    """The race of the change description. g1 and g2 each have a v0 member (stale at step 3)
    and a v1 member (fresh) in flight. On version_pending both cancellations are decided,
    one per group; then g2's stale member completes (late): it changes nothing. A later
    overload cut of g2 frees everything g2 still owes, and g2 finalizes exactly once."""
    config = RunConfig(group_size=2, max_inflight=4, batch_size=2, max_off_policy_steps=1)
    run = Deciders(config)
    run.apply(
        RunStarted(
            t=0.0, config=config.to_dict(), seed=0, schema_version=SCHEMA_VERSION, code_version="t"
        )
    )
    run.apply(opened("g1", 0, 1), dispatched("g1/0", 0), opened("g2", 0, 1), dispatched("g2/0", 0))
    # v1 is announced after its batch (an empty one here: the race needs only the steps).
    run.apply(_shipped(1), VersionPending(t=0.0, version=1))
    run.apply(dispatched("g1/1", 1), dispatched("g2/1", 1))
    run.apply(_shipped(2), LimitSet(t=0.0, max_inflight=2))  # no refills
    decided = run.react(VersionPending(t=1.0, version=2))
    cancels = [e for e in decided if e.kind == "episodes_cancelled"]
    assert [(c.group_id, c.episode_ids, c.reason) for c in cancels] == [
        ("g1", ("g1/0",), "stale"),
        ("g2", ("g2/0",), "stale"),
    ]
    held = len(run.dispatcher.inflight)
    late = run.react(
        EpisodeCompleted(t=2.0, episode_id="g2/0", reward=1.0, prompt_tokens=1, completion_tokens=1)
    )
    assert run.dispatcher.late_events == 1 and len(run.dispatcher.inflight) == held
    assert not [e for e in late if e.kind == "group_scored"], (
        "the late arrival must not finalize g2"
    )
    assert run.sink.groups["g2"].cancelled == 1 and not run.sink.groups["g2"].arrived
    cut = run.react(OverloadCut(t=3.0, n=1))
    assert [(e.kind, getattr(e, "group_id", None)) for e in cut][:2] == [
        ("episodes_cancelled", "g2"),
        ("group_scored", "g2"),
    ]
    assert cut[0].episode_ids == ("g2/1",) and cut[0].reason == "overload"
    assert "g2" not in run.dispatcher.groups and "g2" not in run.sink.groups
    assert "g2/1" not in run.dispatcher.inflight and "g1/1" in run.dispatcher.inflight


def test_race_partial_group_then_overload_frees_everything_owed():
    """Per-episode: a group keeps its fresh member after a stale cancel; a later overload cut
    of that group cancels the rest (in flight and unscheduled) and the group finalizes."""
    run = Run(group_size=3, max_inflight=4, batch_size=3, max_off_policy_steps=0, target_lag=0)
    # g1/0-2 and g2/0 at v0.
    run.complete("g1/0", "g1/1", "g1/2")  # g2/1, g2/2, g3/0 at v0; g1 -> batch 1 -> step 2
    run.publish(1)  # everything in flight is v0, age 1 > 0: cancelled; refill at v1
    versions = _versions(run)
    fresh = [e for e in run.inflight() if versions[e] == 1]
    assert fresh and all(versions[e] == 0 for e in run.of_kind("episodes_cancelled")[0].episode_ids)
    owed_groups = list(run.loop.dispatcher_state.groups)
    out = run.feed(OverloadCut(t=99.0, n=100))
    cut = run.of_kind("episodes_cancelled", out)
    assert [c.group_id for c in cut] == owed_groups[::-1]
    assert all(c.reason == "overload" for c in cut)
    finalized = {e.group_id for e in run.of_kind("group_scored", out)}
    assert finalized == set(owed_groups), "every cut group finalizes at the sink"
    assert not set(owed_groups) & set(run.loop.dispatcher_state.groups)


def test_per_episode_trains_the_fresh_members_per_group_throws_away():
    """G=4, limit 6, batch 4, bound 1: group g3 starts with two members at v0; its other two
    go out at v1. At v2 the v0 pair is stale. Per-episode cancels exactly those 2, keeps the
    v1 pair running and trains both; per-group cancels all 4 and trains none of g3."""
    results = {}
    for policy in ("per-episode", "per-group"):
        run = Run(
            group_size=4,
            max_inflight=6,
            batch_size=4,
            max_off_policy_steps=1,
            target_lag=1,
            staleness=policy,
            filter_zero_advantages=False,
        )
        run.complete("g1/0", "g1/1", "g1/2", "g1/3")  # batch 1; g2/2-3, g3/0-1 out at v0
        run.publish(1)
        run.complete("g2/0", "g2/1", "g2/2", "g2/3")  # batch 2; g3/2-3, g4/0-1 out at v1
        cancels = run.of_kind("episodes_cancelled", run.publish(2))
        run.complete("g3/2", "g3/3")  # late under per-group
        run.complete("g4/0", "g4/1", "g4/2", "g4/3")
        trained = [e for b in run.of_kind("batch_shipped") for e in b.trained_ids]
        results[policy] = (cancels, trained)
    episode_cancels, episode_trained = results["per-episode"]
    group_cancels, group_trained = results["per-group"]
    assert [(c.group_id, c.episode_ids) for c in episode_cancels] == [("g3", ("g3/0", "g3/1"))]
    assert [(c.group_id, c.episode_ids) for c in group_cancels] == [
        ("g3", ("g3/0", "g3/1", "g3/2", "g3/3"))
    ]
    kept = [e for e in episode_trained if e.startswith("g3/")]
    assert kept == ["g3/2", "g3/3"], "per-episode trains the 2 fresh members of g3"
    assert not [e for e in group_trained if e.startswith("g3/")], "per-group trains none of g3"


def test_gate_pauses_train_dispatch_but_not_eval():
    run = Run(
        group_size=2,
        max_inflight=4,
        batch_size=2,
        max_off_policy_steps=1,
        target_lag=0,
        eval_interval=1,
    )
    run.complete("g1/0", "g1/1")  # g3 fills the permits; batch 1 -> step 2: gated, eval owed
    assert (
        gated(run.loop.rules, run.loop.dispatcher_state)
        and run.loop.dispatcher_state.eval_owed == 1
    )
    run.complete("g2/0")
    assert run.of_kind("group_opened")[-1].work == "eval", "the eval group opens under the gate"
    run.complete("g2/1", "g3/0")
    assert run.of_kind("group_opened")[-1].group_id == "g4", "no train group while gated"
    assert len(run.inflight()) == 3
    # v1 releases the held batch 2 first: step 3, gated again, and another eval group opens.
    opened = run.of_kind("group_opened", run.publish(1))
    assert [e.work for e in opened] == ["eval"] and gated(run.loop.rules, run.loop.dispatcher_state)
    run.publish(2)
    assert not gated(run.loop.rules, run.loop.dispatcher_state)
    opened = run.of_kind("group_opened", run.complete("g4/0"))
    assert [e.work for e in opened] == ["train"]


def test_ship_hold_waits_for_the_trainer():
    run = Run(group_size=1, max_inflight=8, batch_size=1, max_off_policy_steps=3, target_lag=1)
    run.complete(*run.inflight())
    steps = [b.step for b in run.of_kind("batch_shipped")]
    assert steps == [1, 2], "batch 3 needs version >= 3 - 1 - 1 = 1"
    run.publish(1)
    assert [b.step for b in run.of_kind("batch_shipped")][-1] == 3


def test_eval_and_frozen_episodes_never_go_stale():
    run = Run(
        group_size=2,
        max_inflight=6,
        batch_size=2,
        max_off_policy_steps=0,
        target_lag=0,
        frozen_fraction=1.0,
        eval_interval=1,
    )
    for _ in range(6):
        run.complete(*run.inflight()[:2])
        shipped = run.loop.sink_state.step - 1
        if shipped > run.loop.dispatcher_state.version:  # each version once, after its batch
            run.publish(shipped)
    assert not run.of_kind("episode_dropped") and not run.of_kind("episodes_cancelled")
    evals = [e.group_id for e in run.of_kind("group_opened") if e.work == "eval"]
    scored = {e.group_id: e for e in run.of_kind("group_scored")}
    assert evals and all(
        not scored[g].advantages and not scored[g].admitted for g in evals if g in scored
    )


def test_failed_members_are_not_scored():
    run = Run(group_size=3, max_inflight=3, batch_size=2)
    run.complete("g1/0", reward=1.0)
    run.feed(EpisodeFailed(t=50.0, episode_id="g1/1", error="boom"))
    run.complete("g1/2", reward=0.0)
    (scored,) = run.of_kind("group_scored")
    assert scored.episode_ids == ("g1/0", "g1/2") and scored.advantages == (0.5, -0.5)


def test_token_batches_cut_the_oldest_until_the_token_target():
    run = Run(group_size=2, max_inflight=2, token_batch_size=20, filter_zero_advantages=False)
    run.complete("g1/0", reward=1.0)  # 8 tokens each
    run.complete("g1/1", reward=0.0)
    assert not run.of_kind("batch_shipped")
    run.complete("g2/0", reward=1.0)
    run.complete("g2/1", reward=0.0)
    (batch,) = run.of_kind("batch_shipped")
    assert batch.episode_ids == ("g1/0", "g1/1", "g2/0") and batch.tokens == 24


def test_limit_lowering_cancels_nothing():
    run = Run(group_size=2, max_inflight=6)
    before = run.inflight()
    out = run.feed(LimitSet(t=1.0, max_inflight=1))
    assert run.inflight() == before and not run.of_kind("episodes_cancelled", out)
    run.complete(*before[:5])
    assert len(run.inflight()) == 1, "admissions wait until in-flight drops below the limit"


def test_admission_smoothing_caps_growth_per_window():
    run = Run(group_size=2, max_inflight=40, admission_smoothing=True)
    assert len(run.inflight()) == 4, "max(G, 40 // 10) = 4 per 5-second window"
    run.feed(OverloadCut(t=1.0, n=4))  # cancellations do not refund
    assert run.inflight() == []
    run.t = 5.0
    run.feed(LimitSet(t=5.0, max_inflight=40))  # a new window
    assert len(run.inflight()) == 4
    run.t = 6.0
    run.complete(run.inflight()[0])  # a natural completion refunds one admission
    assert len(run.inflight()) == 4


def test_shutdown_cancels_everything_owed():
    run = Run(group_size=4, max_inflight=6)
    run.feed(RunFinished(t=9.0, reason="test"))
    cancels = run.of_kind("episodes_cancelled")
    assert {c.reason for c in cancels} == {"shutdown"}
    assert sum(len(c.episode_ids) + c.unscheduled for c in cancels) == 8


def test_zero_output_guard_names_the_cause():
    run = Run(
        group_size=2, max_inflight=2, batch_size=2, curriculum="informative", zero_output_batches=2
    )
    run.complete(*run.inflight(), reward=1.0)  # equal rewards: rejected by the curriculum
    assert zero_output_reason(run.loop.sink_state) is None, "one batch' worth is not enough"
    run.complete(*run.inflight(), reward=1.0)
    reason = run.loop.zero_output_reason()
    assert reason and "curriculum 'informative'" in reason and "2 groups rejected" in reason
    run.complete("g3/0", reward=1.0)
    run.complete("g3/1", reward=0.0)  # admitted: the guard resets
    assert run.loop.zero_output_reason() is None


def test_task_source_is_deterministic_and_seeded():
    a, b = RunConfig(seed=1), RunConfig(seed=2)
    tasks = [task_for_group(a, n, "train").task_id for n in range(1, 50)]
    assert tasks == [task_for_group(a, n, "train").task_id for n in range(1, 50)]
    assert tasks != [task_for_group(b, n, "train").task_id for n in range(1, 50)]
    assert len(set(tasks)) > 40


def test_inconsistent_events_name_their_seq():
    run = Run(group_size=2, max_inflight=2)
    with pytest.raises(InconsistentLogError, match=r"seq 5 .*g9 is not open"):
        dispatcher.evolve(
            run.loop.rules,
            run.loop.dispatcher_state,
            EpisodesCancelled(
                t=1.0, seq=5, group_id="g9", episode_ids=(), unscheduled=1, reason="stale"
            ),
        )


def test_zero_output_guard_fires_with_token_batches_when_all_work_is_cancelled():
    """Found by the simulator: token-mode counted arrived tokens only, so a run whose work
    was all cancelled never stopped. Work is now counted in finalized episodes."""
    for mode in ({"batch_size": 8}, {"token_batch_size": 100}):
        run = Run(group_size=2, max_inflight=2, zero_output_batches=2, **mode)
        for i in range(20):
            run.feed(OverloadCut(t=float(i + 1), n=2))
        assert run.loop.zero_output_reason(), mode


def test_a_scored_member_that_never_arrived_is_refused_with_its_seq():
    """Found by replay's tampered logs: this raised a bare KeyError."""
    run = Run(group_size=2, max_inflight=2, batch_size=8)
    run.complete("g1/0")
    run.feed(EpisodeFailed(t=9.0, episode_id="g1/1", error="x"))
    (scored,) = run.of_kind("group_scored")
    state, rules = sink.initial_state(run.config), rules_for(run.config)
    for event in run.log[: scored.seq]:
        sink.evolve(rules, state, event)
    tampered = attrs.evolve(
        scored, episode_ids=("g1/0", "g1/5"), advantages=(0.0, 0.0), admitted=True
    )
    with pytest.raises(
        InconsistentLogError, match=rf"seq {scored.seq} .*g1/5 is not a fresh arrival"
    ):
        sink.evolve(rules, state, tampered)
