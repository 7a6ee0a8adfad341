"""verl's sample budget per weight sync (`admission = "verl"`), an admission rule.

verl's fully async rollouter (`FullyAsyncRollouter`, verl-project/verl@1dda039) counts the
samples it takes for generation since the last weight sync (`staleness_samples`) and pauses
once the count reaches `max_required_samples = int(R × (1 + θ) × K)`: `R =
ppo_mini_batch_size × require_batches` samples per trainer step, `θ =
staleness_threshold`, `K = trigger_parameter_sync_step`. At each sync (`reset_staleness`)
the count restarts at the samples still outstanding: those generating plus those queued
for the trainer. A verl sample is one prompt with its `rollout.n` responses: a group. So
here a new train group opens only while

    window groups < int(max(1, B // G) × (1 + θ) × K)

with `B // G` the groups a batch takes, `window groups` the train groups opened since the
last `version_pending` plus, at it, those then open (not yet scored) and those with an
episode in the sink's queue, and `K = updates_per_sync` (a version every K batches). The
members an open group still owes are always allowed (verl submits a sample whole), and
with no train group open, no sync owed (every K-th batch shipped is announced) and less
than a batch queued, one may always open: rolloutlog's liveness exception (verl would
wait for a sync that a batch short of pruned or failed members never brings).
"""

from __future__ import annotations

from rolloutlog.core.config import RunConfig
from rolloutlog.core.rules.admission import episodes_per_batch
from rolloutlog.core.rules.admission_field import evolve_group_ledger
from rolloutlog.core.state import TrainLedger
from rolloutlog.events.types import (
    BatchShipped,
    EpisodeDropped,
    Event,
    GroupOpened,
    GroupScored,
    VersionPending,
)


def sync_budget(config: RunConfig, per_batch: int) -> int:
    """verl's `max_required_samples`, in groups: `int(R × (1 + θ) × K)` with `R` the groups
    one batch of `per_batch` episodes takes (at least one), `K = updates_per_sync`."""
    batch_groups = max(1, per_batch // config.group_size)
    return int(batch_groups * (1 + config.staleness_threshold) * config.updates_per_sync)


def sync_owed(config: RunConfig, shipped: int, version: int) -> bool:
    """A sync is coming: the trainer has a K-th batch (`K = updates_per_sync`) shipped whose
    version is not announced yet."""
    return shipped - shipped % config.updates_per_sync > version


def budget_left(config: RunConfig, ledger: TrainLedger, version: int) -> int | None:
    """Train episodes verl admission allows now: what open groups owe, and `G` for each
    group the window's budget still has room for; None when unlimited (token batches
    before the first completion)."""
    per_batch = episodes_per_batch(config, ledger)
    if per_batch is None:
        return None
    room = sync_budget(config, per_batch) - ledger.window_groups
    return ledger.owed + max(0, room) * config.group_size


def budget_idle_floor(config: RunConfig, ledger: TrainLedger, version: int) -> int:
    """The exception (module docstring): `G` episodes while no train group is open, no sync
    is owed and the queue holds less than a batch."""
    per_batch = episodes_per_batch(config, ledger)
    if per_batch is None or ledger.unscored:
        return 0
    coming = sync_owed(config, ledger.batches, version) or ledger.queued >= per_batch
    return 0 if coming else config.group_size


def evolve_budget_ledger(ledger: TrainLedger, event: Event) -> None:
    """`evolve_group_ledger`, and the window: a train group opened counts, and each
    `version_pending` restarts the count at the open train groups and the queued ones."""
    evolve_group_ledger(ledger, event)
    match event:
        case GroupOpened(work="train"):
            ledger.window_groups += 1
        case GroupScored(admitted=True) if event.episode_ids:
            ledger.queued_groups[event.group_id] = len(event.episode_ids)
        case EpisodeDropped():
            _unqueue(ledger, event.episode_id)
        case BatchShipped():
            for episode_id in event.episode_ids:
                _unqueue(ledger, episode_id)
        case VersionPending():
            ledger.window_groups = len(ledger.unscored) + len(ledger.queued_groups)
        case _:
            pass


def _unqueue(ledger: TrainLedger, episode_id: str) -> None:
    """One episode left the queue (shipped, or swept); its group leaves with its last."""
    group_id = episode_id.rpartition("/")[0]
    left = ledger.queued_groups.get(group_id)
    if left is None:
        return  # dropped on arrival, before its group was queued
    if left > 1:
        ledger.queued_groups[group_id] = left - 1
    else:
        del ledger.queued_groups[group_id]
