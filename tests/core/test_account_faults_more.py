"""The account's reports on masked stale tokens (`core.account.mask`), ROLL's redundant
members (`core.account.redundancy`), slime's abort of the leftovers
(`core.account.leftovers`) and the two eviction reports `test_account_faults_field.py`
leaves (a scoring the queue has no room for, "evicts part of a group"), each set off by one
planted fault at its own seq, as in `test_account_faults_field.py`; the plants' harness is
`tests/core/planted_faults.py`, the plants `tests/core/mask_plants.py`,
`redundancy_plants.py`, `leftover_plants.py` and `eviction_plants.py`, the drops and
cancellations they put in `tests/core/field_plants.py`.

Two kinds of report are checked once a world event's reactions settle (a redundant
cancellation owed, leftovers not aborted): their plants end the log at the world event
whose reaction is missing (redundant), or put a world event that changes nothing where the
reaction began (leftovers), so the settlement of that last world event reports it.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rolloutlog.events.types import Event
from tests.core.eviction_plants import evicts_part_of_a_group, scored_with_no_room
from tests.core.field_plants import worlds as _field_worlds
from tests.core.leftover_plants import (
    abort_skipped,
    leftover_cancel_of_this_step,
    leftover_cancel_under_run_on,
    leftover_drop_from_the_queue,
    leftover_drop_of_this_step,
    leftover_leaves_owed,
    leftover_scores,
    queue_kept,
)
from tests.core.mask_plants import (
    cancelled_but_going_on_fresh,
    dropped_with_its_end_at_the_bound,
    masked_under_drop,
    masks_one_token_more,
    ships_an_end_at,
)
from tests.core.planted import fed
from tests.core.planted_faults import Plant, after_a_dispatch, check_reported, first_plant
from tests.core.redundancy_plants import (
    arrives_past_g,
    cancelled_one_arrival_short,
    cancelled_without_redundancy,
    redundant_leaves_owed,
    redundant_skipped,
)


def _worlds(preset: str, max_steps: int = 80, **keys: Any) -> st.SearchStrategy[list[Event]]:
    """The field suite's small worlds, kept shorter."""
    return _field_worlds(preset, max_steps, **keys)


# Masking worlds under interrupt (an episode's next tokens come from the live version) and
# per-group staleness (soft keeps no gradient bound); redundancy under ROLL's admission;
# slime's over-sampling rounds of groups of two for batches of six (and of three, which
# leave a queued episode past each batch); a bounded queue one short of two groups of four
# (room for part of the oldest group).
_MASK = _worlds("per-group+interrupt+mask", max_steps=100)
_DROP = _worlds("per-group+interrupt", max_steps=150)
_STALE_ENDS = _worlds("per-group+interrupt+mask", max_steps=150)
_REDUNDANT = _worlds("roll-flash", max_steps=100, group_redundancy=1)
_OVERSAMPLE: dict[str, Any] = {"group_size": 2, "max_inflight": 10, "batch_size": 6}
_SLIME = _worlds("slime-oversample", max_steps=120, **_OVERSAMPLE)
_SLIME_QUEUE = _worlds("slime-oversample", max_steps=80, group_size=2, max_inflight=6, batch_size=3)
_RUN_ON = _worlds("slime-oversample", max_steps=120, leftovers="run-on", **_OVERSAMPLE)
# Permits short of a group with no admission rule: aborted groups with members unscheduled.
_SLIME_SHORT = _worlds(
    "slime-oversample", max_steps=120, admission="none", **{**_OVERSAMPLE, "max_inflight": 5}
)
# A bound of 4 lets the queue fill past a batch (at 0 the batch ships at once, and the
# queue seldom holds part of a group when a scoring needs room).
_GROUPS_EVICTED = _worlds(
    "pipelinerl",
    max_steps=120,
    group_size=4,
    batch_size=4,
    max_inflight=16,
    max_off_policy_steps=4,
    queue_limit=7,
    queue_eviction="oldest-group",
)

