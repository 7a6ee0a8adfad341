"""Withheld members (`stale_member = "withhold"`, prime-rl #2960): scored, never shipped.

At finalize the run's rule (`Rules.withholds`) names the stale members to withhold:
they are not dropped before scoring, so their rewards count in the group's GRPO baseline,
and right after the group's `group_scored` each one the curriculum admitted is dropped
from the queue with reason `withheld`, before any batch can take it. The log needs no new
field: `group_scored` lists the member, `episode_dropped` (reason `withheld`) says its
tokens never ship.
"""

from __future__ import annotations

from collections.abc import Sequence

from rolloutlog.core.rules.table import Rules
from rolloutlog.core.staleness import rollout_age
from rolloutlog.core.state import Arrival, SinkGroup, SinkState
from rolloutlog.events.types import EpisodeDropped, GroupScored


def withheld_members(
    rules: Rules, state: SinkState, group: SinkGroup, arrived: Sequence[Arrival]
) -> set[str]:
    """The arrivals of `group` the run's rule withholds at finalize (none under `cancel`)."""
    withholds, version = rules.withholds, state.version
    if withholds is None:
        return set()
    bound = state.config.max_off_policy_steps
    return {a.episode_id for a in arrived if withholds(group, a, version, bound)}


def withheld_drops(
    state: SinkState, scored: GroupScored, withheld: set[str], arrived: Sequence[Arrival]
) -> list[EpisodeDropped]:
    """The `withheld` drops that follow `scored`: its admitted members the rule withholds."""
    if not (scored.admitted and withheld):
        return []
    versions = {a.episode_id: a.version for a in arrived}
    return [
        EpisodeDropped(
            t=scored.t,
            episode_id=episode_id,
            reason="withheld",
            age=rollout_age(versions[episode_id], state.step),
        )
        for episode_id in scored.episode_ids
        if episode_id in withheld
    ]
