"""slime's over-sampling and its abort of the leftovers, restated by scanning the record.

A step's train groups are those opened at it (`group_opened.step`). They may send out
`O × ceil((B + lost) / O)` episodes (a group recycled at the ship counts in the next
step's, as slime's buffer serves it first), `O` the round (`over_sampling_batch_size` groups, by
default a batch's, of `G`), `B` the batch, `lost` what of the step's scored groups is not
in the queue (never admitted, or dropped since); what open groups owe always may go, and
with `liveness`, no train group unscored and the queue short of a batch one episode always
may. Under
`leftovers = "abort"` a shipped batch cancels what every train group owes (`leftover`),
and the arrivals of train groups opened for a shipped batch and the queue the batch left
are dropped (`leftover`).
"""

from __future__ import annotations

from rolloutlog.events.types import EpisodesCancelled, Event
from rolloutlog.testing.reference.record import Group, Record


def slime_room(record: Record, per_batch: int | None) -> int:
    """Train episodes slime admission lets out now."""
    settings = record.config
    size = settings.group_size
    rounds = settings.over_sampling_batch_size or max(1, -(-(per_batch or size) // size))
    round_episodes = rounds * size
    batch = round_episodes if per_batch is None else per_batch
    recycled = record.recycled_since_ship()  # served first, counted in the round
    step = [
        g
        for g in record.groups.values()
        if g.train and (g.step == record.step or g.group_id in recycled)
    ]
    queued = {e.episode_id for e in record.queue()}
    lost = sum(g.size - sum(e.episode_id in queued for e in g.members) for g in step if g.scored)
    granted = round_episodes * -(-(batch + lost) // round_episodes)
    running = [g for g in record.groups.values() if g.train and not g.scored]
    room = sum(g.unscheduled() for g in running) + max(0, granted - sum(g.size for g in step))
    short = settings.batch_size is None or len(queued) < settings.batch_size
    return max(room, 1) if short and not running and settings.liveness else room


def leftovers(record: Record, t: float) -> list[Event]:
    """At a shipped batch under the abort rule: every train group still owed, whole."""
    if record.config.leftovers != "abort":
        return []
    return [
        EpisodesCancelled(
            t=t,
            group_id=g.group_id,
            episode_ids=tuple(e.episode_id for e in g.in_flight()),
            unscheduled=g.unscheduled(),
            reason="leftover",
        )
        for g in record.open_groups()
        if g.train and g.step < record.step  # a group opened after the ship is the next step's
    ]


def leftover(record: Record, group: Group) -> bool:
    """Under the abort rule, a train group opened for a batch that has shipped: none of
    its arrivals trains."""
    return record.config.leftovers == "abort" and group.train and group.step < record.step
