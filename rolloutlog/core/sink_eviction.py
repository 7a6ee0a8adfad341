"""The bounded queue: the evictions that make room for an admitted group (`queue_limit`).

verl's fully async trainer (`MessageQueue.put_sample`) and PipelineRL's preprocessor hold
what waits for the trainer in a bounded queue that drops its oldest work when something new
arrives to a full one. Here the sink decides it when it scores a group the curriculum
admitted: if the queue cannot take all of the group's members, the run's eviction rule
(`queue_eviction`, `core.rules.acceptance`) names the oldest queued episodes to drop, reason
`evicted`, and those drops come before the `group_scored`, so the queue never holds more
than the limit. An unbounded queue (`queue_limit = 0`, the default) never evicts.
"""

from __future__ import annotations

from rolloutlog.core.rules.table import Rules
from rolloutlog.core.staleness import rollout_age
from rolloutlog.core.state import SinkState
from rolloutlog.events.types import EpisodeDropped, GroupScored


def evictions(rules: Rules, state: SinkState, scored: GroupScored) -> list[EpisodeDropped]:
    """The drops that make room in the queue for `scored`'s members, if it was admitted."""
    limit = state.config.queue_limit
    if not (limit and scored.admitted):
        return []
    excess = len(state.queue) + len(scored.episode_ids) - limit
    return [
        EpisodeDropped(
            t=scored.t,
            episode_id=episode_id,
            reason="evicted",
            age=rollout_age(state.queue[episode_id].version, state.step),
        )
        for episode_id in rules.evict(state.queue, excess)
    ]
