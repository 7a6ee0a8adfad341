"""The dispatcher decider: schedules episodes on inference under a permit budget.

`evolve(state, event)` is the only place the state changes, and it is atomic: `check`
refuses a bad event before `apply` writes anything. For speed the state is a mutable
object that `apply` updates in place and returns; `decide(state, event)` only reads it.
`decide` runs after the event was evolved, so it always sees the current state.

`decide` is state-driven: on any event it fills free permits (oldest open group first,
then new groups: a task the sink discarded for requeue before a fresh one), unless a
cancellation rule answers first (`core.rules.cancellation`): stale
episodes before a weight update, whole groups on an overload cut or at shutdown, every
in-flight episode when a new driver resumes the run (`run_resumed`), and, with
`straggler_cut`, the stragglers of at-risk groups before a weight update and when a batch
ships. Permits freed by cancellations are refilled when the dispatcher reacts to its own
`episodes_cancelled`, so no decision is ever computed on a state it has not seen.
The rules a run's policy chooses (stamping, capacity, smoothing, stale and straggler
cancellations) are the functions of its rule table (`core.rules.table.Rules`, from
`core.presets`), handed to `apply` and `decide` beside the state, which is plain data
(`core.state`); the fill itself and the gate are `core.dispatcher_fill`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Final

from rolloutlog.core import dispatcher_fill, dispatcher_partial
from rolloutlog.core.dispatcher_fill import gated
from rolloutlog.core.errors import InconsistentLogError, release, require, require_held
from rolloutlog.core.handlers import Handlers, RuleHandlers
from rolloutlog.core.rules import cancellation as cancellations
from rolloutlog.core.rules.admission import SMOOTHING_WINDOW_S
from rolloutlog.core.rules.group_shape import members, redundant_members
from rolloutlog.core.rules.table import Rules
from rolloutlog.core.state import DispatcherState, OpenGroup
from rolloutlog.core.state import initial_dispatcher_state as initial_state
from rolloutlog.events.types import (
    EVENT_TYPES,
    BatchShipped,
    EpisodeCompleted,
    EpisodeDispatched,
    EpisodeDropped,
    EpisodeFailed,
    EpisodeInterrupted,
    EpisodeResumed,
    EpisodesCancelled,
    Event,
    GroupOpened,
    GroupScored,
    LimitSet,
    OverloadCut,
    RunFinished,
    RunResumed,
    VersionLive,
    VersionPending,
)

__all__ = [
    "SMOOTHING_WINDOW_S",
    "DispatcherState",
    "OpenGroup",
    "apply",
    "apply_for",
    "check",
    "check_of",
    "decide",
    "evolve",
    "gated",
    "initial_state",
    "next_tick",
    "tick",
]


# --- evolve ------------------------------------------------------------------------------


def check(state: DispatcherState, event: Event) -> None:
    """Refuse `event` (InconsistentLogError naming its seq) unless `apply` can take all of it.

    Reads only: `evolve` calls it before writing anything, and the loop calls it on both
    deciders before either applies, so a refused event leaves both states as they were.
    """
    check_kind = _CHECKS.get(type(event))
    if check_kind is not None:
        check_kind(state, event)


def apply(rules: Rules, state: DispatcherState, event: Event) -> DispatcherState:
    """Apply an event `check` accepted, in place, as the run's `rules` say; events it does not
    care about pass through."""
    _apply(rules, state, event)
    return state


def _apply(rules: Rules, state: DispatcherState, event: Event) -> None:
    advance_window = rules.advance_window
    if advance_window is not None:  # admission smoothing's window
        advance_window(state, event.t)
    apply_kind = _APPLIES.get(type(event))
    if apply_kind is not None:
        apply_kind(rules, state, event)
    follow = rules.follow_ledger
    if follow is not None:  # a rule the run does not use costs nothing per event
        follow(state.ledger, event)
    if rules.follow_requeue is not None:
        rules.follow_requeue(state, event)


def evolve(rules: Rules, state: DispatcherState, event: Event) -> DispatcherState:
    """`check`, then `apply`: all of the event, or (raising) none of it."""
    check(state, event)
    return apply(rules, state, event)


def next_tick(rules: Rules, state: DispatcherState, now: float) -> float | None:
    """When a driver should restate the limit (`tick`), or None when no tick is owed.

    Admission smoothing sees time only through events. When cancellations (which refund no
    admission) have spent a window's budget and nothing is left in flight, no event would
    ever come to open the next window: the run would stall. The tick is due at the start
    of the next window, and only then.
    """
    window_after = rules.window_after
    if window_after is None or state.finished or state.inflight:
        return None
    return window_after(state, now)


def tick(state: DispatcherState, t: float) -> LimitSet:
    """The world event of a tick: the current limit, restated at `t`."""
    return LimitSet(t=t, max_inflight=state.limit)


def _check_group_opened(state: DispatcherState, event: GroupOpened) -> None:
    require(event.group_id not in state.groups, event.seq, event.kind, "group opened twice")
    number = state.groups_opened + 1
    require(
        event.group_id == f"g{number}",
        event.seq,
        event.kind,
        f"expected group id g{number}, got {event.group_id}",
    )
    if event.work == "train" and requeue_due(state):
        due = next(iter(state.requeue))
        task = state.task_of(due)
        require(
            (event.task_id, event.env) == (task.task_id, task.env),
            event.seq,
            event.kind,
            f"the requeue of {due} ({task.task_id}, {task.env}) is due before a fresh task, "
            f"got ({event.task_id}, {event.env})",
        )


def requeue_due(state: DispatcherState) -> bool:
    """Whether the next train group takes the oldest requeue owed: the head of tinker's
    builder queue where the run keeps one (`core.rules.requeue_order`), else any owed."""
    return state.builders[0] if state.builders else bool(state.requeue)


def _on_group_opened(rules: Rules, state: DispatcherState, event: GroupOpened) -> None:
    if event.work == "train" and requeue_due(state):
        due = next(iter(state.requeue))
        del state.requeue[due]
        state.requeued_tasks[event.group_id] = state.task_of(due)
        state.requeued_tasks.pop(due, None)
    number = state.groups_opened + 1
    state.groups_opened = number
    size = members(event.group_size, state.config.group_redundancy)
    state.groups[event.group_id] = OpenGroup(
        group_id=event.group_id,
        number=number,
        train=event.work == "train",
        frozen=event.frozen,
        size=size,
        start_version=event.policy_version,
        step=event.step,
        unscheduled=size,
    )
    state.owing[event.group_id] = None
    if event.work == "eval":
        state.eval_owed = max(0, state.eval_owed - 1)


def _group_of(state: DispatcherState, event: EpisodeDispatched | EpisodesCancelled) -> OpenGroup:
    group = state.groups.get(event.group_id)
    if group is None:
        raise InconsistentLogError(event.seq, event.kind, f"{event.group_id} is not open")
    return group


def _check_dispatched(state: DispatcherState, event: EpisodeDispatched) -> None:
    # One event in two is a dispatch: messages are built (and `_group_of` asked) only when
    # a check fails.
    group = state.groups.get(event.group_id)
    if group is None:
        _group_of(state, event)  # raises: not open
        return
    problem = None
    if group.unscheduled <= 0:
        problem = f"{event.group_id} owes no member"
    elif event.member != group.dispatched:
        problem = f"expected member {group.dispatched} of {group.group_id}, got {event.member}"
    elif event.episode_id != f"{group.group_id}/{event.member}":
        problem = f"expected episode id {group.group_id}/{event.member}, got {event.episode_id}"
    if problem is not None:
        raise InconsistentLogError(event.seq, event.kind, problem)


def _on_dispatched(rules: Rules, state: DispatcherState, event: EpisodeDispatched) -> None:
    group = state.groups[event.group_id]
    group.dispatched += 1
    group.unscheduled -= 1
    if group.unscheduled == 0:
        del state.owing[group.group_id]
    group.inflight[event.episode_id] = event.policy_version
    state.inflight[event.episode_id] = group.group_id
    state.window_growth += 1


def _on_arrival(
    rules: Rules, state: DispatcherState, event: EpisodeCompleted | EpisodeFailed
) -> None:
    group_id = state.inflight.pop(event.episode_id, None)
    if group_id is None:
        state.late_events += 1
        return
    group = state.groups[group_id]
    version = group.inflight.pop(event.episode_id)
    group.arrived += 1
    if isinstance(event, EpisodeCompleted):
        group.arrived_versions.append(version)
    refund = rules.refund
    if refund is not None:  # smoothing's window: a natural completion refunds one
        state.window_growth = refund(state.window_growth)
    _close_if_done(state, group)


def _check_cancelled(state: DispatcherState, event: EpisodesCancelled) -> None:
    group = _group_of(state, event)
    require_held(event.episode_ids, group.inflight, event.seq, event.kind, "in flight")
    require(
        event.unscheduled <= group.unscheduled,
        event.seq,
        event.kind,
        f"cancels {event.unscheduled} unscheduled, {group.group_id} has {group.unscheduled}",
    )


def _on_cancelled(rules: Rules, state: DispatcherState, event: EpisodesCancelled) -> None:
    group = state.groups[event.group_id]
    release(event.episode_ids, group.inflight, state.inflight)
    state.partial.forget(event.episode_ids)
    if event.unscheduled:
        group.unscheduled -= event.unscheduled
        if group.unscheduled == 0:
            del state.owing[group.group_id]
    _close_if_done(state, group)


def _close_if_done(state: DispatcherState, group: OpenGroup) -> None:
    if group.owed() == 0:
        del state.groups[group.group_id]


def _check_resumed(state: DispatcherState, event: RunResumed) -> None:
    """A new driver took over: it must name exactly what was in flight, so that the
    restart cancellation that follows accounts for every outstanding episode."""
    require(not state.finished, event.seq, event.kind, "the run already finished")
    missing = sorted(set(state.inflight) - set(event.episode_ids))
    unknown = sorted(set(event.episode_ids) - set(state.inflight))
    require(
        not missing and not unknown,
        event.seq,
        event.kind,
        f"outstanding episodes differ: in flight but not named {missing[:3]}, "
        f"named but not in flight {unknown[:3]}",
    )


def _on_batch_shipped(rules: Rules, state: DispatcherState, event: BatchShipped) -> None:
    state.step = event.step + 1
    state.gate_version = state.version
    dispatcher_partial.on_shipped(rules, state)
    interval = state.config.eval_interval
    if interval and event.step % interval == 0:
        state.eval_owed += 1


def _check_scored(state: DispatcherState, event: GroupScored) -> None:
    # The sink finalizes a group exactly when the dispatcher stops owing it members.
    require(
        event.group_id not in state.groups,
        event.seq,
        event.kind,
        f"{event.group_id} scored while the dispatcher still owes members",
    )


def version_out_of_turn(current: int, version: int, shipped: int) -> str | None:
    """Why `version_pending(version)` cannot follow `current` with `shipped` batches
    shipped, or None: a version is the weights after its batch, so it is announced once, in
    order, and only once that batch has shipped (else rollout ages go negative). The
    recorder refuses such a call with the same words."""
    if current < version <= shipped:
        return None
    return (
        f"v{version} after v{current} with {shipped} batches shipped: a version "
        "is announced once, after its batch"
    )


def _check_version_pending(state: DispatcherState, event: VersionPending) -> None:
    problem = version_out_of_turn(state.version, event.version, state.step - 1)
    require(problem is None, event.seq, event.kind, problem or "")


def _on_dropped(rules: Rules, state: DispatcherState, event: EpisodeDropped) -> None:
    if event.reason != "requeue":  # only a requeue's drop names a task to open again
        return
    group_id = event.episode_id.rpartition("/")[0]
    if group_id not in state.discarded:  # its task, once
        state.discarded.add(group_id)
        state.requeue[group_id] = None


def _on_version_pending(rules: Rules, state: DispatcherState, event: VersionPending) -> None:
    state.version = event.version
    state.update_step = state.step  # applied before the sink's answer: no batch released yet


def _on_version_live(rules: Rules, state: DispatcherState, event: VersionLive) -> None:
    state.gate_version = state.version
    dispatcher_partial.on_version_live(rules, state, event)


def _on_limit_set(rules: Rules, state: DispatcherState, event: LimitSet) -> None:
    state.limit = event.max_inflight


def _on_run_finished(rules: Rules, state: DispatcherState, event: RunFinished) -> None:
    state.finished = True


# Handlers by exact event class (`core.handlers`): one dict lookup per event.
_CHECKS: Final = (
    Handlers[DispatcherState, None]()
    .on(EpisodeDispatched, _check_dispatched)
    .on(EpisodesCancelled, _check_cancelled)
    .on(GroupOpened, _check_group_opened)
    .on(GroupScored, _check_scored)
    .on(RunResumed, _check_resumed)
    .on(VersionPending, _check_version_pending)
    .on(EpisodeInterrupted, dispatcher_partial.check_interrupted)
    .on(EpisodeResumed, dispatcher_partial.check_resumed)
    .on(EpisodeCompleted, dispatcher_partial.check_arrival)
    .on(EpisodeFailed, dispatcher_partial.check_arrival)
    .by_kind
)
# The check of one event class, None where it has none: `check`'s lookup, for the combined
# decider (`core.decider.Combined`), which looks each event up itself, a call less per event.
check_of: Final = _CHECKS.get
_APPLIES: Final = (
    RuleHandlers[Rules, DispatcherState, None]()
    .on(EpisodeCompleted, _on_arrival)
    .on(EpisodeFailed, _on_arrival)
    .on(EpisodeDispatched, _on_dispatched)
    .on(EpisodesCancelled, _on_cancelled)
    .on(GroupOpened, _on_group_opened)
    .on(EpisodeDropped, _on_dropped)
    .on(VersionPending, _on_version_pending)
    .on(BatchShipped, _on_batch_shipped)
    .on(LimitSet, _on_limit_set)
    .on(RunFinished, _on_run_finished)
    .on(EpisodeInterrupted, dispatcher_partial.on_interrupted)
    .on(EpisodeResumed, dispatcher_partial.on_resumed)
    .on(VersionLive, _on_version_live)
    .by_kind
)
_EVERY: Final = dict.fromkeys(EVENT_TYPES.values(), _apply)  # `apply`'s body, any class


def apply_for(
    rules: Rules,
) -> Callable[[type[Event]], Callable[[Rules, DispatcherState, Event], None] | None]:
    """The apply of each event class in place (None: nothing to write) under a run's `rules`,
    chosen once for the combined decider (`core.decider.Decider.apply_for`): the handlers
    alone where the run has none of the rules that follow every event (smoothing's window,
    the ledger, the requeue line), else `apply`'s whole body for every class."""
    follows = (rules.advance_window, rules.follow_ledger, rules.follow_requeue)
    return _APPLIES.get if follows == (None, None, None) else _EVERY.get


