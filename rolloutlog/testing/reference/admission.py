"""The field's admission rules, restated by scanning the record: each one's room for train
episodes now, by groups (AReaL, verl, tinker PR #822's outstanding cap, PipelineRL's
max_lag, ROLL's budget; slime's is `oversampling.slime_room`).

Each is the reference's own reading of the docs, not the core's ledgers: what open train
groups still owe may always go out, and a new group opens only where the rule leaves room.
"""

from __future__ import annotations

import math
from collections.abc import Callable

from rolloutlog.events.types import BatchShipped, EpisodeDropped, Event, GroupOpened, GroupScored
from rolloutlog.testing.reference.oversampling import slime_room
from rolloutlog.testing.reference.record import Record


def _roll_room(record: Record, per_batch: int) -> int:
    """ROLL's budget, by groups (prompts): train groups opened and never cancelled as stale
    may number `⌈α·B⌉ + (version + 1)·B`, `B = max(1, per_batch // G)`; one more always may
    while none is open. What open groups still owe may always go out."""
    settings = record.config
    groups = max(1, per_batch // settings.group_size)
    budget = math.ceil(settings.async_generation_ratio * groups) + (record.version + 1) * groups
    train = [g for g in record.groups.values() if g.train]
    used = sum(not any(c.reason == "stale" for c in g.cancellations) for g in train)
    running = [g for g in train if not g.scored]
    may_open = budget - used if running else max(budget - used, 1)
    owed = sum(g.unscheduled() for g in running)
    return owed + max(0, may_open) * (settings.group_size + settings.group_redundancy)


def _areal_room(record: Record, per_batch: int) -> int:
    """AReaL's rule, by groups: a train group is running from its opening until it is
    scored, accepted once scored and admitted (for good: a batch does not give it back). A
    new group may open while fewer than `max_inflight` run and accepted + running stay
    under `(max_off_policy_steps + version + 1)` batches of `per_batch // G` groups (at
    least one); one always may when none runs. What running groups still owe may always
    go out."""
    settings = record.config
    running = [g for g in record.groups.values() if g.train and not g.scored]
    accepted = len({record.episodes[e].group_id for e in record.admitted})
    groups_per_batch = max(1, per_batch // settings.group_size)
    batches = settings.max_off_policy_steps + record.version + 1
    may_open = min(
        settings.max_inflight - len(running),
        batches * groups_per_batch - accepted - len(running),
    )
    if not running:
        may_open = max(may_open, 1)
    owed = sum(g.unscheduled() for g in running)
    return owed + max(0, may_open) * (settings.group_size + settings.group_redundancy)


def _verl_room(record: Record, per_batch: int) -> int:
    """verl's rule, by groups: since the last weight sync (`version_pending`), the train
    groups opened, and those outstanding at the sync (opened and not yet scored, or with an
    admitted episode neither shipped nor dropped yet), count against `int(R × (1 + θ) × K)`,
    `R = per_batch // G` (at least one). A new group may open while the count is under it;
    one always may when no train group is open, no K-th batch awaits its version and the
    queue holds less than a batch. What open groups still owe may go out."""
    settings = record.config
    syncs = [n for n, e in enumerate(record.history) if e.kind == "version_pending"]
    since = syncs[-1] if syncs else -1
    counted = sum(
        isinstance(e, GroupOpened) and e.work == "train" for e in record.history[since + 1 :]
    )
    if since >= 0:
        counted += len(_outstanding_at(record.history[: since + 1]))
    groups_per_batch = max(1, per_batch // settings.group_size)
    budget = int(groups_per_batch * (1 + settings.staleness_threshold) * settings.updates_per_sync)
    running = [g for g in record.groups.values() if g.train and not g.scored]
    k = settings.updates_per_sync
    sync_coming = record.batches // k * k > record.version or len(record.queue()) >= per_batch
    may_open = budget - counted if running or sync_coming else max(budget - counted, 1)
    owed = sum(g.unscheduled() for g in running)
    return owed + max(0, may_open) * settings.group_size


def _outstanding_room(record: Record, per_batch: int) -> int:
    """tinker-cookbook PR #822's cap: a new train group may open while fewer than
    `groups per batch × (target_lag + 1)` train groups are outstanding: not yet scored, or
    with a member queued, or in a batch whose version has not been announced. One always
    may when no train group is open. What open groups owe may always go out."""
    settings = record.config
    running = [g for g in record.groups.values() if g.train and not g.scored]
    outstanding = {g.group_id for g in running}
    outstanding |= {e.group_id for e in record.queue()}
    outstanding |= {
        e.group_id for e in record.episodes.values() if e.shipped and e.shipped_at > record.version
    }
    cap = max(1, per_batch // settings.group_size) * (settings.target_lag + 1)
    may_open = cap - len(outstanding)
    if not running:
        may_open = max(may_open, 1)
    owed = sum(g.unscheduled() for g in running)
    return owed + max(0, may_open) * settings.group_size


def _outstanding_at(history: list[Event]) -> set[str]:
    """The train groups open or queued at the end of `history`, read from it alone."""
    train: set[str] = set()
    scored: set[str] = set()
    queued: dict[str, str] = {}  # admitted episode -> its group, until shipped or dropped
    for e in history:
        if isinstance(e, GroupOpened) and e.work == "train":
            train.add(e.group_id)
        elif isinstance(e, GroupScored):
            scored.add(e.group_id)
            if e.admitted:
                queued.update(dict.fromkeys(e.episode_ids, e.group_id))
        elif isinstance(e, BatchShipped):
            for episode_id in e.episode_ids:
                queued.pop(episode_id, None)
        elif isinstance(e, EpisodeDropped):
            queued.pop(e.episode_id, None)
    return (train - scored) | set(queued.values())


def _max_lag_room(record: Record, per_batch: int) -> int:
    """PipelineRL's actor with `max_lag`: it may have submitted `ceil(max_lag / G)` groups
    plus `ceil(per_batch / G)` for the first update and as many for each version announced
    since. One always may when none is open; what open groups owe may always go out."""
    settings, size = record.config, record.config.group_size
    train = [g for g in record.groups.values() if g.train]
    running = [g for g in train if not g.scored]
    updates = sum(event.kind == "version_pending" for event in record.history)
    allowed = math.ceil(settings.max_lag / size) + math.ceil(per_batch / size) * (updates + 1)
    may_open = allowed - len(train)
    if not running:
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
