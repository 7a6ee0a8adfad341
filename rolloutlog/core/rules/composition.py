"""Batch composition rules: in which order the queue is taken, and where a batch is cut.

The sink cuts batch `step` with `take`, in the order its run's preset table chose
(`core.presets`): `fifo` takes the oldest queued; `oldest_first` the oldest dispatch
versions first (queue order among equals), so that the episodes closest to the bound ship
before they expire.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

from rolloutlog.core.config import RunConfig

if TYPE_CHECKING:  # the state imports the preset table, which imports these rules
    from rolloutlog.core.sink_state import Queued

BatchOrder = Callable[["dict[str, Queued]"], Iterable[str]]


def fifo(queue: dict[str, Queued]) -> Iterable[str]:
    """Queue order: the oldest queued first."""
    return queue


def oldest_first(queue: dict[str, Queued]) -> Iterable[str]:
    """The oldest dispatch versions first; queue order among equals (the sort is stable)."""
    return sorted(queue, key=lambda episode_id: queue[episode_id].version)


def take(order: BatchOrder, config: RunConfig, queue: dict[str, Queued]) -> list[str]:
    """The queued ids that make a full batch, first in `order`, or [] when short.

    A batch is `batch_size` episodes, or the fewest whose tokens reach `token_batch_size`.
    """
    if config.batch_size is not None and len(queue) < config.batch_size:
        return []
    ids = iter(order(queue))
    if config.batch_size is not None:
        return [next(ids) for _ in range(config.batch_size)]
    target = config.token_batch_size or 0
    taken, tokens = [], 0
    for episode_id in ids:
        taken.append(episode_id)
        tokens += queue[episode_id].tokens
        if tokens >= target:
            return taken
    return []
