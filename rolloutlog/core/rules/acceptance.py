"""Acceptance rules at the sink: which arrived or queued episodes are dropped as stale.

The staleness test itself is `core.staleness.is_stale` (one definition); these rules say
which episodes it is applied to. The sink calls the arrival rule its run's preset table
chose (`core.presets`), for each arrival of a group it finalizes.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Literal

from rolloutlog.core.staleness import is_stale
from rolloutlog.events.types import BatchShipped, Event, GroupScored

if TYPE_CHECKING:  # the state imports the preset table, which imports these rules
    from rolloutlog.core.sink_state import Arrival, Queued, SinkGroup, SinkState

# An arrival held to this bound at finalize is never stale there.
NO_BOUND = sys.maxsize
# What a queue check sweeps of stale episodes: the queue, the scored group's members, none.
Sweep = Literal["queue", "scored", "nothing"]


def drop_stale_arrival(group: SinkGroup, arrival: Arrival, step: int, bound: int) -> bool:
    """Per-episode: an arrival is dropped iff it is itself past the bound at `step`."""
    return group.is_stale(arrival.version, step, bound)


def drop_stale_and_its_siblings(group: SinkGroup, arrival: Arrival, step: int, bound: int) -> bool:
    """Per-group: a group that lost a member to a stale cancellation is void, so its later
    siblings are dropped with it; otherwise as per-episode."""
    return group.stale_cancelled > 0 or group.is_stale(arrival.version, step, bound)


def stale_in_queue(queued: Queued, step: int, bound: int) -> bool:
    """A queued episode (admitted, so train) the step has carried past the bound."""
    return is_stale(queued.version, step, bound, train=True, frozen=queued.frozen)


def the_bound(bound: int) -> int:
    """At finalize an arrival is held to the run's bound: a stale one is dropped before its
    group is scored, and the curriculum never sees it."""
    return bound


def no_bound_before_curriculum(bound: int) -> int:
    """prime-rl: finalize drops only a group voided by a stale cancellation; stale arrivals
    are scored and shown to the curriculum, and the queue check after they are queued (the
    insertion sweep) drops them."""
    return NO_BOUND


def check_at_each_step_event(state: SinkState, event: Event) -> Sweep | None:
    """The queue is checked whenever a batch ships (swept whole: the step moved), a group
    is scored (its queued members swept: with `stale_check = "after-curriculum"` they may
    be stale) or a version is announced (nothing aged: cut only)."""
    if type(event) is BatchShipped:
        return "queue"
    return "scored" if type(event) is GroupScored else "nothing"


def check_at_next_finalize(state: SinkState, event: Event) -> Sweep | None:
    """prime-rl's lazy sweep: the readiness check runs when a train group finalizes, not
    when a batch ships, and sweeps the whole queue at the first check of a step (queued
    episodes age only when the step moves); a new version only releases a batch that a
    check of this step held."""
    if type(event) is BatchShipped or state.checked_step != state.step:
        return None
    if type(event) is GroupScored:
        return "queue" if state.first_check else "scored"
    return "nothing"
