"""The field's admission rules, restated by scanning the record: each one's room for train
episodes now, by groups (AReaL, verl, tinker PR #822's outstanding cap, PipelineRL's
max_lag, ROLL's budget; slime's is `oversampling.slime_room`).

Each is the reference's own reading of the docs, not the core's ledgers: what open train
groups still owe may always go out, and a new group opens only where the rule leaves room.
"""

from __future__ import annotations

import math
from collections.abc import Callable

from rolloutlog.events.types import (
    BatchShipped,
    EpisodeDropped,
    Event,
    GroupOpened,
    GroupScored,
    VersionPending,
)
from rolloutlog.testing.reference.oversampling import slime_room
from rolloutlog.testing.reference.record import Group, Record


def _roll_room(record: Record, per_batch: int) -> int:
    """ROLL's budget, by groups (prompts): train groups opened and never cancelled as stale,
    less one for each G members failed in scored groups, may number `⌈α·B⌉ + (version + 1)·B`, `B =
    max(1, per_batch // G)`; one more always may while none is open (with `liveness`). What
    open groups still owe may always go out."""
    settings = record.config
    groups = max(1, per_batch // settings.group_size)
    budget = math.ceil(settings.async_generation_ratio * groups) + (record.version + 1) * groups
    train = [g for g in record.groups.values() if g.train]
    aborted = [any(c.reason == "stale" for c in g.cancellations) for g in train]
    lost = sum(_failed(g) for g, out in zip(train, aborted, strict=True) if not out)
    used = len(train) - sum(aborted) - lost // settings.group_size
    running = [g for g in train if not g.scored]
    may_open = budget - used if running or not settings.liveness else max(budget - used, 1)
    owed = sum(g.unscheduled() for g in running)
    return owed + max(0, may_open) * (settings.group_size + settings.group_redundancy)


def _areal_room(record: Record, per_batch: int) -> int:
    """AReaL's rule, by groups: a train group is running from its opening until it is
    scored, accepted once scored and admitted, counted as admitted episodes in whole groups of
    G (for good: a batch does not give them back). A
    new group may open while fewer than `max_inflight` run and accepted + running stay
    under `(max_off_policy_steps + version + 1)` batches of `per_batch // G` groups (at
    least one); with `liveness`, one always may when none runs. What running groups still
    owe may always go out."""
    settings = record.config
    running = [g for g in record.groups.values() if g.train and not g.scored]
    train = {g.group_id for g in record.groups.values() if g.train}
    admitted = sum(record.episodes[e].group_id in train for e in record.admitted)
    accepted = admitted // settings.group_size
    groups_per_batch = max(1, per_batch // settings.group_size)
    batches = settings.max_off_policy_steps + record.version + 1
    may_open = min(
        settings.max_inflight - len(running),
        batches * groups_per_batch - accepted - len(running),
    )
    if not running and settings.liveness:
        may_open = max(may_open, 1)
    owed = sum(g.unscheduled() for g in running)
    return owed + max(0, may_open) * (settings.group_size + settings.group_redundancy)


def _verl_room(record: Record, per_batch: int) -> int:
    """verl's rule, in episodes: since the last weight sync (`version_pending`), the
    episodes queued at it or cut past it and not yet trained, and for each train group open
    at it or opened since the episodes it queued once scored, else its members not
    cancelled, failed or dropped (at most G), count against `int(R × (1 + θ) × K) × G`,
    `R = per_batch // G` (at least one). A new group may open while the count is under
    it; with `liveness` one always may when no train group is open, no K-th batch awaits its
    version and the queue holds less than a batch. What open groups still owe may go out."""
    settings, size = record.config, record.config.group_size
    syncs = [n for n, e in enumerate(record.history) if e.kind == "version_pending"]
    since = syncs[-1] if syncs else -1
    opened, queued = _window_at(record.history[: since + 1])
    opened |= {
        e.group_id
        for e in record.history[since + 1 :]
        if isinstance(e, GroupOpened) and e.work == "train"
    }
    admitted = [record.episodes[e].group_id for e in record.admitted]
    counted = queued + sum(
        admitted.count(g.group_id) if g.scored else min(size, _not_lost(g))
        for g in (record.groups[group_id] for group_id in opened)
    )
    groups_per_batch = max(1, per_batch // size)
    budget = int(groups_per_batch * (1 + settings.staleness_threshold) * settings.updates_per_sync)
    running = [g for g in record.groups.values() if g.train and not g.scored]
    k = settings.updates_per_sync
    sync_coming = record.batches // k * k > record.version or len(record.queue()) >= per_batch
    waits = running or sync_coming or not settings.liveness
    room = budget * size - counted
    may_open = max(0, -(-room // size))
    may_open = may_open if waits else max(may_open, 1)
    owed = sum(g.unscheduled() for g in running)
    return owed + may_open * size


def _not_lost(group: Group) -> int:
    """An open group's members that may still reach the queue: not cancelled, failed or
    dropped on arrival."""
    cancelled = sum(c.unscheduled for c in group.cancellations)
    lost = sum(e.status in ("failed", "cancelled") or e.dropped for e in group.members)
    return max(0, group.size - cancelled - lost)


def _outstanding_room(record: Record, per_batch: int) -> int:
    """tinker-cookbook PR #822's cap: a new train group may open while fewer than
    `groups per batch × (depth + 1)` train groups are outstanding (`outstanding_depth`, else
    `target_lag`): not yet scored, and in whole groups of G the episodes queued or in a batch
    whose version has not been announced. With `liveness` one always may when no train
    group is open. What open groups owe may always go out."""
    settings = record.config
    running = [g for g in record.groups.values() if g.train and not g.scored]
    unpublished = [
        e for e in record.episodes.values() if e.shipped and e.shipped_at > record.version
    ]
    outstanding = len(running) + (len(record.queue()) + len(unpublished)) // settings.group_size
    depth = settings.outstanding_depth
    depth = settings.target_lag if depth is None else depth
    cap = max(1, per_batch // settings.group_size) * (depth + 1)
    may_open = cap - outstanding
    if not running and settings.liveness:
        may_open = max(may_open, 1)
    owed = sum(g.unscheduled() for g in running)
    return owed + max(0, may_open) * settings.group_size


def _failed(group: Group) -> int:
    """The members that failed in flight, once the group is scored: ROLL aborts such a
    prompt and trains nothing of it; rolloutlog trains the rest, and gives a group of the
    budget back for each G failed."""
    return sum(e.status == "failed" for e in group.members) if group.scored else 0


def _window_at(history: list[Event]) -> tuple[set[str], int]:
    """The train groups open at the end of `history`, and the episodes verl's MessageQueue
    then holds: admitted, neither shipped nor dropped, or shipped in a batch past the last
    version announced (not trained yet); read from it alone."""
    train: set[str] = set()
    scored: set[str] = set()
    queued: set[str] = set()
    batches: dict[int, int] = {}  # step -> the episodes its batch took
    version = 0
    for e in history:
        if isinstance(e, GroupOpened) and e.work == "train":
            train.add(e.group_id)
        elif isinstance(e, GroupScored):
            scored.add(e.group_id)
            if e.admitted:
                queued.update(e.episode_ids)
        elif isinstance(e, BatchShipped):
            queued.difference_update(e.episode_ids)
            batches[e.step] = len(e.episode_ids)
        elif isinstance(e, EpisodeDropped):
            queued.discard(e.episode_id)
        elif isinstance(e, VersionPending):
            version = e.version
    cut = sum(n for step, n in batches.items() if step > version)
    return train - scored, len(queued) + cut


def _max_lag_room(record: Record, per_batch: int) -> int:
    """PipelineRL's actor with `max_lag`: it may have submitted `ceil(max_lag / G)` groups
    plus `ceil(per_batch / G)` for the first update and as many for each version announced
    since. With `liveness` one always may when none is open; what open groups owe may
    always go out."""
    settings, size = record.config, record.config.group_size
    train = [g for g in record.groups.values() if g.train]
    running = [g for g in train if not g.scored]
    updates = sum(event.kind == "version_pending" for event in record.history)
    allowed = math.ceil(settings.max_lag / size) + math.ceil(per_batch / size) * (updates + 1)
    may_open = allowed - len(train)
    if not running and settings.liveness:
        may_open = max(may_open, 1)
    owed = sum(g.unscheduled() for g in running)
    return owed + max(0, may_open) * size


def _workers_room(record: Record, per_batch: int) -> int:
    """tinker's workers: `groups per batch` of them, each with one group at a time, so a
    new train group opens while fewer train groups are unscored. What open groups owe may
    always go out."""
    settings = record.config
    running = [g for g in record.groups.values() if g.train and not g.scored]
    may_open = max(1, per_batch // settings.group_size) - len(running)
    owed = sum(g.unscheduled() for g in running)
    return owed + max(0, may_open) * settings.group_size


# Admission rule -> its room, each restated from the docs (capacity's is the dispatcher's
# own, in `_train_room`).
FIELD_ROOMS: dict[str, Callable[[Record, int], int]] = {
    "areal": _areal_room,
    "verl": _verl_room,
    "outstanding": _outstanding_room,
    "max-lag": _max_lag_room,
    "slime": slime_room,
    "roll": _roll_room,
    "workers": _workers_room,
}
