"""The sink, restated naively: finalize, score, queue, sweep and cut by scanning the record.

A group finalizes the moment its arrivals plus all its cancellation counts reach G. Its
stale arrivals are dropped (all of them under per-group staleness once any cancellation of
the group was `stale`), its fresh completed members are scored and shown to the
curriculum, admitted members join the queue (with `stale_check = "after-curriculum"` stale
arrivals are scored too, and the next queue check drops them). A queue check sweeps the
queue of what is past the bound, then cuts a batch (one per decision) in `batch_order`
once it is full, the trainer is within the lag, and the run has not finished.
"""

from __future__ import annotations

from rolloutlog.events.types import BatchShipped, EpisodeDropped, Event, GroupScored
from rolloutlog.testing.reference.record import Episode, Group, Record
from rolloutlog.testing.reference.rules import ZERO, admits, advantages, age, past_bound


def decide(record: Record, event: Event) -> list[Event]:
    kind = event.kind
    if kind in ("episode_completed", "episode_failed"):
        return _finalize(record, event.episode_id.rpartition("/")[0], event.t)  # type: ignore[union-attr]
    if kind == "episodes_cancelled":
        return _finalize(record, event.group_id, event.t)  # type: ignore[union-attr]
    if kind in ("batch_shipped", "group_scored", "version_pending") and _checks(record, kind):
        return _sweep_and_cut(record, event.t)
    return []


def _checks(record: Record, kind: str) -> bool:
    """Whether the queue is checked now. By default at every batch, scored group and new
    version. With `queue_sweep = "at-next-check"` (prime-rl) only once a train group was
    scored since the last batch shipped, and never at a batch itself."""
    if record.config.queue_sweep == "at-ship":
        return True
    if kind == "batch_shipped":
        return False
    for event in reversed(record.history):
        if event.kind == "batch_shipped":
            return False
        if event.kind == "group_scored" and record.groups[event.group_id].train:  # type: ignore[union-attr]
            return True
    return False


def _finalize(record: Record, group_id: str, t: float) -> list[Event]:
    group = record.groups.get(group_id)
    if group is None or group.scored or group.accounted() != group.size:
        return []
    settings, step = record.config, record.step
    void = settings.staleness == "per-group" and any(
        c.reason == "stale" for c in group.cancellations
    )
    out: list[Event] = []
    fresh: list[Episode] = []
    judged = settings.stale_check == "at-finalize"  # else the queue check drops them
    for episode in sorted(group.arrived(), key=lambda e: e.member):
        if void or (
            judged and past_bound(settings, group.train, group.frozen, episode.version, step)
        ):
            out.append(_drop(episode, step, t))
        elif episode.status == "completed":
            fresh.append(episode)
    out.append(_score(record, group, fresh, t))
    return out


def _drop(episode: Episode, step: int, t: float) -> EpisodeDropped:
    return EpisodeDropped(
        t=t, episode_id=episode.episode_id, reason="stale", age=age(episode.version, step)
    )


def _score(record: Record, group: Group, fresh: list[Episode], t: float) -> GroupScored:
    ids = tuple(e.episode_id for e in fresh)
    if not group.train or not fresh:
        return GroupScored(
            t=t, group_id=group.group_id, episode_ids=ids, advantages=(), admitted=False
        )
    rewards = [e.reward for e in fresh if e.reward is not None]
    return GroupScored(
        t=t,
        group_id=group.group_id,
        episode_ids=ids,
        advantages=advantages(rewards),
        admitted=admits(record.config, rewards),
    )


def _sweep_and_cut(record: Record, t: float) -> list[Event]:
    settings, step = record.config, record.step
    out: list[Event] = []
    kept: list[Episode] = []
    for episode in record.queue():
        group = record.group_of(episode)
        if past_bound(settings, group.train, group.frozen, episode.version, step):
            out.append(_drop(episode, step, t))
        else:
            kept.append(episode)
    return out + _cut(record, kept, t)


def _cut(record: Record, queue: list[Episode], t: float) -> list[Event]:
    settings = record.config
    if record.finished or record.version < record.step - 1 - settings.lag:
        return []
    if settings.batch_order == "oldest-first":
        queue = sorted(queue, key=lambda e: e.version)
    if settings.batch_size is not None:
        if len(queue) < settings.batch_size:
            return []
        cut = queue[: settings.batch_size]
    else:
        cut = []
        for episode in queue:
            cut.append(episode)
            if sum(e.tokens for e in cut) >= (settings.token_batch_size or 0):
                break
        else:
            return []
    trained = [
        e for e in cut if not (settings.filter_zero_advantages and abs(e.advantage or 0.0) <= ZERO)
    ]
    return [
        BatchShipped(
            t=t,
            step=record.step,
            episode_ids=tuple(e.episode_id for e in cut),
            trained_ids=tuple(e.episode_id for e in trained),
            tokens=sum(e.tokens for e in trained),
        )
    ]
