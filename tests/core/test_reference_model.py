"""Today's deciders against the independent reference model (rolloutlog.testing.reference).

Both re-decide the same random worlds; every event of the two logs must be identical, and
the first difference is reported with its seq. The worlds are `world_logs()` (the scripted
world with every rule of `run_configs`, and a restart) and `equivalence_logs()` (large G
under a binding limit, single-version groups): ci runs 300 of them, nightly 5,000.
"""

from __future__ import annotations

import random
from pathlib import Path

import attrs
from hypothesis import example, given, settings
from hypothesis import strategies as st

from rolloutlog.core.config import RunConfig
from rolloutlog.core.loop import DISPATCHER
from rolloutlog.core.rules.table import Rules
from rolloutlog.events.jsonl import read_jsonl
from rolloutlog.events.log_reader import read_log
from rolloutlog.events.types import EpisodeDispatched, Event
from rolloutlog.testing.equivalence import (
    REFERENCE_MODEL,
    TODAYS_DECIDERS,
    assert_equivalent,
    decided_by,
    first_difference,
)
from rolloutlog.testing.reference import reference_log
from rolloutlog.testing.scripted_world import scripted_log
from rolloutlog.testing.strategies import equivalence_logs, run_configs, world_logs

ASPECTS = ("events", "error")
SIMULATED = Path(__file__).resolve().parents[2] / "examples" / "simulated.arrow"


@given(st.one_of(world_logs(checked=False, restarts=True), equivalence_logs()))
def test_the_reference_model_decides_every_event_as_the_core_does(log: list[Event]) -> None:
    assert_equivalent(log, REFERENCE_MODEL, TODAYS_DECIDERS, ASPECTS)


# The keys of prime-rl's update order and gate, and of tinker's workers and builder queue:
# worlds of their own, so that `run_configs`' draws keep the coverage they were tuned for.
FIELD_ORDERS = st.sampled_from(
    [
        {"staleness": "per-group", "stale_step": "before-release", "gate_check": "ship-and-live"},
        {"stale_cancel": "open", "stale_step": "before-release", "gate_lag": "one"},
        {"requeue": "at-ship", "requeue_order": "behind-fresh"},
        {"requeue": "at-ship", "requeue_order": "behind-fresh", "admission": "workers"},
        {"admission": "workers"},
    ]
).flatmap(lambda keys: run_configs(**keys))


@given(world_logs(FIELD_ORDERS, checked=False, restarts=True))
def test_the_reference_model_agrees_on_the_update_order_the_gate_and_the_builder_queue(
    log: list[Event],
) -> None:
    assert_equivalent(log, REFERENCE_MODEL, TODAYS_DECIDERS, ASPECTS)


# ROLL's generation budget, which a stale cancellation gives back: an eighth of
# `run_configs`' draws, so worlds of its own (with staleness drawn, so that groups are
# cancelled for their age).
ROLL = run_configs(admission="roll")


@given(world_logs(ROLL, checked=False))
def test_the_reference_model_agrees_on_roll_admission(log: list[Event]) -> None:
    assert_equivalent(log, REFERENCE_MODEL, TODAYS_DECIDERS, ASPECTS)


CAPACITY_BY_TOKENS = st.integers(16, 200).flatmap(
    lambda tokens: run_configs(admission="capacity", batch_size=None, token_batch_size=tokens)
)


@given(world_logs(CAPACITY_BY_TOKENS, checked=False))
def test_the_reference_model_agrees_on_capacity_under_token_batches(log: list[Event]) -> None:
    """Capacity admission's batch estimate from the mean tokens of the arrivals so far: a
    tenth of `run_configs`' draws, so it gets worlds of its own."""
    assert_equivalent(log, REFERENCE_MODEL, TODAYS_DECIDERS, ASPECTS)


def soft_admission(admission: str) -> st.SearchStrategy[RunConfig]:
    """Soft staleness under `admission`, with episode batches or token batches."""
    return st.one_of(
        run_configs(staleness="soft", admission=admission),
        st.integers(16, 200).flatmap(
            lambda tokens: run_configs(
                staleness="soft", admission=admission, batch_size=None, token_batch_size=tokens
            )
        ),
    )


AREAL = soft_admission("areal")


