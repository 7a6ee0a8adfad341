"""The sink, restated naively: finalize, score, queue, sweep and cut by scanning the record.

A group finalizes the moment its arrivals plus all its cancellation counts reach G. Its
stale arrivals are dropped (all of them under per-group staleness once any cancellation of
the group was `stale`), its fresh completed members are scored and shown to the
curriculum, admitted members join the queue (with `stale_check = "after-curriculum"` stale
arrivals are scored too, and the next queue check drops them; under soft staleness nothing
is ever dropped for its age). Under `requeue` (tinker, slime-lag) a group its rule finds
stale is discarded whole, reason `requeue`; tinker's swept episodes carry that reason too.
Under `stale_member = "withhold"` (prime-rl-withhold) an arrival more than the bound behind
the current version is never dropped before scoring: it is scored with its group, and if
the group is admitted it is dropped right after, reason `withheld`.
An admitted group that would take the queue past `queue_limit` first evicts its oldest
episodes (or, under `oldest-group`, its oldest whole groups), reason `evicted`.
A queue check (under `queue_sweep = "while-sampling"` only while a batch may ship) sweeps
the queue of what is past the bound, then cuts a batch (one per
decision) in `batch_order` once it is full, the trainer is within the lag, and the run has
not finished (and, under `update_pause = "until-live"`, the announced version is live: a
check runs at `version_live` too). Under `ship_wait = "last-chance"` (tinker-822) a full
batch also waits while a train group not yet scored holds a member at its last chance.
"""

from __future__ import annotations

import math

from rolloutlog.events.types import BatchShipped, EpisodeDropped, Event, GroupScored
from rolloutlog.testing.reference.masking import masked, staleness_version
from rolloutlog.testing.reference.oversampling import leftover
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
    if (
        kind == "version_live"
        and record.config.update_pause == "until-live"
        and _checks(record, kind)
    ):
        return _sweep_and_cut(record, event.t)  # the batch the update held
    return []


def _checks(record: Record, kind: str) -> bool:
    """Whether the queue is checked now. By default at every batch, scored group and new
    version. With `queue_sweep = "at-next-check"` (prime-rl) only once a train group was
    scored since the last batch shipped, and never at a batch itself. With
    `"while-sampling"` (verl-drop) only while batch `step` may ship: within the lag, and
    (under `update_pause = "until-live"`) the announced version live."""
    settings = record.config
    if settings.queue_sweep == "at-ship":
        return True
    if settings.queue_sweep == "while-sampling":
        within = record.version >= record.step - 1 - settings.lag
        return within and not (
            settings.update_pause == "until-live" and record.live < record.version
        )
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
    discard = _discarded_for_requeue(record, group)
    out: list[Event] = []
    fresh: list[Episode] = []
    judged = settings.stale_check == "at-finalize"  # else the queue check drops them
    withheld = set() if discard else _withheld(record, group)
    for episode in sorted(group.arrived(), key=lambda e: e.member):
        if discard:
            out.append(_drop(episode, step, t, "requeue"))
        elif leftover(record, group):
            out.append(_drop(episode, step, t, "leftover"))
        elif episode.episode_id in withheld:
            if episode.status == "completed":
                fresh.append(episode)
        elif void or (judged and _drops(record, group, episode, step)):
            out.append(_drop(episode, step, t))
        elif episode.status == "completed":
            fresh.append(episode)
    scored = _score(record, group, fresh, t)
    if scored.admitted:
        out.extend(_evict(record, len(scored.episode_ids), t))
    out.append(scored)
    if scored.admitted:
        out += [_drop(e, step, t, "withheld") for e in fresh if e.episode_id in withheld]
    return out


def _evict(record: Record, joining: int, t: float) -> list[Event]:
    """A bounded queue (`queue_limit`) that cannot take the `joining` members drops from its
    front: one episode per place needed, or under `oldest-group` each front group whole
    until there is room."""
    settings, queue = record.config, record.queue()
    if not settings.queue_limit:
        return []
    out: list[Event] = []
    while queue and len(queue) + joining > settings.queue_limit:
        front = [queue[0]]
        if settings.queue_eviction == "oldest-group":
            front = [e for e in queue if e.group_id == queue[0].group_id]
        out.extend(_drop(e, record.step, t, "evicted") for e in front)
        queue = [e for e in queue if e not in front]
    return out


