"""Capacity admission, straggler cuts, age-ordered batches, and the policy presets."""

from __future__ import annotations

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from rolloutlog.core.config import ConfigError, RunConfig
from rolloutlog.core.loop import ReactionLoop
from rolloutlog.core.presets import parse_policy_list, preset_overrides
from rolloutlog.events.schema import SCHEMA_VERSION
from rolloutlog.events.types import OverloadCut, RunStarted
from tests.core.test_scenarios import Run


def test_capacity_admission_stops_train_dispatch_at_the_horizon():
    # horizon (max_off 0 + v0 + 1) × batch 2 = 2 train episodes promised at v0
    run = Run(
        group_size=2,
        max_inflight=8,
        batch_size=2,
        max_off_policy_steps=0,
        target_lag=0,
        admission="capacity",
    )
    assert run.inflight() == ["g1/0", "g1/1"], "limit 8, but capacity admits only 2"
    run.complete("g1/0", "g1/1")  # batch 1 ships: trained 2 = capacity at v0
    assert run.inflight() == ["g2/0"], "liveness: with nothing in flight, one may go out"
    # v1: g2/0 (v0) is stale at step 2 and cancelled; capacity (0 + 1 + 1) × 2 = 4 with 2
    # trained leaves room for two.
    run.publish(1)
    assert run.inflight() == ["g2/1", "g3/0"]


def test_capacity_admission_never_stalls_a_group_larger_than_the_room():
    """Found by the simulator's swarm: G = 4 with room for 2 episodes waited forever for
    the members the rule held back. With nothing in flight, one member may always go out."""
    run = Run(
        group_size=4,
        max_inflight=8,
        batch_size=2,
        max_off_policy_steps=0,
        target_lag=0,
        admission="capacity",
    )
    for _ in range(4):
        run.complete(*run.inflight())
    assert [e.group_id for e in run.of_kind("group_scored")] == ["g1"]


def test_without_capacity_admission_the_limit_binds():
    run = Run(group_size=2, max_inflight=8, batch_size=2, max_off_policy_steps=0, target_lag=0)
    assert len(run.inflight()) == 8


def test_straggler_cut_saves_the_arrived_members_at_risk():
    """G=3, bound 1. g2/0 arrives at v0; at step 2 its age is 1 = the bound, so the next
    batch would make it stale while g2/1, g2/2 still run. The cut cancels them and g2
    finalizes now, with g2/0 scored."""
    run = Run(
        group_size=3,
        max_inflight=6,
        batch_size=3,
        max_off_policy_steps=1,
        target_lag=1,
        straggler_cut=True,
    )
    run.complete("g2/0")  # g3/0 at v0
    out = run.complete("g1/0", "g1/1", "g1/2")  # batch 1 -> step 2: g2/0 at risk
    cuts = [e for e in out if e.kind == "episodes_cancelled"]
    assert [(c.group_id, c.reason) for c in cuts] == [("g2", "straggler")]
    assert cuts[0].episode_ids == ("g2/1", "g2/2") and cuts[0].unscheduled == 0
    scored = [e for e in out if e.kind == "group_scored" and e.group_id == "g2"]
    assert scored and scored[0].episode_ids == ("g2/0",)


def test_straggler_cut_never_touches_a_group_without_arrivals_at_risk():
    run = Run(
        group_size=3,
        max_inflight=6,
        batch_size=3,
        max_off_policy_steps=2,
        target_lag=1,
        straggler_cut=True,
    )
    run.complete("g2/0")
    out = run.complete("g1/0", "g1/1", "g1/2")  # step 2: g2/0 is age 1 < bound 2
    assert not [e for e in out if e.kind == "episodes_cancelled"]


def test_oldest_first_ships_the_oldest_dispatch_versions_first():
    """Batch 3 is held for v2 while g4 (dispatched at v1) and then g3 (at v0) queue up:
    fifo ships g4 first, oldest-first ships g3, whose episodes are closer to the bound."""
    batch_3 = {}
    for order in ("fifo", "oldest-first"):
        run = Run(
            group_size=2,
            max_inflight=4,
            batch_size=2,
            max_off_policy_steps=3,
            target_lag=0,
            batch_order=order,
            filter_zero_advantages=False,
        )
        run.complete("g1/0", "g1/1")  # g3 out at v0; batch 1 -> step 2
        run.publish(1)
        run.complete("g2/0", "g2/1")  # g4 out at v1; batch 2 -> step 3, batch 3 held for v2
        run.complete("g4/0", "g4/1", "g3/0", "g3/1")
        assert [b.step for b in run.of_kind("batch_shipped")] == [1, 2]
        run.publish(2)
        batch_3[order] = run.of_kind("batch_shipped")[2].episode_ids
    assert batch_3 == {"fifo": ("g4/0", "g4/1"), "oldest-first": ("g3/0", "g3/1")}


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        (
            "per-group",
            {
                "staleness": "per-group",
                "admission": "none",
                "straggler_cut": False,
                "batch_order": "fifo",
                "requeue": "none",
            },
        ),
        (
            "per-episode+capacity",
            {
                "staleness": "per-episode",
                "admission": "capacity",
                "straggler_cut": False,
                "batch_order": "fifo",
                "requeue": "none",
            },
        ),
        (
            "all",
            {
                "staleness": "per-episode",
                "admission": "capacity",
                "straggler_cut": True,
                "batch_order": "oldest-first",
                "requeue": "none",
            },
        ),
    ],
)
def test_presets_set_every_policy_key(name, expected):
    # per-group is the seed's "before": a stale group's unscheduled members go with it
    base = {"stale_cancel": "open"} if expected["staleness"] == "per-group" else {}
    # Every preset turns prime-rl's smoothing off unless it sets it (core/presets._OFF).
    smoothing = {"admission_smoothing": False}
    assert preset_overrides(name) == {**expected, **smoothing, **FIELD_RULES_OFF, **base}