# Each fault's worlds: `test_plant_points.py` checks that they offer points to plant it
# (stale ends, and a ship under drop, need 150 steps).
FAULTS: dict[str, tuple[str, Plant, st.SearchStrategy[list[Event]]]] = {
    "mask: cancelled stale but going on fresh": (
        "episodes_cancelled",
        cancelled_but_going_on_fresh,
        _MASK,
    ),
    "mask: dropped with its end at the bound": (
        "episode_dropped",
        dropped_with_its_end_at_the_bound,
        _MASK,
    ),
    "mask: masked under drop": ("batch_shipped", masked_under_drop, _DROP),
    "mask: ships a stale end": ("batch_shipped", ships_an_end_at(1), _STALE_ENDS),
    "mask: masks one token more": ("batch_shipped", masks_one_token_more, _MASK),
    "redundant: arrives past G": (
        "episode_completed",
        arrives_past_g,
        _REDUNDANT,
    ),
    "redundant: cancelled one arrival short": (
        "episodes_cancelled",
        cancelled_one_arrival_short,
        _REDUNDANT,
    ),
    "redundant: cancelled without redundancy": (
        "episodes_cancelled",
        after_a_dispatch(cancelled_without_redundancy),
        _worlds("roll-flash"),
    ),
    "redundant: leaves members owed": (
        "episodes_cancelled",
        redundant_leaves_owed,
        _worlds("roll-flash", max_steps=100, group_redundancy=2),
    ),
    "redundant: cancellation skipped": (
        "episode_completed",
        redundant_skipped,
        _REDUNDANT,
    ),
    "leftovers: abort skipped": ("limit_set", abort_skipped, _SLIME),
    "leftovers: queue kept": ("limit_set", queue_kept, _SLIME_QUEUE),
    "leftovers: cancel of this step": (
        "episodes_cancelled",
        after_a_dispatch(leftover_cancel_of_this_step),
        _SLIME,
    ),
    "leftovers: cancel under run-on": (
        "episodes_cancelled",
        leftover_cancel_under_run_on(),
        _RUN_ON,
    ),
    "leftovers: cancel leaves owed": (
        "episodes_cancelled",
        leftover_leaves_owed(unscheduled=False),
        _SLIME,
    ),
    "leftovers: cancel leaves unscheduled owed": (
        "episodes_cancelled",
        leftover_leaves_owed(unscheduled=True),
        _SLIME_SHORT,
    ),
    "leftovers: drop of this step": (
        "episode_dropped",
        leftover_drop_of_this_step,
        _SLIME,
    ),
    "leftovers: drop under run-on": (
        "episode_dropped",
        leftover_drop_from_the_queue,
        _RUN_ON,
    ),
    "leftovers: an aborted group scores": (
        "group_scored",
        leftover_scores,
        _SLIME,
    ),
    "eviction: scored with no room": (
        "group_scored",
        scored_with_no_room,
        _worlds(
            "pipelinerl", max_steps=100, group_size=4, batch_size=4, max_inflight=12, queue_limit=4
        ),
    ),
    "eviction: part of a group": (
        "group_scored",
        evicts_part_of_a_group,
        _GROUPS_EVICTED,
    ),
}
# What each decider alone says of a fault it refuses (as in `planted_faults.REFUSALS`).
REFUSALS: dict[tuple[str, str], str] = {}


@pytest.mark.parametrize("fault", sorted(FAULTS))
@given(data=st.data())
def test_each_report_names_its_planted_fault(fault: str, data: st.DataObject) -> None:
    kind, plant, worlds = FAULTS[fault]
    log = data.draw(worlds, label="log")
    check_reported(fault, kind, plant, log, REFUSALS)


@given(log=_MASK)
def test_an_end_at_the_bound_trains_without_a_mask_report(log: list[Event]) -> None:
    """The boundary's other side: an episode whose end is exactly at the bound trains
    gradient-bearing tokens, and its masked tokens are its older segments'."""
    planted = first_plant(log, ships_an_end_at(0))
    if planted is None:
        return
    damaged, _, problem = planted
    reports = fed(damaged).violations
    assert not any(problem in r or "masks" in r for r in reports), reports
