"""The `prime-rl` field preset: each place it decides differently from `per-group` is a
policy key, and each key is pinned here by a small run where the two values part ways."""

from __future__ import annotations

import pytest

from rolloutlog.core.config import RunConfig
from rolloutlog.core.presets import FIELD, preset_overrides
from rolloutlog.events.types import Event, LimitSet, OverloadCut, VersionLive
from tests.core.test_policy_knobs import FIELD_RULES_OFF
from tests.core.test_scenarios import Run


def _ids(run: Run, kind: str, events: list[Event] | None = None) -> list[str]:
    return [e.episode_id for e in run.of_kind(kind, events)]  # type: ignore[attr-defined]


def test_the_prime_rl_preset_is_per_group_with_every_field_rule_on() -> None:
    keys = preset_overrides("prime-rl")
    assert keys["staleness"] == "per-group" and keys["admission_smoothing"] is True
    assert {k: keys[k] for k in FIELD_RULES_OFF} == {
        "requeue_order": "first",  # prime-rl never requeues
        "gate_lag": "one",
        "stale_cancel": "open",
        "stale_step": "before-release",
        "gate_check": "ship-and-live",
        "stale_check": "after-curriculum",
        "queue_sweep": "at-next-check",
        "overload_count": "in-flight",
        "admission_window": "restarting",
        "eval_first": True,
        "staleness_threshold": 0.1,  # verl's θ, read only under its admission
        "updates_per_sync": 1,  # a version every batch
        "weight_update": "freeze",  # prime-rl keeps requests running across an update
        "recycle": False,  # and never aborts them when a batch is full
        "stale_tokens": "drop",  # nor masks tokens: nothing is interrupted
        "over_sampling_batch_size": None,  # slime's keys: off
        "leftovers": "run-on",
        "ship_wait": "none",  # prime-rl ships a full batch at once
        "update_pause": "none",  # its watcher wakes the dispatcher and the ship at the update
        "step_order": "ship-first",  # and the ship answers the update first (stale_step)
        "stale_member": "cancel",
        "queue_limit": 0,  # prime-rl's queue is unbounded
        "queue_eviction": "oldest-episode",
        "max_lag": 0,
        "group_redundancy": 0,  # ROLL's keys: prime-rl leaves them at rolloutlog's rule
        "async_generation_ratio": 0.0,
        "dispatch_gate": True,  # its gate, at TARGET_LAG = 1 (gate_lag)
        "liveness": True,  # no admission rule: the exception has nothing to raise
        "outstanding_depth": None,
    }
    assert FIELD["prime-rl"].source.startswith("PrimeIntellect-ai/prime-rl@559b447 ")


@pytest.mark.parametrize(("gate_lag", "inflight"), [("target-lag", []), ("one", ["g3/0"])])
def test_the_gate_allows_a_lag_of_one_whatever_the_bound(
    gate_lag: str, inflight: list[str]
) -> None:
    """Bound 0 (so target_lag 0): after batch 1 the trainer lags by one. When g2/0 (stale)
    arrives, rolloutlog's gate is shut; prime-rl's `TARGET_LAG = 1` lets g3/0 out, already
    stale."""
    run = Run(group_size=1, max_inflight=1, batch_size=1, max_off_policy_steps=0, gate_lag=gate_lag)
    run.complete("g1/0", "g2/0")
    assert len(run.of_kind("batch_shipped")) == 1
    assert _ids(run, "episode_dropped") == ["g2/0"]
    assert run.inflight() == inflight


@pytest.mark.parametrize(("gate_lag", "batches"), [("target-lag", 1), ("one", 2)])
def test_the_ship_hold_waits_for_version_n_minus_two(gate_lag: str, batches: int) -> None:
    """Frozen groups never go stale, so batch 2 fills at v0: held for v1 under target_lag
    0, shipped under prime-rl's hold (batch N needs v(N - 2))."""
    run = Run(
        group_size=1,
        max_inflight=2,
        batch_size=1,
        max_off_policy_steps=0,
        frozen_fraction=1.0,
        gate_lag=gate_lag,
    )
    run.complete("g1/0", "g2/0")
    assert len(run.of_kind("batch_shipped")) == batches


