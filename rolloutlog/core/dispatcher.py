"""The dispatcher decider: schedules episodes on inference under a permit budget.

`evolve(state, event)` is the only place the state changes. For speed the state is a
mutable object that `evolve` updates in place and returns; `decide(state, event)` only
reads it. `decide` runs after the event was evolved, so it always sees the current state.

`decide` is state-driven: on any event it fills free permits (oldest open group first,
then new groups), except on `version_pending` (cancel stale in-flight train episodes),
`overload_cut` (drop whole groups, youngest first) and `run_finished` (cancel everything
owed). Permits freed by those cancellations are refilled when the dispatcher reacts to its
own `episodes_cancelled`, so no decision is ever computed on a state it has not seen.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import attrs

from rolloutlog.core.config import RunConfig
from rolloutlog.core.errors import InconsistentLogError, require
from rolloutlog.core.staleness import rollout_age
from rolloutlog.core.tasks import task_for_group
from rolloutlog.events.types import (
    CancelReason,
    EpisodeDispatched,
    EpisodesCancelled,
    Event,
    GroupOpened,
    Work,
)

SMOOTHING_WINDOW_S = 5.0


@attrs.define(slots=True)
class OpenGroup:
    """A group that still owes the dispatcher something: in-flight or unscheduled members."""

    group_id: str
    number: int
    train: bool
    live: bool
    size: int
    start_version: int
    dispatched: int = 0
    unscheduled: int = 0
    inflight: dict[str, int] = attrs.Factory(dict)  # episode id -> its dispatch version

    def owed(self) -> int:
        """Members not yet accounted for: in flight or never dispatched."""
        return len(self.inflight) + self.unscheduled


@attrs.define(slots=True)
class DispatcherState:
    """Permits, open groups, the policy version and step, the gate's inputs.

    Bounded by what is in flight and open: finished groups leave `groups`, and a late
    completion is recognised by its absence from `inflight`, not by a history of ids.
    """

    config: RunConfig
    limit: int
    step: int = 1
    version: int = 0
    groups_opened: int = 0
    groups: dict[str, OpenGroup] = attrs.Factory(dict)  # in opening order
    owing: dict[str, None] = attrs.Factory(dict)  # groups with unscheduled members, in order
    inflight: dict[str, str] = attrs.Factory(dict)  # episode id -> group id; one per permit
    eval_owed: int = 0
    window: int = -1
    window_growth: int = 0
    late_events: int = 0
    finished: bool = False

    def gated(self) -> bool:
        """Train dispatch pauses while the trainer lags the step by more than `target_lag`."""
        return (self.step - 1) - self.version > self.config.target_lag


def initial_state(config: RunConfig) -> DispatcherState:
    """The dispatcher before `run_started`: no permits held, version 0, step 1."""
    return DispatcherState(config=config, limit=config.max_inflight)


# --- evolve ------------------------------------------------------------------------------


def evolve(state: DispatcherState, event: Event) -> DispatcherState:
    """Apply one event to the state, in place; events it does not care about pass through."""
    if state.config.admission_smoothing:
        _advance_window(state, event.t)
    handler = _EVOLVERS.get(event.kind)
    if handler is not None:
        handler(state, event)
    return state


def _advance_window(state: DispatcherState, t: float) -> None:
    window = int(t // SMOOTHING_WINDOW_S)
    if window != state.window:
        state.window = window
        state.window_growth = 0


def _on_group_opened(state: DispatcherState, event: Any) -> None:
    require(event.group_id not in state.groups, event.seq, event.kind, "group opened twice")
    number = state.groups_opened + 1
    require(
        event.group_id == f"g{number}",
        event.seq,
        event.kind,
        f"expected group id g{number}, got {event.group_id}",
    )
    state.groups_opened = number
    state.groups[event.group_id] = OpenGroup(
        group_id=event.group_id,
        number=number,
        train=event.work == "train",
        live=event.live,
        size=event.group_size,
        start_version=event.policy_version,
        unscheduled=event.group_size,
    )
    state.owing[event.group_id] = None
    if event.work == "eval":
        state.eval_owed = max(0, state.eval_owed - 1)


def _group_of(state: DispatcherState, event: Any) -> OpenGroup:
    group = state.groups.get(event.group_id)
    if group is None:
        raise InconsistentLogError(event.seq, event.kind, f"{event.group_id} is not open")
    return group


def _on_dispatched(state: DispatcherState, event: Any) -> None:
    group = _group_of(state, event)
    require(group.unscheduled > 0, event.seq, event.kind, f"{event.group_id} owes no member")
    require(
        event.member == group.dispatched,
        event.seq,
        event.kind,
        f"expected member {group.dispatched} of {group.group_id}, got {event.member}",
    )
    group.dispatched += 1
    group.unscheduled -= 1
    if group.unscheduled == 0:
        del state.owing[group.group_id]
    group.inflight[event.episode_id] = event.policy_version
    state.inflight[event.episode_id] = group.group_id
    state.window_growth += 1


def _on_arrival(state: DispatcherState, event: Any) -> None:
    group_id = state.inflight.pop(event.episode_id, None)
    if group_id is None:
        state.late_events += 1
        return
    group = state.groups[group_id]
    del group.inflight[event.episode_id]
    state.window_growth -= 1  # a natural completion refunds one admission
    _close_if_done(state, group)


def _on_cancelled(state: DispatcherState, event: Any) -> None:
    group = _group_of(state, event)
    for episode_id in event.episode_ids:
        require(
            episode_id in group.inflight,
            event.seq,
            event.kind,
            f"{episode_id} is not in flight",
        )
        del group.inflight[episode_id]
        del state.inflight[episode_id]
    require(
        event.unscheduled <= group.unscheduled,
        event.seq,
        event.kind,
        f"cancels {event.unscheduled} unscheduled, {group.group_id} has {group.unscheduled}",
    )
    if event.unscheduled:
        group.unscheduled -= event.unscheduled
        if group.unscheduled == 0:
            del state.owing[group.group_id]
    _close_if_done(state, group)


def _close_if_done(state: DispatcherState, group: OpenGroup) -> None:
    if group.owed() == 0:
        del state.groups[group.group_id]


def _on_version_pending(state: DispatcherState, event: Any) -> None:
    state.version = event.version


def _on_limit_set(state: DispatcherState, event: Any) -> None:
    state.limit = event.max_inflight


def _on_batch_shipped(state: DispatcherState, event: Any) -> None:
    state.step = event.step + 1
    interval = state.config.eval_interval
    if interval and event.step % interval == 0:
        state.eval_owed += 1


def _on_run_finished(state: DispatcherState, event: Any) -> None:
    state.finished = True


_EVOLVERS: dict[str, Callable[[DispatcherState, Any], None]] = {
    "group_opened": _on_group_opened,
    "episode_dispatched": _on_dispatched,
    "episode_completed": _on_arrival,
    "episode_failed": _on_arrival,
    "episodes_cancelled": _on_cancelled,
    "version_pending": _on_version_pending,
    "limit_set": _on_limit_set,
    "batch_shipped": _on_batch_shipped,
    "run_finished": _on_run_finished,
}


# --- decide ------------------------------------------------------------------------------


def decide(state: DispatcherState, event: Event) -> list[Event]:
    """The dispatcher's reaction to `event`, on the state that already includes it."""
    kind = event.kind
    if kind == "run_finished":
        return _cancel_groups(state, list(state.groups.values()), "shutdown", event.t)
    if state.finished:
        return []
    if kind == "version_pending":
        cancelled = _cancel_stale(state, event.t)
        if cancelled:
            return cancelled
    elif kind == "overload_cut":
        cancelled = _cut_overload(state, event.n, event.t)  # type: ignore[union-attr]
        if cancelled:
            return cancelled
    return _fill(state, event.t)


