"""Batch composition rules: in which order the queue is taken, and where a batch is cut.

The sink cuts batch `step` with `take`, in the order its run's preset table chose
(`core.presets`): `fifo` takes the oldest queued; `oldest_first` the oldest dispatch
versions first (queue order among equals), so that the episodes closest to the bound ship
before they expire; `roll_window` is ROLL's `get_batch`: oldest first from the window of
versions `≥ (step − 1) − ⌈α⌉`, the oldest of them capped by the fractional part of α.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable

from rolloutlog.core.config import RunConfig
from rolloutlog.core.state import Queued

# (queue, config, step) -> the ids a batch may take, in the order it takes them
BatchOrder = Callable[["dict[str, Queued]", RunConfig, int], Iterable[str]]


def fifo(queue: dict[str, Queued], config: RunConfig, step: int) -> Iterable[str]:
    """Queue order: the oldest queued first."""
    return queue


def oldest_first(queue: dict[str, Queued], config: RunConfig, step: int) -> Iterable[str]:
    """The oldest dispatch versions first; queue order among equals (the sort is stable)."""
    return sorted(queue, key=lambda episode_id: queue[episode_id].version)


def roll_window(queue: dict[str, Queued], config: RunConfig, step: int) -> list[str]:
    """ROLL's `ReplayBuffer.get_batch` for batch `step`: whole groups (prompts), oldest
    version first, from versions `≥ (step − 1) − ⌈α⌉`; when α is not whole the oldest of
    them gives whole groups only until `int(batch_size × (α mod 1))` episodes are taken
    (no cap with token batches). What is older, or past the cap, is not taken."""
    ratio = config.async_generation_ratio
    oldest = step - 1 - math.ceil(ratio)
    cap = int((config.batch_size or 0) * (ratio % 1)) if ratio % 1 and config.batch_size else None
    taken: list[str] = []
    groups: set[str] = set()  # groups of the oldest version already taken, whole
    for episode_id in oldest_first(queue, config, step):
        version, group_id = queue[episode_id].version, episode_id.rpartition("/")[0]
        if version < oldest:
            continue
        if version == oldest and cap is not None and group_id not in groups:
            if len(taken) >= cap:
                continue
            groups.add(group_id)
        taken.append(episode_id)
    return taken


def take(order: BatchOrder, config: RunConfig, queue: dict[str, Queued], step: int) -> list[str]:
    """The queued ids that make a full batch, first in `order`, or [] when short.

    A batch is `batch_size` episodes, or the fewest whose tokens reach `token_batch_size`.
    """
    if config.batch_size is not None and len(queue) < config.batch_size:
        return []
    ids = iter(order(queue, config, step))
    if config.batch_size is not None:
        cut = [episode_id for _, episode_id in zip(range(config.batch_size), ids, strict=False)]
        return cut if len(cut) == config.batch_size else []
    target = config.token_batch_size or 0
    taken, tokens = [], 0
    for episode_id in ids:
        taken.append(episode_id)
        tokens += queue[episode_id].tokens
        if tokens >= target:
            return taken
    return []