# The keys field presets choose (tests/core/test_prime_rl_preset.py), at today's rules.
FIELD_RULES_OFF = {
    "requeue_order": "first",
    "gate_lag": "target-lag",
    "dispatch_gate": True,
    "liveness": True,
    "outstanding_depth": None,  # verl's num_warmup_batches: read only under outstanding
    "stale_cancel": "in-flight",
    "stale_step": "current",
    "gate_check": "every-event",
    "stale_check": "at-finalize",
    "queue_sweep": "at-ship",
    "overload_count": "owed",
    "admission_window": "fixed",
    "eval_first": False,
    "staleness_threshold": 0.1,  # verl admission's θ: read only under admission = "verl"
    "updates_per_sync": 1,
    "ship_wait": "none",
    "update_pause": "none",
    "step_order": "ship-first",
    "weight_update": "freeze",
    "recycle": False,
    "stale_tokens": "drop",
    "stale_member": "cancel",
    "queue_limit": 0,
    "queue_eviction": "oldest-episode",
    "max_lag": 0,
    "over_sampling_batch_size": None,
    "leftovers": "run-on",
    "group_redundancy": 0,
    "async_generation_ratio": 0.0,
}


def test_bad_presets_are_refused_by_name():
    with pytest.raises(ConfigError, match="unknown rule 'fast'"):
        preset_overrides("per-episode+fast")
    with pytest.raises(ConfigError, match="must start with"):
        preset_overrides("greedy")
    with pytest.raises(ConfigError, match="twice"):
        parse_policy_list("all,all")
    assert parse_policy_list("per-episode, per-group") == ["per-episode", "per-group"]


def test_the_smoothing_tick_is_owed_only_with_nothing_in_flight_and_falls_on_a_window() -> None:
    """The time rule is the core's: drivers keep only a timer (`ReactionLoop.next_tick`)."""
    smoothing = RunConfig(group_size=2, max_inflight=2, admission_smoothing=True)
    loop = ReactionLoop(smoothing)
    loop.feed(
        RunStarted(
            t=0.0,
            config=smoothing.to_dict(),
            seed=0,
            schema_version=SCHEMA_VERSION,
            code_version="t",
        )
    )
    assert loop.dispatcher_state.inflight and loop.next_tick(1.0) is None
    loop.feed(OverloadCut(t=2.0, n=2))  # cancels all, refunds no admission: the window is spent
    assert not loop.dispatcher_state.inflight
    assert loop.next_tick(2.0) == 5.0 and loop.next_tick(5.0) == 10.0
    tick = loop.tick(5.0)
    assert (tick.t, tick.max_inflight) == (5.0, loop.dispatcher_state.limit)
    assert any(e.kind == "episode_dispatched" for e in loop.feed(tick))  # the new window opens
    plain = RunConfig(group_size=2, max_inflight=2)
    assert ReactionLoop(plain).next_tick(2.0) is None


@pytest.mark.parametrize("window", ["fixed", "restarting"])
@given(start=st.floats(0.0, 1e6, allow_nan=False))
@example(start=15.020167019929113)  # a what-if's re-run of a prime-rl log stalled here
def test_the_smoothing_tick_opens_the_next_window_wherever_the_spent_one_began(
    window: str, start: float
) -> None:
    """Regression: prime-rl's restarting window was due at `start + 5` (`next_tick`) but
    restarted only when `t - start >= 5`, which floats can miss at that very `t` (15.02 +
    5 - 15.02 is 4.999999999999998): the tick opened nothing and the run stalled."""
    config = RunConfig(
        group_size=2, max_inflight=2, admission_smoothing=True, admission_window=window
    )
    loop = ReactionLoop(config)
    started = RunStarted(
        t=start, config=config.to_dict(), seed=0, schema_version=SCHEMA_VERSION, code_version="t"
    )
    loop.feed(started)
    loop.feed(OverloadCut(t=start, n=2))  # the window's burst spent, nothing in flight
    due = loop.next_tick(start)
    assert due is not None and due > start
    assert any(e.kind == "episode_dispatched" for e in loop.feed(loop.tick(due)))