def _cancel_stale(state: DispatcherState, t: float) -> list[Event]:
    """Before a weight update: cancel the stale in-flight train episodes of each group.

    Per-episode: exactly the stale in-flight members; siblings keep running and unscheduled
    members are dispatched later at the then-current version. Per-group: the whole group.
    """
    config = state.config
    bound, step = config.max_off_policy_steps, state.step
    out: list[Event] = []
    for group in state.groups.values():
        if not (group.train and group.live and group.inflight):
            continue
        if config.staleness == "per-group":
            if rollout_age(group.start_version, step) > bound:
                out.append(_cancellation(group, "stale", t))
            continue
        stale = tuple(e for e, v in group.inflight.items() if rollout_age(v, step) > bound)
        if stale:
            out.append(
                EpisodesCancelled(
                    t=t, group_id=group.group_id, episode_ids=stale, unscheduled=0, reason="stale"
                )
            )
    return out


def _cut_overload(state: DispatcherState, n: int, t: float) -> list[Event]:
    """Drop whole groups, youngest first, until at least `n` owed episodes are cancelled.

    A group's age is its oldest member's dispatch time; member 0 is dispatched when the
    group opens, so age order is opening order and the youngest group is the last opened.
    """
    victims: list[OpenGroup] = []
    owed = 0
    for group in reversed(state.groups.values()):
        if owed >= n:
            break
        victims.append(group)
        owed += group.owed()
    return _cancel_groups(state, victims, "overload", t)