def _withheld(record: Record, group: Group) -> set[str]:
    """Withhold (prime-rl #2960): the live-policy train arrivals whose stamp lags the current
    version by more than the bound."""
    settings = record.config
    if settings.stale_member != "withhold" or not group.train or group.frozen:
        return set()
    bound = settings.max_off_policy_steps
    return {e.episode_id for e in group.arrived() if record.version - e.version > bound}


def _drops(record: Record, group: Group, episode: Episode, step: int) -> bool:
    """Past the bound, where the policy drops for age (soft staleness never does); under
    `mask` by the version of its last segment."""
    settings, version = record.config, staleness_version(record, episode)
    return settings.staleness != "soft" and past_bound(
        settings, group.train, group.frozen, version, step
    )


def _discarded_for_requeue(record: Record, group: Group) -> bool:
    """tinker (`at-ship`): every arrival is past the bound for the batch it would join now.
    slime-lag (`at-completion`): every arrival lags the current version by more than the
    bound. Either way the group goes whole, and its task is opened again."""
    settings, arrived = record.config, group.arrived()
    if not arrived or not group.train or group.frozen:
        return False
    bound = settings.max_off_policy_steps
    if settings.requeue == "at-ship":
        return all(age(e.version, record.step) > bound for e in arrived)
    if settings.requeue == "at-completion":
        return all(record.version - e.version > bound for e in arrived)
    return False


def _drop(episode: Episode, step: int, t: float, reason: str = "stale") -> EpisodeDropped:
    return EpisodeDropped(
        t=t,
        episode_id=episode.episode_id,
        reason=reason,  # type: ignore[arg-type]
        age=age(episode.version, step),
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
        if _drops(record, group, episode, step):
            reason = "requeue" if settings.requeue == "at-ship" else "stale"  # tinker: at ship
            out.append(_drop(episode, step, t, reason))
        else:
            kept.append(episode)
    return out + _cut(record, kept, t)


def _last_chance_open(record: Record) -> bool:
    """tinker-822's wait: a train group not yet scored holds a dispatched member (in flight
    or arrived) whose age for this batch is at least the bound: its last chance."""
    bound = record.config.max_off_policy_steps
    return any(
        age(e.version, record.step) >= bound
        for g in record.groups.values()
        if g.train and not g.frozen and not g.scored
        for e in g.members
        if e.status != "cancelled"
    )


def _roll_window(record: Record, queue: list[Episode]) -> list[Episode]:
    """ROLL's get_batch: oldest version first, none older than `(step − 1) − ⌈α⌉`; at that
    oldest version whole groups only while fewer than `int(batch_size × frac(α))` episodes
    were taken, when α is not whole and batches count episodes."""
    settings = record.config
    ratio = settings.async_generation_ratio
    oldest = record.step - 1 - math.ceil(ratio)
    capped = ratio != math.floor(ratio) and settings.batch_size is not None
    cap = int((settings.batch_size or 0) * (ratio - math.floor(ratio)))
    out: list[Episode] = []
    opened: list[str] = []
    for episode in sorted(queue, key=lambda e: e.version):
        if episode.version < oldest:
            continue
        if capped and episode.version == oldest and episode.group_id not in opened:
            if len(out) >= cap:
                continue
            opened.append(episode.group_id)
        out.append(episode)
    return out


def _cut(record: Record, queue: list[Episode], t: float) -> list[Event]:
    settings = record.config
    if record.finished or record.version < record.step - 1 - settings.lag:
        return []
    if settings.update_pause == "until-live" and record.live < record.version:
        return []
    if settings.ship_wait == "last-chance" and _last_chance_open(record):
        return []
    queued = queue  # in the order episodes joined it
    if settings.batch_order == "oldest-first":
        queue = sorted(queue, key=lambda e: e.version)
    elif settings.batch_order == "roll-window":
        queue = _roll_window(record, queue)
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
    # slime keeps nothing the full batch left: dropped once it shipped, at the next step
    left = [e for e in queued if e not in cut] if settings.leftovers == "abort" else []
    return [
        BatchShipped(
            t=t,
            step=record.step,
            episode_ids=tuple(e.episode_id for e in cut),
            trained_ids=tuple(e.episode_id for e in trained),
            tokens=sum(e.tokens for e in trained),
            masked_tokens=sum(masked(record, e, record.step) for e in trained),
        ),
        *(_drop(e, record.step + 1, t, "leftover") for e in left),
    ]