@pytest.mark.parametrize("stale_cancel", ["in-flight", "open"])
def test_version_pending_drops_a_stale_group_with_only_unscheduled_members(
    stale_cancel: str,
) -> None:
    """g2 opened at v0; g2/0 and g2/1 arrived, g2/2 waits behind the gate. At v1 (step 2,
    bound 0) g2 is stale with nothing in flight: per-group dispatches g2/2 stale at v0;
    prime-rl drops the group."""
    run = Run(
        group_size=3,
        max_inflight=2,
        batch_size=3,
        max_off_policy_steps=0,
        staleness="per-group",
        stale_cancel=stale_cancel,
    )
    run.complete("g1/0", "g1/1", "g1/2")  # batch 1 ships: step 2, the gate shuts
    run.complete("g2/0", "g2/1")
    assert run.inflight() == []
    out = run.publish(1)
    cancelled = [
        (e.group_id, e.unscheduled, e.reason) for e in run.of_kind("episodes_cancelled", out)
    ]
    dispatched = _ids(run, "episode_dispatched", out)
    if stale_cancel == "open":
        assert cancelled == [("g2", 1, "stale")]
        assert "g2/2" not in dispatched
    else:
        assert cancelled == []
        assert "g2/2" in dispatched


def _prime(**config: object) -> Run:
    """prime-rl's keys without its admission window and eval order (no eval here)."""
    keys = {**preset_overrides("prime-rl"), "admission_smoothing": False, "eval_first": False}
    return Run(**{**keys, **config})


@pytest.mark.parametrize(("stale_step", "cancelled"), [("current", 3), ("before-release", 0)])
def test_the_stale_cancellation_reads_the_step_before_the_held_batch_ships(
    stale_step: str, cancelled: int
) -> None:
    """Bound 2, prime-rl's lag of one: batch 3 waits for v1, g4-g6 (v0) in flight. At
    v1 the held batch ships (step 4). prime-rl's dispatcher hears the update first, at
    step 3, where g4-g6 are within the bound: kept; read at step 4 they are cancelled."""
    run = _prime(
        group_size=1, batch_size=1, max_inflight=4, max_off_policy_steps=2, stale_step=stale_step
    )
    run.complete("g1/0", "g2/0", "g3/0")
    assert len(run.of_kind("batch_shipped")) == 2 and run.inflight() == ["g4/0", "g5/0", "g6/0"]
    out = run.publish(1)
    assert [e.step for e in run.of_kind("batch_shipped", out)] == [3]  # type: ignore[attr-defined]
    assert len(run.of_kind("episodes_cancelled", out)) == cancelled


@pytest.mark.parametrize(("gate_check", "at_pending"), [("every-event", 3), ("ship-and-live", 0)])
def test_the_gate_is_read_at_a_ship_and_when_a_version_goes_live(
    gate_check: str, at_pending: int
) -> None:
    """Bound 1: after batch 2 (v0, step 3) the gate is shut. v1 is announced and g3-g5
    are cancelled as stale: the lead is 1 again, but prime-rl reads its gate only at a
    ship and in on_new_version, so the permits stay free until v1 goes live."""
    run = _prime(
        group_size=1, batch_size=1, max_inflight=3, max_off_policy_steps=1, gate_check=gate_check
    )
    run.complete("g1/0", "g2/0")
    out = run.publish(1)
    assert len(run.of_kind("episodes_cancelled", out)) == 3
    assert len(run.of_kind("group_opened", out)) == at_pending
    live = run.feed(VersionLive(t=run.t + 1, version=1))
    assert len(run.of_kind("group_opened", live)) == 3 - at_pending


@pytest.mark.parametrize("stale_check", ["at-finalize", "after-curriculum"])
def test_a_stale_arrival_is_scored_before_the_insertion_check(stale_check: str) -> None:
    """g2/0 (v0) arrives at step 2, stale at bound 0. rolloutlog drops it before scoring;
    prime-rl scores it, shows it to the curriculum, queues it, and the queue check drops
    it. Either way it never trains, and the zero-output guard counts it as idle."""
    run = Run(
        group_size=1,
        max_inflight=2,
        batch_size=1,
        max_off_policy_steps=0,
        staleness="per-group",
        stale_check=stale_check,
    )
    run.complete("g1/0")
    out = run.complete("g2/0")
    (scored,) = run.of_kind("group_scored", out)
    kinds = [e.kind for e in out if e.kind in ("episode_dropped", "group_scored")]
    if stale_check == "after-curriculum":
        assert (scored.episode_ids, scored.admitted) == (("g2/0",), True)
        assert kinds == ["group_scored", "episode_dropped"]
    else:
        assert (scored.episode_ids, scored.admitted) == ((), False)
        assert kinds == ["episode_dropped", "group_scored"]
    assert _ids(run, "episode_dropped") == ["g2/0"]
    assert len(run.of_kind("batch_shipped")) == 1
    assert run.loop.sink_state.idle.stale == 1