def _cancel_groups(
    state: DispatcherState, groups: list[OpenGroup], reason: CancelReason, t: float
) -> list[Event]:
    return [_cancellation(group, reason, t) for group in groups if group.owed()]


def _cancellation(group: OpenGroup, reason: CancelReason, t: float) -> EpisodesCancelled:
    return EpisodesCancelled(
        t=t,
        group_id=group.group_id,
        episode_ids=tuple(group.inflight),
        unscheduled=group.unscheduled,
        reason=reason,
    )


def _free_permits(state: DispatcherState) -> int:
    free = state.limit - len(state.inflight)
    if state.config.admission_smoothing:
        burst = max(state.config.group_size, state.config.max_inflight // 10)
        free = min(free, burst - state.window_growth)
    return free


def _fill(state: DispatcherState, t: float) -> list[Event]:
    """Use free permits: continue the oldest open group that owes members, else open new ones."""
    free = _free_permits(state)
    if free <= 0:
        return []
    gated = state.gated()
    out: list[Event] = []
    for group_id in state.owing:
        group = state.groups[group_id]
        if group.train and gated:
            continue
        count = min(free, group.unscheduled)
        _dispatch_members(state, group, group.start_version, group.dispatched, count, t, out)
        free -= count
        if free == 0:
            return out
    _open_groups(state, free, gated, t, out)
    return out


def _open_groups(
    state: DispatcherState, free: int, gated: bool, t: float, out: list[Event]
) -> None:
    config = state.config
    number, eval_owed = state.groups_opened, state.eval_owed
    while free > 0:
        work: Work
        if eval_owed > 0:
            work, eval_owed = "eval", eval_owed - 1
        elif not gated:
            work = "train"
        else:
            return
        number += 1
        task = task_for_group(config, number, work)
        group = OpenGroup(
            group_id=f"g{number}",
            number=number,
            train=work == "train",
            live=task.live,
            size=config.group_size,
            start_version=state.version,
        )
        out.append(
            GroupOpened(
                t=t,
                group_id=group.group_id,
                work=work,
                env=task.env,
                task_id=task.task_id,
                group_size=group.size,
                policy_version=state.version,
                step=state.step,
                live=task.live,
            )
        )
        count = min(free, group.size)
        _dispatch_members(state, group, state.version, 0, count, t, out)
        free -= count


def _dispatch_members(
    state: DispatcherState,
    group: OpenGroup,
    start_version: int,
    first_member: int,
    count: int,
    t: float,
    out: list[Event],
) -> None:
    """Dispatch members `first_member ..` of `group`, each stamped with its dispatch version.

    Per-group staleness stamps every member with the group's start version instead, which
    is what the reference system did before per-episode enforcement.
    """
    version = start_version if state.config.staleness == "per-group" else state.version
    for member in range(first_member, first_member + count):
        out.append(
            EpisodeDispatched(
                t=t,
                episode_id=f"{group.group_id}/{member}",
                group_id=group.group_id,
                member=member,
                policy_version=version,
            )
        )
