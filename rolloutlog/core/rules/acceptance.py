"""Acceptance rules at the sink: which arrived or queued episodes are dropped as stale.

The staleness test itself is `core.staleness.is_stale` (one definition); these rules say
which episodes it is applied to. The sink calls the arrival rule its run's preset table
chose (`core.presets`) for each arrival of a group it finalizes, and the queue rule for
each queued episode when the step advances; soft staleness keeps both.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rolloutlog.core.staleness import is_stale

if TYPE_CHECKING:  # the state imports the preset table, which imports these rules
    from rolloutlog.core.sink_state import Arrival, Queued, SinkGroup


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


def keep_arrival(group: SinkGroup, arrival: Arrival, step: int, bound: int) -> bool:
    """Soft: nothing is dropped for its age (AReaL trains what its admission let out)."""
    return False


def keep_queued(queued: Queued, step: int, bound: int) -> bool:
    """Soft: the queue is never swept for age."""
    return False
