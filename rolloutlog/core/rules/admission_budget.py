"""verl's sample budget per weight sync (`admission = "verl"`), an admission rule.

verl's fully async rollouter (`FullyAsyncRollouter`, verl-project/verl@1dda039) counts the
samples it takes for generation since the last weight sync (`staleness_samples`) and pauses
once the count reaches `max_required_samples = int(R × (1 + θ) × K)`: `R =
ppo_mini_batch_size × require_batches` samples per trainer step, `θ =
staleness_threshold`, `K = trigger_parameter_sync_step`. At each sync (`reset_staleness`)
the count restarts at the samples still outstanding: those generating plus those in its
MessageQueue, which holds what the trainer has not taken yet. A verl sample is one prompt
with its `rollout.n` responses: a group of `G`. So here the window is counted in episodes,
`G` for each train group opened since the last `version_pending(v)` or open at it, plus the
episodes then queued or in batches cut past `v` (rolloutlog's trainer has them, verl's are
still in the queue), and a new train group opens only while

    window episodes < int(max(1, B // G) × (1 + θ) × K) × G

with `B // G` the groups a batch takes and `K = updates_per_sync` (a version every K
batches). verl never trains part of a sample (one whose generation raises ends its run), so
a member lost before the queue (failed, cancelled, dropped on arrival) gives its room back:
an open group counts the members it can still bring, at most `G`, and a scored group the
episodes it queued. Without losses that is verl's count times `G`; with them the window
still fills the `K` batches its sync needs. The members an open group still owes are always
allowed (verl submits a sample whole). With `liveness`, no train group open, no sync owed
(every K-th batch shipped is announced) and less than a batch queued, one may always open:
rolloutlog's liveness exception, which verl has no equivalent of (docs/policies.md).
"""

from __future__ import annotations

from rolloutlog.core.config import RunConfig
from rolloutlog.core.rules.admission import episodes_per_batch, group_of
from rolloutlog.core.rules.admission_field import evolve_group_ledger
from rolloutlog.core.state import TrainLedger
from rolloutlog.events.types import (
    BatchShipped,
    EpisodeDropped,
    EpisodeFailed,
    EpisodesCancelled,
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


def window_episodes(config: RunConfig, ledger: TrainLedger) -> int:
    """The episodes the sync window counts: those queued at its `version_pending` and by
    the groups scored since, and what each open train group can still bring, at most `G`."""
    size = config.group_size
    lost = ledger.window_lost
    kept = (n - len(lost.get(group_id, ())) for group_id, n in ledger.window_kept.items())
    return ledger.window_queued + sum(min(size, max(0, n)) for n in kept)


def budget_left(config: RunConfig, ledger: TrainLedger, version: int) -> int | None:
    """Train episodes verl admission allows now: what open groups owe, and `G` for each
    group the window's budget still has room for (a group opens while any room is left);
    None when unlimited (token batches before the first completion)."""
    per_batch = episodes_per_batch(config, ledger)
    if per_batch is None:
        return None
    size = config.group_size
    room = sync_budget(config, per_batch) * size - window_episodes(config, ledger)
    return ledger.owed + max(0, -(-room // size)) * size


def budget_idle_floor(config: RunConfig, ledger: TrainLedger, version: int) -> int:
    """The exception (module docstring): `G` episodes while no train group is open, no sync
    is owed and the queue holds less than a batch."""
    per_batch = episodes_per_batch(config, ledger)
    if per_batch is None or ledger.unscored:
        return 0
    coming = sync_owed(config, ledger.batches, version) or ledger.queued >= per_batch
    return 0 if coming else config.group_size


def evolve_budget_ledger(ledger: TrainLedger, event: Event) -> None:
    """`evolve_group_ledger`, and the window: a train group opened counts its members, less
    those cancelled, failed or dropped on arrival; scored, the episodes it queued; each
    `version_pending(v)` restarts the count at the open groups and the episodes verl's
    MessageQueue would hold: those queued, and those of batches cut past `v`, which the
    trainer has not taken yet."""
    if isinstance(event, EpisodeFailed) and event.episode_id in ledger.inflight:
        _lose(ledger, event.episode_id)  # before evolve_ledger forgets it was in flight
    evolve_group_ledger(ledger, event)
    match event:
        case GroupOpened(work="train"):
            ledger.window_kept[event.group_id] = event.group_size + ledger.redundancy
        case EpisodesCancelled() if event.group_id in ledger.window_kept:
            cancelled = len(event.episode_ids) + event.unscheduled
            ledger.window_kept[event.group_id] -= cancelled
        case EpisodeDropped() if group_of(event.episode_id) in ledger.window_kept:
            _lose(ledger, event.episode_id)
        case GroupScored() if event.group_id in ledger.window_kept:
            del ledger.window_kept[event.group_id]
            ledger.window_lost.pop(event.group_id, None)
            ledger.window_queued += len(event.episode_ids) if event.admitted else 0
        case BatchShipped():
            ledger.unpublished[event.step] = event.episode_ids
        case VersionPending():
            for step in [s for s in ledger.unpublished if s <= event.version]:
                del ledger.unpublished[step]  # trained: no longer in verl's MessageQueue
            cut = sum(len(ids) for ids in ledger.unpublished.values())
            ledger.window_queued = ledger.queued + cut
        case _:
            pass


def _lose(ledger: TrainLedger, episode_id: str) -> None:
    """A member of an open train group that will not reach the queue (once, if it failed
    and was dropped as well)."""
    ledger.window_lost.setdefault(group_of(episode_id), set()).add(episode_id)
