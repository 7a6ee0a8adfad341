"""Plain-data views of a folded state: what `show --at` prints and a divergence carries.

The deciders' states are built for deciding (the dispatcher forgets a group once it owes
nothing, the sink forgets a cancelled member); these views put the two together with the
fold's registry, so that a reader sees one account per group: every member dispatched so
far, its state (in flight, completed, failed, dropped, cancelled), its dispatch version
and its rollout age at the current step. All values are JSON-ready.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from itertools import islice
from typing import Any

from rolloutlog.core.dispatcher import gated
from rolloutlog.core.registry import group_number
from rolloutlog.core.sink import Arrival
from rolloutlog.core.staleness import rollout_age
from rolloutlog.events.types import Event
from rolloutlog.replay.fold import LogFold

QUEUE_SHOWN = 10  # queued episodes listed by id; the rest are counted


def state_at(fold: LogFold) -> dict[str, Any]:
    """The whole state after the last applied event: counters, open groups, the queue."""
    return {
        **_globals(fold),
        "open_groups": [group_view(fold, group_id) for group_id in fold.sink_state.groups],
        "queue": queue_view(fold),
    }


def relevant_state(fold: LogFold, events: Iterable[Event]) -> dict[str, Any]:
    """The counters, and the groups that `events` name (a divergence's context)."""
    group_ids = dict.fromkeys(g for event in events for g in groups_named(event))
    return {
        **_globals(fold),
        "groups": [group_view(fold, group_id) for group_id in group_ids],
        "queue": queue_view(fold),
    }


def groups_named(event: Event) -> list[str]:
    """The groups an event is about: its `group_id`, or those of the episodes it names."""
    group_id = getattr(event, "group_id", None)
    if isinstance(group_id, str):
        return [group_id]
    ids = [getattr(event, "episode_id", None), *getattr(event, "episode_ids", ())]
    return list(dict.fromkeys(i.rpartition("/")[0] for i in ids if isinstance(i, str)))


def _globals(fold: LogFold) -> dict[str, Any]:
    dispatcher = fold.dispatcher_state
    held = len(dispatcher.inflight)
    return {
        "seq": fold.next_seq - 1,
        "step": dispatcher.step,
        "policy_version": dispatcher.version,
        "max_inflight": dispatcher.limit,
        "permits_held": held,
        "permits_free": max(0, dispatcher.limit - held),
        "gated": gated(fold.rules, dispatcher),
        "finished": dispatcher.finished,
    }


def group_view(fold: LogFold, group_id: str) -> dict[str, Any] | None:
    """One group's account, or None when it is not open at the sink (finalized, unknown)."""
    group = fold.sink_state.groups.get(group_id)
    if group is None:
        return None
    owing = fold.dispatcher_state.groups.get(group_id)
    step = fold.sink_state.step
    dispatched = fold.registry.members[group_number(group_id)]
    arrived = {arrival.episode_id: arrival for arrival in group.arrived}
    members = [
        _member(f"{group_id}/{m}", m, group.inflight, arrived, step) for m in range(dispatched)
    ]
    return {
        "group_id": group_id,
        "work": "train" if group.train else "eval",
        "task_id": group.task_id,
        "frozen": group.frozen,
        "size": group.size,
        "start_version": owing.start_version if owing is not None else None,
        "dispatched": dispatched,
        "unscheduled": owing.unscheduled if owing is not None else 0,
        "arrived": len(group.arrived),
        "cancelled": group.cancelled,
        "members": members,
    }


def _member(
    episode_id: str, member: int, inflight: dict[str, int], arrived: dict[str, Arrival], step: int
) -> dict[str, Any]:
    view: dict[str, Any] = {"episode_id": episode_id, "member": member}
    arrival = arrived.get(episode_id)
    if episode_id in inflight:
        view.update(state="in_flight", version=inflight[episode_id])
    elif arrival is not None:
        state = "failed" if arrival.reward is None else "completed"
        view.update(state="dropped" if arrival.dropped else state, version=arrival.version)
        view["reward"] = arrival.reward
    else:
        view.update(state="cancelled", version=None)
    view["age"] = None if view["version"] is None else rollout_age(view["version"], step)
    return view


def queue_view(fold: LogFold, shown: int = QUEUE_SHOWN) -> dict[str, Any]:
    """The training queue: size, tokens, ages, and the oldest `shown` episodes."""
    sink = fold.sink_state
    ages = Counter(rollout_age(q.version, sink.step) for q in sink.queue.values())
    oldest = [
        {"episode_id": episode_id, "version": q.version, "advantage": q.advantage}
        for episode_id, q in islice(sink.queue.items(), shown)
    ]
    return {
        "episodes": len(sink.queue),
        "tokens": sink.queued_tokens,
        "age_histogram": {str(age): ages[age] for age in sorted(ages)},
        "oldest": oldest,
    }
