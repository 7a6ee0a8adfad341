"""Group-shape rules: how many members a group dispatches, and when its extras are cancelled.

ROLL's `group_size_redundancy` r dispatches G + r members of a group and takes the first G
to arrive: a slow member no longer holds its group back. `group_redundancy = 0` (the
default) is every group of G members, as before. The cancellation of the extras is the
dispatcher's (`redundant_members`), so that the permits they hold go back at once; the
sink finalizes the group when all G + r are accounted for, as it does any group.
"""

from __future__ import annotations

from typing import Final

from rolloutlog.core.state import DispatcherState
from rolloutlog.events.types import EpisodeCompleted, EpisodeFailed, EpisodesCancelled, Event


def members(group_size: int, redundancy: int) -> int:
    """Members a group of `group_size` (G) dispatches: G + r."""
    return group_size + redundancy


# The events at which a run with redundancy cancels its extras (`Rules.cancels_redundant`).
ARRIVALS: Final[frozenset[type[Event]]] = frozenset({EpisodeCompleted, EpisodeFailed})


def redundant_members(
    state: DispatcherState, event: EpisodeCompleted | EpisodeFailed
) -> list[Event]:
    """At a group's G-th arrival (completed or failed: ROLL counts a failed rollout toward
    G), cancel every member it still owes, in flight or unscheduled, as `redundant`."""
    group = state.groups.get(event.episode_id.rpartition("/")[0])
    if group is None or group.arrived < group.size - state.config.group_redundancy:
        return []
    return [
        EpisodesCancelled(
            t=event.t,
            group_id=group.group_id,
            episode_ids=tuple(group.inflight),
            unscheduled=group.unscheduled,
            reason="redundant",
        )
    ]