# --- decide ------------------------------------------------------------------------------


def decide(rules: Rules, state: DispatcherState, event: Event) -> list[Event]:
    """The dispatcher's reaction to `event` under the run's `rules`, on the state that
    already includes it."""
    kind = type(event)
    if kind is RunFinished:
        return cancellations.shutdown(state, event.t)
    if state.finished:
        return []
    cancel = _CANCELLATIONS.get(kind)
    if cancel is None and kind in rules.cancels_redundant:  # only a run with redundancy
        cancel = _REDUNDANT[kind]
    if cancel is not None:
        cancelled = cancel(rules, state, event)
        if cancelled:
            return cancelled
    free = state.limit - len(state.inflight)  # the permits free
    return [] if free <= 0 else dispatcher_fill.fill(rules, state, free, event.t)


def _restart(rules: Rules, state: DispatcherState, event: RunResumed) -> list[Event]:
    return cancellations.restart(state, event.t)


def _before_weight_update(
    rules: Rules, state: DispatcherState, event: VersionPending
) -> list[Event]:
    return cancellations.before_weight_update(rules, state, event.t)


def _overload(rules: Rules, state: DispatcherState, event: OverloadCut) -> list[Event]:
    return rules.overload(state, event.n, event.t)


def _after_batch_shipped(rules: Rules, state: DispatcherState, event: BatchShipped) -> list[Event]:
    return cancellations.after_batch_shipped(rules, state, event.t)


def _redundant(
    rules: Rules, state: DispatcherState, event: EpisodeCompleted | EpisodeFailed
) -> list[Event]:
    return redundant_members(state, event)


_CANCELLATIONS: Final = (
    RuleHandlers[Rules, DispatcherState, list[Event]]()
    .on(RunResumed, _restart)
    .on(VersionPending, _before_weight_update)
    .on(OverloadCut, _overload)
    .on(BatchShipped, _after_batch_shipped)
    .by_kind
)
# An arrival sets off a cancellation only where the run has redundancy (`group_redundancy`):
# `Rules.cancels_redundant` names these classes there, and no class elsewhere.
_REDUNDANT: Final = (
    RuleHandlers[Rules, DispatcherState, list[Event]]()
    .on(EpisodeCompleted, _redundant)
    .on(EpisodeFailed, _redundant)
    .by_kind
)
