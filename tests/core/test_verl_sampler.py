"""verl's v1 sampler strategies (`ReplayBufferAsync` at verl 1dda039): `verl-wait` holds the
batch while work is at its last chance, `verl-drop` lets stale work run to its end and drops
it at the sink, refilling with a fresh prompt. A verl prompt's span at step `g` is
`g − prompt_step + 1`: rolloutlog's rollout age plus one, so verl's threshold T is the bound
`max_off_policy_steps` + 1 (docs/policies.md)."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rolloutlog.core.account import Account, InvariantViolation
from rolloutlog.core.account.properties import HARD_BOUND, SHIP_WAIT, kept_properties
from rolloutlog.core.config import RunConfig
from rolloutlog.core.loop import ReactionLoop
from rolloutlog.core.presets import CHOICES, preset_overrides
from rolloutlog.core.rules import cancellation
from rolloutlog.events.jsonl import read_jsonl
from rolloutlog.events.types import (
    WORLD_KINDS,
    BatchShipped,
    EpisodeDropped,
    EpisodesCancelled,
    GroupOpened,
    VersionLive,
)
from rolloutlog.testing.scripted_world import scripted_log
from rolloutlog.testing.strategies import run_configs
from tests.core.requeue_runs import TINKER_REQUEUE
from tests.core.test_scenarios import Run
from tests.core.test_ship_wait_properties import WaitWatch

# G = 2, batches of one group, bound 1 (verl's T = 2), two groups outstanding.
SMALL: dict[str, Any] = {
    "group_size": 2,
    "max_inflight": 8,
    "batch_size": 2,
    "max_off_policy_steps": 1,
    "target_lag": 1,
}


def _run(policy: str, **config: Any) -> Run:
    return Run(**{**SMALL, **preset_overrides(policy), **config})


def _batches(run: Run) -> list[tuple[str, ...]]:
    return [e.episode_ids for e in run.log if isinstance(e, BatchShipped)]


def _g2_straggles(run: Run) -> None:
    """g1 ships batch 1; v1 is published before g3 is put (the gate's lag is zero); g3
    fills batch 2 while g2 (v0) is still out: age 1 at step 2, verl's span 2 = T."""
    run.complete("g1/0", "g1/1")
    assert [e.group_id for e in run.log if isinstance(e, GroupOpened)] == ["g1", "g2"]
    run.update(1)  # verl's next step submits after on_step_end's sync (update_pause)
    run.complete("g3/0", "g3/1")


def test_verl_wait_holds_the_batch_until_the_prompt_at_the_threshold_finishes() -> None:
    run = _run("verl-wait")
    _g2_straggles(run)
    assert _batches(run) == [("g1/0", "g1/1")]  # span(g2) = 2 ≥ T: _has_enough_samples False
    run.complete("g2/0", "g2/1")
    assert _batches(run)[1] == ("g2/0", "g2/1")  # oldest prompt step first
    summary = run.loop.observers[0].summary()
    assert summary["ship_waits"] == 1 and summary["episodes_dropped_stale"] == 0


def test_verl_drop_runs_the_stale_group_on_drops_it_and_refills_a_fresh_prompt() -> None:
    run = _run("verl-drop")
    _g2_straggles(run)
    assert _batches(run) == [("g1/0", "g1/1"), ("g3/0", "g3/1")]  # nothing waits
    run.update(2)  # g2 is now stale (age 2, span 3 > T), but not cancelled
    run.complete("g2/0", "g2/1")
    assert not any(isinstance(e, EpisodesCancelled) for e in run.log)
    drops = [(e.episode_id, e.reason, e.age) for e in run.log if isinstance(e, EpisodeDropped)]
    assert drops == [("g2/0", "stale", 2), ("g2/1", "stale", 2)]
    refill = [e for e in run.log if isinstance(e, GroupOpened)][-1]
    assert refill.group_id == "g5"  # the group g2's eviction left room for
    earlier = [e.task_id for e in run.log if isinstance(e, GroupOpened)][:-1]
    assert refill.task_id not in earlier  # a fresh prompt, not g2's task again


@pytest.mark.parametrize("sampled", [True, False])
def test_verl_drop_evicts_a_stale_group_when_the_next_step_samples(sampled: bool) -> None:
    """verl's `sample` evicts stale finished groups only while a step samples
    (replay_buffer.py:547-566): g2, stale for step 3, finishes while step 2 trains and waits
    in the queue through the sync, and the refill opens after the eviction. With `--set
    stale_check=at-finalize --set queue_sweep=at-ship` it drops as it finalizes."""
    keys = {} if sampled else {"stale_check": "at-finalize", "queue_sweep": "at-ship"}
    run = _run("verl-drop", **keys)
    _g2_straggles(run)
    run.complete("g2/0", "g2/1")  # age 2 at step 3 > bound 1; step 3 waits for v2
    run.publish(2)
    held = [e.episode_id for e in run.log if isinstance(e, EpisodeDropped)]
    assert held == ([] if sampled else ["g2/0", "g2/1"])
    run.t += 1
    run.feed(VersionLive(t=run.t, version=2))
    drops = [(e.episode_id, e.reason, e.age) for e in run.log if isinstance(e, EpisodeDropped)]
    assert drops == [("g2/0", "stale", 2), ("g2/1", "stale", 2)]
    last_drop = max(e.seq for e in run.log if isinstance(e, EpisodeDropped))
    refill = [e for e in run.log if isinstance(e, GroupOpened)][-1]
    assert refill.seq > last_drop and refill.policy_version == 2


@pytest.mark.parametrize("order", ["submit-first", "ship-first"])
def test_verl_wait_at_bound_zero_waits_for_the_prompts_its_step_submits(order: str) -> None:
    """verl's step submits its prompts, then samples (trainer_base.py:509-517, 1420-1422):
    at T = 1 those prompts hold the sample (replay_buffer.py:530-539). Under `step_order =
    "submit-first"` the dispatcher answers `version_live` first and the ship waits for
    them; under `ship-first` the sink ships the queued batch first, and the gate of the
    next step keeps them from opening at all."""
    run = _run("verl-wait", max_off_policy_steps=0, target_lag=0, step_order=order)
    run.complete("g1/0", "g1/1", "g2/0", "g2/1")  # batch 1 waits for g2, then ships g1
    assert _batches(run) == [("g1/0", "g1/1")]
    run.update(1)
    opened = [e.group_id for e in run.log if isinstance(e, GroupOpened)]
    if order == "ship-first":
        assert opened == ["g1", "g2"] and _batches(run)[1] == ("g2/0", "g2/1")
        return
    assert opened == ["g1", "g2", "g3"] and len(_batches(run)) == 1
    run.complete("g3/0", "g3/1")
    assert _batches(run)[1] == ("g2/0", "g2/1")


def test_tinkers_requeue_reopens_the_same_task_where_verl_drop_takes_a_fresh_one() -> None:
    run = _run("tinker", **TINKER_REQUEUE)  # its requeue rule; its workers run one group here
    run.complete("g1/0", "g1/1")
    run.publish(1)
    run.complete("g3/0", "g3/1")
    run.publish(2)
    run.complete("g2/0", "g2/1")
    drops = {e.reason for e in run.log if isinstance(e, EpisodeDropped)}
    assert drops == {"requeue"}


def test_the_account_flags_a_stale_cancellation_under_run_on(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    rows = CHOICES["stale_member"]["run-on"]
    monkeypatch.setitem(rows, "cancels_stale_work", cancellation.cancel_stale_work)
    run = _run("verl-drop")
    _g2_straggles(run)
    with pytest.raises(InvariantViolation, match="stale cancellation under stale_member=run-on"):
        run.publish(2)


def test_each_strategy_keeps_its_own_properties() -> None:
    wait = RunConfig.from_mapping({**SMALL, **preset_overrides("verl-wait")})
    drop = RunConfig.from_mapping({**SMALL, **preset_overrides("verl-drop")})
    assert SHIP_WAIT in kept_properties(wait) and HARD_BOUND not in kept_properties(wait)
    assert HARD_BOUND in kept_properties(drop) and SHIP_WAIT not in kept_properties(drop)


_VERL_WAIT = {k: v for k, v in preset_overrides("verl-wait").items() if k != "staleness"}


@given(
    run_configs(**_VERL_WAIT, staleness="soft"),
    st.integers(0, 2**32 - 1),
    st.integers(0, 200),
)
def test_verl_wait_never_stalls(config: RunConfig, seed: int, steps: int) -> None:
    """Under verl-wait's keys (gate lag zero) a waiting batch always leaves work in flight
    and the gate open, so an arrival or a cancellation ends the wait (docs/contract.md)."""
    watch = WaitWatch()
    loop = ReactionLoop(config, observers=(Account(config), watch))
    scripted_log(config, random.Random(seed).randrange, steps, loop=loop)


@given(run_configs(**preset_overrides("verl-drop")), st.integers(0, 2**32 - 1))
def test_verl_drop_trains_nothing_past_the_bound(config: RunConfig, seed: int) -> None:
    account = Account(config)
    loop = ReactionLoop(config, observers=(account,))
    scripted_log(config, random.Random(seed).randrange, 120, loop=loop)
    assert account.summary()["episodes_trained_past_bound"] == 0


def test_a_cut_under_submit_first_never_ships_what_the_steps_sweep_drops() -> None:
    """Found by test_stray_arrivals (queue_sweep at-ship, batches of one episode): at
    `version_pending` the dispatcher's stale cancellations finalize g20 before the ship of
    step 20 is settled, and g20's `group_scored` cut step 21 while the whole-queue sweep of
    that ship was still owed: g22/3 shipped at age 3 past bound 2. The recorded log (the
    old decisions) is re-decided from its world events under the account."""
    data = Path(__file__).parent / "data" / "submit_first_owed_sweep.jsonl"
    with data.open() as lines:
        recorded = list(read_jsonl(lines))
    loop = ReactionLoop.from_run_started(recorded[0])  # type: ignore[arg-type]
    loop.observers = (Account(loop.config),)
    log = [e for world in recorded if world.kind in WORLD_KINDS for e in loop.feed(world)]
    shipped = {e for batch in log if isinstance(batch, BatchShipped) for e in batch.episode_ids}
    assert "g22/3" not in shipped  # the old cut shipped it, which the account refuses
    dropped = {e.episode_id: e.age for e in log if isinstance(e, EpisodeDropped)}
    assert dropped["g22/3"] == 3