@pytest.mark.parametrize(
    ("queue_sweep", "batches", "after_g2"), [("at-ship", 2, 3), ("at-next-check", 1, 2)]
)
def test_the_queue_is_checked_at_the_next_finalize_not_at_the_ship(
    queue_sweep: str, batches: int, after_g2: int
) -> None:
    """g1 queues two episodes for batches of one. rolloutlog cuts batch 2 the moment batch
    1 ships; prime-rl's readiness check runs when a train group finalizes, so batch 2
    waits for g2 (a new version does not release it either)."""
    run = Run(group_size=2, max_inflight=2, batch_size=1, queue_sweep=queue_sweep)
    run.complete("g1/0", "g1/1")
    run.publish(1)
    assert len(run.of_kind("batch_shipped")) == batches
    run.complete("g2/0", "g2/1")
    assert len(run.of_kind("batch_shipped")) == after_g2


@pytest.mark.parametrize(
    ("overload_count", "groups"), [("owed", ["g2"]), ("in-flight", ["g2", "g1"])]
)
def test_an_overload_cut_counts_in_flight_episodes_only(
    overload_count: str, groups: list[str]
) -> None:
    """g1 runs both members, g2 one (one unscheduled). A cut of 2: g2 owes 2, enough for
    rolloutlog; it frees one permit, so prime-rl cuts g1 as well."""
    run = Run(group_size=2, max_inflight=3, batch_size=8, overload_count=overload_count)
    assert run.inflight() == ["g1/0", "g1/1", "g2/0"]
    out = run.feed(OverloadCut(t=1.0, n=2))
    assert [e.group_id for e in run.of_kind("episodes_cancelled", out)] == groups


@pytest.mark.parametrize(("window", "inflight"), [("fixed", 6), ("restarting", 4)])
def test_the_admission_window_restarts_at_the_first_event_after_five_seconds(
    window: str, inflight: int
) -> None:
    """Burst 2. Ticks at t=6 and t=10: fixed windows open at 5 and 10, so both ticks get a
    fresh burst; prime-rl's window restarts at 6 and runs to 11, so t=10 gets none."""
    run = Run(
        group_size=2,
        max_inflight=10,
        batch_size=100,
        admission_smoothing=True,
        admission_window=window,
    )
    for t in (6.0, 10.0):
        run.feed(LimitSet(t=t, max_inflight=10))
    assert len(run.inflight()) == inflight


@pytest.mark.parametrize(("window", "dispatched"), [("fixed", 3), ("restarting", 2)])
def test_a_refund_never_takes_the_window_below_zero(window: str, dispatched: int) -> None:
    """A completion at t=6 opens a new window in both and refunds one admission: fixed
    windows count net growth (-1, so a burst of 2 lets 3 out); prime-rl counts admissions,
    floored at 0."""
    run = Run(
        group_size=2,
        max_inflight=10,
        batch_size=100,
        admission_smoothing=True,
        admission_window=window,
    )
    run.t = 5.0
    out = run.complete("g1/0")  # at t=6
    assert len(run.of_kind("episode_dispatched", out)) == dispatched


@pytest.mark.parametrize(("eval_first", "next_out"), [(False, "g2/2"), (True, "g3/0")])
def test_owed_eval_work_goes_before_a_train_group_that_owes_members(
    eval_first: bool, next_out: str
) -> None:
    """Batch 1 ships with g2/2 unscheduled and an eval group owed. rolloutlog continues the
    oldest open group first; prime-rl's eval mode dispatches the eval epoch first."""
    run = Run(
        group_size=3,
        max_inflight=2,
        batch_size=3,
        max_off_policy_steps=2,
        eval_interval=1,
        eval_first=eval_first,
    )
    run.complete("g1/0", "g1/1", "g1/2")
    assert len(run.of_kind("batch_shipped")) == 1
    assert run.inflight() == ["g2/0", "g2/1"]
    out = run.complete("g2/0")
    assert _ids(run, "episode_dispatched", out) == [next_out]


def test_a_run_under_rolloutlogs_rules_records_the_config_it_did_before_these_keys() -> None:
    """The recorded config (and so every digest and cache key) of today's presets is
    unchanged: the field presets' keys are left out at their defaults, and read back.
    `per-group` records the one key it sets, `stale_cancel` (the seed's "before")."""
    config = RunConfig.from_mapping(preset_overrides("per-episode"))
    assert not set(FIELD_RULES_OFF) & set(config.to_dict())
    group = RunConfig.from_mapping(preset_overrides("per-group"))
    assert set(FIELD_RULES_OFF) & set(group.to_dict()) == {"stale_cancel"}
    assert RunConfig.from_mapping(group.to_dict()) == group
    prime = RunConfig.from_mapping(preset_overrides("prime-rl"))
    assert RunConfig.from_mapping(prime.to_dict()) == prime
    assert RunConfig.from_mapping(config.to_dict()) == config
