"""The field's admission rules, on the train ledger of `core.rules.admission`.

**AReaL** (`admission = "areal"`, AReaL's own `StalenessManager.get_capacity`, counted in
groups as AReaL counts workflow runs) opens a new train group only while

    min(max_concurrent − running, (max_off_policy_steps + v + 1) × B − (accepted + running)) ≥ 1

`running` are the train groups opened and not yet scored, `accepted` the train groups ever
scored and admitted (AReaL never takes an accepted rollout back off the count, and a group
consumed by a batch stays counted), counted as admitted episodes in whole groups of `G`: a
request that fails fails AReaL's whole workflow, which is rejected and trains nothing
(workflow_executor.py:1143-1144); rolloutlog trains the members that arrived, and counts
them as the part of a group they are; `B = max(1, episodes per batch // G)` the groups a
batch takes (AReaL's `consumer_batch_size` counts prompts), and `max_concurrent` is
`max_inflight`: rolloutlog's permits count episodes and already bound what is in flight.
A group the curriculum rejects, or one with nothing left to score, is AReaL's rejected
rollout: it leaves `running` without joining `accepted`, and its capacity comes back. The
members a group still owes are always allowed (AReaL submits a workflow run whole). With
nothing running and capacity 0 AReaL waits for the next version: the `areal` preset has no
liveness exception (`liveness`; where a run sets it, one group may open while none runs).

**Outstanding** (`admission = "outstanding"`, tinker-cookbook PR #822's
`_InFlightGroupTracker.acquire_slot`) opens a new train group only while fewer than
`B × (target_lag + 1)` train groups are outstanding: opened and not yet trained on. A
group stays outstanding while it is open, and while any of its admitted members is queued
or sits in a shipped batch whose version is not announced yet (the PR releases a batch's
slots once the new sampler is in place, so newly admitted work samples from the new
weights). A group scored with nothing admitted, or whose members all dropped, is released
at once. `target_lag` is the PR's `pipeline_depth`: both default to
`min(1, max_off_policy_steps)` and may not exceed it (verl's v1 trainers keep
`num_warmup_batches + 1` batches out at any bound: `outstanding_depth`). Owed members are
always allowed; the PR's workers wait for the train step when the cap is reached, so its
presets have no liveness exception (`liveness`: where a run sets it, one group may open
while none is open, so a partial group in the queue cannot hold the batch short forever).

**Max lag** (`admission = "max-lag"`, PipelineRL's actor with `finetune.max_lag` set)
opens a new train group only while the train groups ever opened stay under

    ⌈max_lag / G⌉ + ⌈B / G⌉ × (updates + 1)

`updates` the versions announced so far, `B` the episodes per batch (one weight update per
batch). Members open groups owe always go out; with `liveness`, one may open while no
train group is open.
"""

from __future__ import annotations

import math

from rolloutlog.core.config import RunConfig
from rolloutlog.core.rules.admission import (
    episodes_per_batch,
    evolve_ledger,
    group_of,
)
from rolloutlog.core.state import TrainLedger
from rolloutlog.events.types import (
    BatchShipped,
    EpisodeDispatched,
    EpisodeDropped,
    EpisodeFailed,
    EpisodesCancelled,
    Event,
    GroupOpened,
    GroupScored,
    VersionPending,
)


def areal_capacity(
    *,
    max_concurrent: int,
    running: int,
    accepted: int,
    version: int,
    max_off_policy_steps: int,
    batch_groups: int,
) -> int:
    """AReaL's `StalenessManager.get_capacity` on plain counts: the runs (here: groups)
    that may start now; negative when over. tests/core/test_areal_counterpart.py checks it
    against AReaL's own code."""
    concurrency = max(1, max_concurrent) - running
    horizon = (max_off_policy_steps + version + 1) * max(1, batch_groups)
    return min(concurrency, horizon - (accepted + running))


def areal_groups(config: RunConfig, ledger: TrainLedger, version: int) -> int | None:
    """AReaL's capacity, in groups, on the ledger's counts; None when unlimited (token
    batches before the first completion, as `capacity_left`)."""
    per_batch = episodes_per_batch(config, ledger)
    if per_batch is None:
        return None
    return areal_capacity(
        max_concurrent=config.max_inflight,
        running=len(ledger.unscored),
        accepted=ledger.accepted // config.group_size,
        version=version,
        max_off_policy_steps=config.max_off_policy_steps,
        batch_groups=per_batch // config.group_size,
    )