@given(world_logs(AREAL, checked=False))
def test_the_reference_model_agrees_on_areal_admission(log: list[Event]) -> None:
    """AReaL's admission counted in groups, and soft staleness (nothing cancelled or dropped
    for its age): a ninth of `run_configs`' draws, so it gets worlds of its own."""
    assert_equivalent(log, REFERENCE_MODEL, TODAYS_DECIDERS, ASPECTS)


VERL = soft_admission("verl")


@given(world_logs(VERL, checked=False))
def test_the_reference_model_agrees_on_verl_admission(log: list[Event]) -> None:
    """verl's sample budget per weight sync, counted in groups and restarted at each
    `version_pending` at what is outstanding: worlds of its own, as areal's."""
    assert_equivalent(log, REFERENCE_MODEL, TODAYS_DECIDERS, ASPECTS)


def _outstanding_evicting(group_size: int, batch_size: int) -> st.SearchStrategy[RunConfig]:
    return run_configs(
        admission="outstanding",
        group_size=group_size,
        batch_size=batch_size,
        token_batch_size=None,
        max_off_policy_steps=2,
        target_lag=1,
        queue_limit=max(group_size, batch_size),
        queue_eviction="oldest-episode",
    )


OUTSTANDING_EVICTING = st.integers(1, 4).flatmap(
    lambda size: st.integers(size, 3 * size).flatmap(lambda b: _outstanding_evicting(size, b))
)


@given(world_logs(OUTSTANDING_EVICTING, checked=False))
def test_the_reference_model_agrees_on_the_outstanding_cap_under_evictions(
    log: list[Event],
) -> None:
    """tinker PR #822's cap counts a group outstanding while a member is queued, so an
    evicted member frees its place: a cap of two batches over a queue of one, where
    `run_configs`' queues seldom overflow under the cap."""
    assert_equivalent(log, REFERENCE_MODEL, TODAYS_DECIDERS, ASPECTS)


EVAL_HEAVY = st.integers(1, 4).flatmap(
    lambda size: run_configs(
        eval_interval=1, group_size=size, max_inflight=4 * size, batch_size=1, token_batch_size=None
    )
)


@given(world_logs(EVAL_HEAVY, checked=False))
def test_the_reference_model_agrees_when_evals_pile_up(log: list[Event]) -> None:
    """An eval group owed every step, small batches and room for several groups at once:
    more than one eval owed at a time, opened ahead of train groups."""
    assert_equivalent(log, REFERENCE_MODEL, TODAYS_DECIDERS, ASPECTS)


# Limits between G + 1 and 3G - 1: an eval group often goes out in parts, continued by a
# later fill pass while a capped admission's train allowance binds.
EVALS_IN_PARTS = st.sampled_from(["capacity", "areal", "outstanding", "roll", "max-lag"]).flatmap(
    lambda admission: st.integers(2, 4).flatmap(
        lambda size: st.integers(size + 1, 3 * size - 1).flatmap(
            lambda limit: run_configs(
                eval_interval=1,
                group_size=size,
                max_inflight=limit,
                batch_size=1,
                token_batch_size=None,
                admission=admission,
            )
        )
    )
)


# Found by searching such worlds with mutation seed 24's `dispatcher_fill._fill_pass_41`
# applied (an eval group's continuation charged to the train allowance): capacity admission,
# a loose gate; the few examples of a mutation run seldom reach it.
EVAL_IN_PARTS_UNDER_CAPACITY = RunConfig.from_mapping(
    {
        "max_inflight": 5,
        "max_off_policy_steps": 2,
        "group_size": 2,
        "batch_size": 2,
        "target_lag": 2,
        "staleness": "per-group",
        "filter_zero_advantages": False,
        "seed": 46618,
        "eval_interval": 1,
        "curriculum": "informative",
        "zero_output_batches": 1000,
        "admission": "capacity",
        "requeue": "at-completion",
        "updates_per_sync": 3,
        "max_lag": 4,
        "over_sampling_batch_size": 3,
        "async_generation_ratio": 0.5,
        "group_redundancy": 1,
    }
)


@example(scripted_log(EVAL_IN_PARTS_UNDER_CAPACITY, random.Random(3).randrange, 60))
@given(world_logs(EVALS_IN_PARTS, checked=False))
def test_the_reference_model_agrees_when_eval_groups_go_out_in_parts_under_admission(
    log: list[Event],
) -> None:
    """Continuing an eval group spends permits but none of the train allowance: the train
    groups after it in the same pass get all of it."""
    assert_equivalent(log, REFERENCE_MODEL, TODAYS_DECIDERS, ASPECTS)


