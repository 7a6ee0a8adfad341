"""slime's over-sampling admission and its abort of the leftovers once a batch is full.

slime (`slime/rollout/sglang_rollout.py`, `generate_rollout_async`) samples a step's batch
in rounds: while `remaining_batch_size < rollout_batch_size` it submits
`over_sampling_batch_size` more groups (at least a batch's groups; by default exactly
that), and `remaining_batch_size` falls only when its dynamic filter drops a group. Once
`rollout_batch_size` groups are in, it aborts every request still out; without partial
rollout those groups are lost, finished members included.

Here (`admission = "slime"`), per step and in episodes (`G` per group), with `B` the
episodes a batch takes and `O` the round (`over_sampling_batch_size × G`):

    granted = O × ceil((B + lost) / O)

train episodes may go out for the step, where `lost` are the members of this step's train
groups that will not reach the queue (not admitted at scoring: the curriculum's rejection,
which is slime's dynamic filter, failures, drops; or swept from the queue). New train
groups open while the members opened this step stay below `granted`; members an open
group still owes are always allowed, and with no train group open and the queue short of
a batch one may always open (liveness: with token batches `B` is an estimate, and with
any batch the queue may hold a step's episodes a drop left short). The counts restart when
a batch ships; under `recycle` (slime's `--partial-rollout`) a group the ship recycles
counts in the next step's round, since `get_samples` serves the buffer's groups first and
`remaining_batch_size` counts every group it returns (slime/rollout/data_source.py:177-189,
sglang_rollout.py:149 at 624b824). With `leftovers = "abort"`, the ship cancels what every
train group still owes (reason `leftover`), and the sink drops the queued episodes the
batch did not take and, at finalize, every arrival of a train group opened for a batch
that has shipped (reason `leftover`): nothing of an aborted group, and no finished group
past the batch, trains.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping

from rolloutlog.core.config import RunConfig
from rolloutlog.core.rules.admission import episodes_per_batch, group_of
from rolloutlog.core.rules.admission_field import evolve_group_ledger
from rolloutlog.core.state import DispatcherState, SinkGroup, TrainLedger
from rolloutlog.events.types import (
    BatchShipped,
    EpisodeDropped,
    EpisodeInterrupted,
    EpisodesCancelled,
    Event,
    GroupOpened,
    GroupScored,
)


def round_episodes(config: RunConfig, per_batch: int | None) -> int:
    """`O`: the episodes of one sampling round (a batch's groups when not set)."""
    groups = config.over_sampling_batch_size
    if groups is None:
        groups = max(1, -(-(per_batch or config.group_size) // config.group_size))
    return groups * config.group_size


def granted(config: RunConfig, per_batch: int | None, lost: int) -> int:
    """The train episodes a step may send out: whole rounds, until those not lost fill
    a batch (`O × ceil((B + lost) / O)`)."""
    size = round_episodes(config, per_batch)
    batch = per_batch if per_batch is not None else size
    return size * -(-(batch + lost) // size)


def slime_left(config: RunConfig, ledger: TrainLedger, version: int) -> int | None:
    """Train episodes slime admission allows now: the members open groups owe, and what is
    left of the step's grant."""
    per_batch = episodes_per_batch(config, ledger)
    return ledger.owed + max(0, granted(config, per_batch, ledger.round_lost) - ledger.round_opened)


def slime_idle_floor(config: RunConfig, ledger: TrainLedger, version: int) -> int:
    """The exception (module docstring): one episode while no train group is open and the
    queue is short of a batch: slime's next round, which its loop takes while the batch
    is short."""
    short = config.batch_size is None or ledger.queued < config.batch_size
    return 1 if short and not ledger.unscored else 0


def evolve_round_ledger(ledger: TrainLedger, event: Event) -> None:
    """`evolve_group_ledger`, and the step's round counts slime admission reads."""
    queued = isinstance(event, EpisodeDropped) and group_of(event.episode_id) not in ledger.unscored
    evolve_group_ledger(ledger, event)
    match event:
        case GroupOpened(work="train"):
            ledger.round_groups[event.group_id] = event.group_size
            ledger.round_opened += event.group_size
            ledger.open_sizes[event.group_id] = event.group_size
        case GroupScored() if event.group_id in ledger.round_groups:
            kept = len(event.episode_ids) if event.admitted else 0
            ledger.round_lost += ledger.round_groups[event.group_id] - kept
        case EpisodeDropped() if queued and group_of(event.episode_id) in ledger.round_groups:
            ledger.round_lost += 1
        case BatchShipped():
            ledger.round_groups.clear()
            ledger.round_opened = ledger.round_lost = 0
        case EpisodeInterrupted(reason="recycle") if _recycled(ledger, event.episode_id):
            group = group_of(event.episode_id)  # recycled: served first, counted in the round
            ledger.round_groups[group] = size = ledger.open_sizes[group]
            ledger.round_opened += size
        case _:
            pass
    if type(event) is GroupScored:  # closed, whatever its round
        ledger.open_sizes.pop(event.group_id, None)


def _recycled(ledger: TrainLedger, episode_id: str) -> bool:
    """An open train group's member recycled, its group not yet in this step's round."""
    group = group_of(episode_id)
    return group in ledger.open_sizes and group not in ledger.round_groups


def abort_leftovers(state: DispatcherState, t: float) -> list[Event]:
    """slime's abort once the batch is full: every train group of an earlier step still
    owed, whole (one opened in the same reaction, after the ship, is the next step's)."""
    return [
        EpisodesCancelled(
            t=t,
            group_id=group.group_id,
            episode_ids=tuple(group.inflight),
            unscheduled=group.unscheduled,
            reason="leftover",
        )
        for group in state.groups.values()
        if group.train and group.owed() and group.step < state.step
    ]


def leftovers_run_on(state: DispatcherState, t: float) -> list[Event]:
    """rolloutlog's rule: a shipped batch cancels nothing; open groups run on."""
    return []


def sampled_for_a_shipped_batch(group: SinkGroup, step: int) -> bool:
    """A train group opened for a batch that has shipped is a leftover (aborted, or done
    too late for it): slime keeps none of its arrivals."""
    return group.train and group.step < step


def never_leftover(group: SinkGroup, step: int) -> bool:
    """rolloutlog's rule: a group's arrivals train whatever batch they join."""
    return False


def queue_beyond_batch(queue: Mapping[str, object], cut: Collection[str]) -> list[str]:
    """slime keeps no finished group past the batch (`if len(data) < target_data_size`):
    the queued episodes a batch did not take are dropped with it."""
    taken = set(cut)
    return [episode_id for episode_id in queue if episode_id not in taken]


def queue_kept(queue: Mapping[str, object], cut: Collection[str]) -> list[str]:
    """rolloutlog's rule: what a batch did not take waits for the next one."""
    return []