def areal_left(config: RunConfig, ledger: TrainLedger, version: int) -> int | None:
    """Train episodes AReaL admission allows now: the members open groups still owe, and
    `G` (G + r, with redundant members) for each group its capacity lets open; None when
    unlimited."""
    groups = areal_groups(config, ledger, version)
    if groups is None:
        return None
    return ledger.owed + max(0, groups) * (config.group_size + config.group_redundancy)


def evolve_group_ledger(ledger: TrainLedger, event: Event) -> None:
    """`evolve_ledger`, and the counts AReaL admission reads: members owed by open train
    groups, and train episodes ever admitted (`areal_groups` counts them in whole groups of
    `G`)."""
    evolve_ledger(ledger, event)
    match event:
        case GroupOpened(work="train"):
            ledger.owed += event.group_size + ledger.redundancy
        case EpisodeDispatched() if event.group_id in ledger.unscored:
            ledger.owed -= 1
        case EpisodesCancelled() if event.group_id in ledger.unscored:
            ledger.owed -= event.unscheduled
        case GroupScored():
            ledger.accepted += len(event.episode_ids) if event.admitted else 0
        case _:
            pass


def outstanding_cap(config: RunConfig, per_batch: int) -> int:
    """PR #822's capacity: `groups_per_batch × (pipeline_depth + 1)` groups, its
    `pipeline_depth` the run's `target_lag`; verl's v1 trainers keep `num_warmup_batches + 1`
    batches out whatever the bound (`outstanding_depth`)."""
    depth = config.target_lag if config.outstanding_depth is None else config.outstanding_depth
    return max(1, per_batch // config.group_size) * (depth + 1)


def outstanding_groups(config: RunConfig, ledger: TrainLedger) -> int:
    """Train groups opened and not yet trained on: those open, and the members queued or in
    a batch whose version is not announced yet, in whole groups of `G` (the PR's groups
    train whole; rolloutlog's batches cut episodes, and a group short of a failed member
    would hold a slot its members cannot fill a batch from)."""
    return len(ledger.unscored) + sum(ledger.pending.values()) // config.group_size


def outstanding_left(config: RunConfig, ledger: TrainLedger, version: int) -> int | None:
    """Train episodes the outstanding cap allows now: the members open groups still owe,
    and `G` for each group the cap lets open; None when unlimited (token batches before the
    first completion)."""
    per_batch = episodes_per_batch(config, ledger)
    if per_batch is None:
        return None
    groups = outstanding_cap(config, per_batch) - outstanding_groups(config, ledger)
    return ledger.owed + max(0, groups) * config.group_size


def workers_left(config: RunConfig, ledger: TrainLedger, version: int) -> int | None:
    """tinker's workers (`do_async_training`, train.py:1293-1297, 1028-1066 at 9dfcc3a):
    `groups_per_batch` of them, each rolling out one group and taking the next builder only
    when that group is done, so at most `groups_per_batch` train groups are open; what
    open groups owe may always go out. None when unlimited (token batches before the
    first completion)."""
    per_batch = episodes_per_batch(config, ledger)
    if per_batch is None:
        return None
    idle = max(1, per_batch // config.group_size) - len(ledger.unscored)
    return ledger.owed + max(0, idle) * config.group_size


def evolve_outstanding_ledger(ledger: TrainLedger, event: Event) -> None:
    """`evolve_group_ledger`, and which groups still have members on their way to training:
    queued from their `group_scored`, until the version of the batch that took them."""
    evolve_group_ledger(ledger, event)
    match event:
        case GroupScored(admitted=True) if event.episode_ids:
            ledger.pending[event.group_id] = len(event.episode_ids)
        case EpisodeDropped() if group_of(event.episode_id) in ledger.pending:
            _release(ledger, (event.episode_id,))
        case BatchShipped():
            ledger.unpublished[event.step] = event.episode_ids
        case VersionPending():
            for step in [s for s in ledger.unpublished if s <= event.version]:
                _release(ledger, ledger.unpublished.pop(step))
        case _:
            pass


def max_lag_groups(config: RunConfig, groups_per_update: int, updates: int) -> int:
    """PipelineRL's `can_submit_before_update` (`pipelinerl/actor.py`, with `max_lag` set):
    `⌈max_lag / attempts⌉ + groups_per_update` groups before the first update, and
    `groups_per_update` more at each update it sees; `attempts` is G."""
    lag_groups = -(-config.max_lag // config.group_size)
    return lag_groups + groups_per_update * (updates + 1)


def max_lag_left(config: RunConfig, ledger: TrainLedger, version: int) -> int | None:
    """Train episodes max-lag admission allows now: what open groups owe, and G for each
    group PipelineRL could still submit; `groups_per_update = ⌈episodes per batch / G⌉`
    (one update per batch). None when unlimited (token batches before the first
    completion)."""
    per_batch = episodes_per_batch(config, ledger)
    if per_batch is None:
        return None
    groups_per_update = -(-per_batch // config.group_size)
    groups = max_lag_groups(config, groups_per_update, ledger.updates) - ledger.opened_groups
    return ledger.owed + max(0, groups) * config.group_size


def evolve_lag_ledger(ledger: TrainLedger, event: Event) -> None:
    """`evolve_group_ledger`, and what max-lag admission reads: train groups opened and
    versions announced."""
    evolve_group_ledger(ledger, event)
    match event:
        case GroupOpened(work="train"):
            ledger.opened_groups += 1
        case VersionPending():
            ledger.updates += 1
        case _:
            pass


def roll_budget(config: RunConfig, per_batch: int, version: int) -> int:
    """ROLL's `ReplayBuffer.batch_size`, in groups (prompts): `⌈α·B⌉` at the first step, then
    `B` more at each `advance_step`, which follows each model update: `⌈α·B⌉ + (v + 1)·B`
    at version v, with `B = max(1, per_batch // G)` prompts a batch."""
    groups = max(1, per_batch // config.group_size)
    return math.ceil(config.async_generation_ratio * groups) + (version + 1) * groups


def roll_left(config: RunConfig, ledger: TrainLedger, version: int) -> int | None:
    """Train episodes ROLL admission allows now: what open groups owe, and `G + r` for each
    group the budget has room for (`running + completed < batch_size`: every train group
    opened and not aborted counts)."""
    per_batch = episodes_per_batch(config, ledger)
    if per_batch is None:
        return None
    used = ledger.roll_used - ledger.roll_lost // config.group_size
    groups = roll_budget(config, per_batch, version) - used
    return ledger.owed + max(0, groups) * (config.group_size + config.group_redundancy)


def evolve_roll_ledger(ledger: TrainLedger, event: Event) -> None:
    """`evolve_group_ledger`, and ROLL's count of prompts begun and not aborted: a train
    group opens one; its first stale cancellation (ROLL's `gc` abort) gives it back. ROLL
    aborts a prompt whose processing raised (generate_scheduler.py:853-863, 326-338) and
    trains nothing of it; rolloutlog trains the members that arrived, so the members that
    failed give a group back for each `G` of them (`roll_left`)."""
    if isinstance(event, EpisodeFailed) and event.episode_id in ledger.inflight:
        group_id = group_of(event.episode_id)  # before evolve_ledger forgets it
        ledger.failed[group_id] = ledger.failed.get(group_id, 0) + 1
    evolve_group_ledger(ledger, event)
    match event:
        case GroupOpened(work="train"):
            ledger.roll_used += 1
        case EpisodesCancelled(reason="stale") if event.group_id in ledger.unscored:
            if event.group_id not in ledger.aborted:
                ledger.aborted.add(event.group_id)
                ledger.roll_used -= 1
        case GroupScored():
            failed = ledger.failed.pop(event.group_id, 0)
            ledger.roll_lost += failed if event.group_id not in ledger.aborted else 0
            ledger.aborted.discard(event.group_id)
        case _:
            pass


def _release(ledger: TrainLedger, episode_ids: tuple[str, ...]) -> None:
    """The members on their way to training that left: a group with none left is released."""
    for episode_id in episode_ids:
        group_id = group_of(episode_id)
        left = ledger.pending.get(group_id)
        if left is None:
            continue
        if left <= 1:
            del ledger.pending[group_id]
        else:
            ledger.pending[group_id] = left - 1
