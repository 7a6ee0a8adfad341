"""Each policy's own property list: the account holds a run to what its policy keeps.

An `areal` run keeps no hard bound (AReaL trains what its admission let out, however old
it is by then): the account checks its admission inequality instead and counts what
trained past the bound. The same events recorded as a per-episode run break the bound.
"""

from __future__ import annotations

import random

import attrs
import pytest

from rolloutlog.core.account import Account, InvariantViolation
from rolloutlog.core.account.properties import (
    AREAL_ADMISSION,
    CAPACITY,
    HARD_BOUND,
    NO_STALE_IN_FLIGHT,
    ROLL_ADMISSION,
    kept_properties,
)
from rolloutlog.core.config import RunConfig
from rolloutlog.core.loop import ReactionLoop
from rolloutlog.core.presets import preset_overrides
from rolloutlog.events.types import Event
from rolloutlog.replay.fold import fold_events
from rolloutlog.testing.scripted_world import scripted_log
from tests.core.core_events import dispatched, opened, scored
from tests.core.interrupted_runs import done

# G = 4 under 6 permits, a batch of one group, nothing may be off-policy: AReaL's
# admission lets the groups of two versions run at once, so some members train a step late.
AREAL_WORLD = {"group_size": 4, "max_inflight": 6, "batch_size": 4, "max_off_policy_steps": 0}


def _config(preset: str, **keys: object) -> RunConfig:
    return RunConfig.from_mapping({**preset_overrides(preset), **keys})


@pytest.mark.parametrize(
    ("preset", "kept"),
    [
        ("per-episode", {HARD_BOUND, NO_STALE_IN_FLIGHT}),
        ("per-group", {HARD_BOUND}),
        ("all", {HARD_BOUND, NO_STALE_IN_FLIGHT, CAPACITY}),
        ("areal", {AREAL_ADMISSION}),
        ("roll-flash", {HARD_BOUND, ROLL_ADMISSION}),
    ],
)
def test_each_preset_keeps_its_own_properties(preset: str, kept: set[str]) -> None:
    assert kept_properties(_config(preset)) == kept


def _areal_log() -> list[Event]:
    """AReaL admission with rolloutlog's liveness exception, which opens groups past the
    capacity that train past the bound (the `areal` preset's own rule keeps it at bound 0)."""
    config = _config("areal", **AREAL_WORLD, zero_output_batches=1000, liveness=True)
    loop = ReactionLoop(config, observers=(Account(config),))  # raises on a broken property
    return scripted_log(config, random.Random(0).randrange, 60, loop=loop)


def test_an_areal_run_trains_past_the_bound_and_keeps_its_own_properties() -> None:
    fold = fold_events(_areal_log()).fold
    assert fold is not None
    summary = fold.summary()
    assert summary["invariant_violations"] == []
    past = sum(n for age, n in summary["trained_age_histogram"].items() if int(age) > 0)
    assert summary["episodes_trained_past_bound"] == past > 0


def test_the_same_log_recorded_as_per_episode_breaks_the_bound() -> None:
    log = _areal_log()
    relabelled = [attrs.evolve(log[0], config={**log[0].config, "staleness": "per-episode"})]
    fold = fold_events([*relabelled, *log[1:]]).fold
    assert fold is not None
    summary = fold.summary()
    assert any("shipped at age 1" in v for v in summary["invariant_violations"])
    assert summary["episodes_trained_past_bound"] > 0  # reported either way


def test_a_group_opened_past_areals_capacity_is_a_violation() -> None:
    """One group a batch, no room off-policy: at v0 a second group may not open while the
    first is running."""
    account = Account(_config("areal", **AREAL_WORLD))
    account.feed(opened("g1", 0, 1, 4))
    with pytest.raises(InvariantViolation, match=r"areal admission: 0 accepted \+ 1 running"):
        account.feed(opened("g2", 0, 1, 4))


def test_capacity_counts_a_scored_groups_admitted_members_as_still_promised() -> None:
    """Bound 0, batches of 2 episodes: the horizon at v0 is 2. Two lone groups scored and
    admitted stay promised (queued, not trained), so with g3 in flight a fourth train
    dispatch is past the horizon (a sample's survivor released the admitted members at
    scoring, and let it pass)."""
    config = _config("per-episode+capacity", group_size=1, max_inflight=8, batch_size=2)
    config = attrs.evolve(config, max_off_policy_steps=0, target_lag=0)
    account = Account(config, raise_on_violation=True)
    for n in (1, 2):
        account.feed(opened(f"g{n}", 0, 1, 1))
        account.feed(dispatched(f"g{n}/0", 0))
        account.feed(done(f"g{n}/0", float(n)))
        account.feed(scored(f"g{n}"))
    account.feed(opened("g3", 0, 1, 1))
    account.feed(dispatched("g3/0", 0))  # none in flight: the liveness exception
    account.feed(opened("g4", 0, 1, 1))
    with pytest.raises(InvariantViolation, match=r"capacity: 3 promised of 2"):
        account.feed(dispatched("g4/0", 0))