WIDE_SMOOTHED = st.integers(1, 3).flatmap(
    lambda size: st.integers(10 * (size + 1), 64).flatmap(
        lambda limit: run_configs(
            group_size=size, max_inflight=limit, admission_smoothing=True, admission="none"
        )
    )
)


@given(world_logs(WIDE_SMOOTHED, checked=False))
def test_the_reference_model_agrees_on_smoothing_under_wide_limits(log: list[Event]) -> None:
    """Admission smoothing's burst is a tenth of the limit where that exceeds G; with
    `run_configs`' limits of at most 3G + 2 it never does, so these worlds get limits of
    10(G + 1) and more."""
    assert_equivalent(log, REFERENCE_MODEL, TODAYS_DECIDERS, ASPECTS)


def test_the_reference_model_reproduces_the_simulated_example() -> None:
    """A log the simulator recorded, re-decided by the reference, is the log itself."""
    log = read_log(SIMULATED)
    assert reference_log(log) == log


def _stamp_with_group_start(rules: Rules, state: object, event: Event) -> list[Event]:
    """A dispatcher that forgets per-episode stamping: members carry their group's start."""
    decided = DISPATCHER.decide(rules, state, event)
    starts = getattr(state, "groups", {})
    return [
        attrs.evolve(e, policy_version=starts[e.group_id].start_version)
        if isinstance(e, EpisodeDispatched) and e.group_id in starts
        else e
        for e in decided
    ]


UNSTAMPED = decided_by(
    dispatcher=attrs.evolve(DISPATCHER, name="unstamped", decide=_stamp_with_group_start)
)


@settings(max_examples=60)  # a check of the harness, not of the deciders
@given(world_logs(checked=False))
def test_a_broken_dispatcher_is_reported_at_its_first_wrong_event(log: list[Event]) -> None:
    """The reference names the seq of the first event the broken dispatcher gets wrong."""
    restamped = [
        e
        for e in log
        if isinstance(e, EpisodeDispatched)
        and e.member > 0
        and e.policy_version != _start_version(log, e.group_id)
    ]
    difference = first_difference(log, REFERENCE_MODEL, UNSTAMPED, ASPECTS)
    if not restamped:
        assert difference is None
        return
    assert difference is not None
    assert difference.aspect == "events"
    assert difference.seq == restamped[0].seq
    assert f"seq {difference.seq}" in str(difference)


def _start_version(log: list[Event], group_id: str) -> int:
    return next(
        e.policy_version  # type: ignore[union-attr]
        for e in log
        if e.kind == "group_opened" and e.group_id == group_id  # type: ignore[union-attr]
    )


SLIME = run_configs(admission="slime")
# Queued members dropped as stale before their batch ships are lost to the round, each added
# to what it lost before: this world tells both apart (`hypothesis.find` against the mutants
# that stopped counting them, or kept only the last; the 25 examples of a mutant's run missed).
DROPPED_IN_ROUND = RunConfig.from_mapping(
    {
        "max_inflight": 1,
        "max_off_policy_steps": 0,
        "group_size": 1,
        "batch_size": None,
        "token_batch_size": 16,
        "admission": "slime",
        "stale_check": "after-curriculum",
        "updates_per_sync": 2,
        "filter_zero_advantages": False,
        "zero_output_batches": 1000,
    }
)


@example(scripted_log(DROPPED_IN_ROUND, random.Random(218).randrange, 94))
@given(world_logs(SLIME, checked=False))
def test_the_reference_model_agrees_on_slime_rounds(log: list[Event]) -> None:
    """slime's rounds re-grant what the step lost (groups scored short, queued members
    dropped before the batch ships): an eighth of `run_configs`' draws, so worlds of its own."""
    assert_equivalent(log, REFERENCE_MODEL, TODAYS_DECIDERS, ASPECTS)


def test_a_duplicate_completion_leaves_the_masked_count_of_the_first() -> None:
    """Found by the ci profile (areal admission, soft staleness, interrupt, mask): a second
    completion of g7/1 with 23 tokens, after its first with 40, made the reference model
    mask 23 tokens where the core masks the 40 of the arrival it kept."""
    data = Path(__file__).parent / "data" / "masked_duplicate_completion.jsonl"
    with data.open() as lines:
        log = list(read_jsonl(lines))
    assert_equivalent(log, REFERENCE_MODEL, TODAYS_DECIDERS, ASPECTS)
