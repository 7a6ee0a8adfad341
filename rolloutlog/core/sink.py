"""The sink decider: collects arrived episodes into GRPO groups and training batches.

The sink is the hard staleness guarantee. A group finalizes when its arrived members plus
all its cancellation counts reach G; at that moment arrived members that are themselves
stale are dropped, the fresh successful ones are scored and shown to the curriculum, and
admitted members join the queue. When the step advances, queued episodes that became stale
are dropped; a batch is cut from the oldest queued episodes once it is full and the
trainer is close enough behind (the ship hold). After `run_finished` nothing ships: groups
that finalize at shutdown are still scored, once each, but never trained. Under a requeue
rule (`requeue`, tinker and slime-lag) a stale group is discarded whole, its drops carrying
reason `requeue`, and the dispatcher opens its task again.

Like the dispatcher, the state is mutated in place by `evolve` only (`check` everything,
then `apply`), and `decide` reads the state that already includes the event it reacts to.
The state is plain data (`core.state`); which arrivals and queued episodes drop and in
which order a batch is taken are the run's choices from the rule families, its rule table
(`core.rules.table.Rules`, from `core.presets`) handed to `apply` and `decide` beside it:
under soft staleness (the `areal` field preset) nothing drops for its age, so there the
guarantee is only what admission keeps. The sweep and the batch cut are
`core.sink_cut`'s, the zero-output guard's books `core.sink_idle`'s.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from operator import attrgetter
from typing import Final

from rolloutlog.core import sink_cut, sink_idle, sink_mask
from rolloutlog.core.curriculum import ScoredGroup
from rolloutlog.core.errors import InconsistentLogError, release, require, require_held
from rolloutlog.core.handlers import Handlers, RuleHandlers
from rolloutlog.core.rules.group_shape import members
from rolloutlog.core.rules.table import Rules
from rolloutlog.core.scoring import grpo_advantages
from rolloutlog.core.sink_eviction import evictions
from rolloutlog.core.sink_idle import zero_output_reason
from rolloutlog.core.sink_withhold import withheld_drops, withheld_members
from rolloutlog.core.state import Arrival, IdleWork, Queued, SinkGroup, SinkState
from rolloutlog.core.state import initial_sink_state as initial_state

__all__ = [
    "Arrival",
    "IdleWork",
    "Queued",
    "SinkGroup",
    "SinkState",
    "apply",
    "apply_for",
    "check",
    "check_of",
    "decide",
    "evolve",
    "initial_state",
    "zero_output_reason",
]
from rolloutlog.core.staleness import rollout_age
from rolloutlog.events.types import (
    BatchShipped,
    DropReason,
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
    RunFinished,
    VersionLive,
    VersionPending,
)

# --- evolve ------------------------------------------------------------------------------


def check(state: SinkState, event: Event) -> None:
    """Refuse `event` (InconsistentLogError naming its seq) unless `apply` can take all of it.

    Reads only: `evolve` calls it before writing anything, and the loop calls it on both
    deciders before either applies, so a refused event leaves both states as they were.
    """
    check_kind = _CHECKS.get(type(event))
    if check_kind is not None:
        check_kind(state, event)


def apply(rules: Rules, state: SinkState, event: Event) -> SinkState:
    """Apply an event `check` accepted, in place, as the run's `rules` say; events it does not
    care about pass through."""
    apply_kind = _APPLIES.get(type(event))
    if apply_kind is not None:
        apply_kind(rules, state, event)
    return state


def evolve(rules: Rules, state: SinkState, event: Event) -> SinkState:
    """`check`, then `apply`: all of the event, or (raising) none of it."""
    check(state, event)
    return apply(rules, state, event)


def _group_of(state: SinkState, group_id: str, event: Event) -> SinkGroup:
    group = state.groups.get(group_id)
    if group is None:
        raise InconsistentLogError(event.seq, event.kind, f"{group_id} is not open at the sink")
    return group


def _check_group_opened(state: SinkState, event: GroupOpened) -> None:
    require(event.group_id not in state.groups, event.seq, event.kind, "opened twice")


def _on_group_opened(rules: Rules, state: SinkState, event: GroupOpened) -> None:
    state.groups[event.group_id] = SinkGroup(
        group_id=event.group_id,
        task_id=event.task_id,
        env=event.env,
        train=event.work == "train",
        frozen=event.frozen,
        size=members(event.group_size, state.config.group_redundancy),
        step=event.step,
    )


def _on_arrival(rules: Rules, state: SinkState, event: EpisodeCompleted | EpisodeFailed) -> None:
    group_id = state.inflight.pop(event.episode_id, None)
    if group_id is None:
        return  # late: the episode was cancelled before it arrived; never counted twice
    group = state.groups[group_id]
    version = group.inflight.pop(event.episode_id)
    reward, tokens, completion = None, 0, None
    if isinstance(event, EpisodeCompleted):
        reward, tokens = event.reward, event.prompt_tokens + event.completion_tokens
        completion = event.completion_tokens
        state.completed += 1
        state.completed_tokens += tokens
    member = int(event.episode_id.rpartition("/")[2])
    segments = (
        sink_mask.segments_at_arrival(state, event.episode_id, version, completion)
        if rules.keeps_segments  # only under `stale_tokens = mask`: none kept otherwise
        else ()
    )
    arrival = Arrival(event.episode_id, member, version, reward, tokens, False, segments)
    group.arrived.append(arrival)
    group.arrival_of[event.episode_id] = arrival


def _check_dispatched(state: SinkState, event: EpisodeDispatched) -> None:
    if event.group_id not in state.groups:  # one event in two: `_group_of` only to refuse
        _group_of(state, event.group_id, event)


def _on_dispatched(rules: Rules, state: SinkState, event: EpisodeDispatched) -> None:
    state.groups[event.group_id].inflight[event.episode_id] = event.policy_version
    state.inflight[event.episode_id] = event.group_id


def _check_cancelled(state: SinkState, event: EpisodesCancelled) -> None:
    group = _group_of(state, event.group_id, event)
    require_held(event.episode_ids, group.inflight, event.seq, event.kind, "in flight at the sink")
    count = len(event.episode_ids) + event.unscheduled
    require(
        len(group.arrived) + group.cancelled + count <= group.size,
        event.seq,
        event.kind,
        f"{group.group_id} would account for more than {group.size} members",
    )


def _on_cancelled(rules: Rules, state: SinkState, event: EpisodesCancelled) -> None:
    group = state.groups[event.group_id]
    release(event.episode_ids, group.inflight, state.inflight)
    sink_mask.forget(state, event.episode_ids)
    count = len(event.episode_ids) + event.unscheduled
    group.cancelled += count
    if event.reason == "stale":
        group.stale_cancelled += count


def _check_dropped(state: SinkState, event: EpisodeDropped) -> None:
    if event.episode_id in state.queue:
        return
    group = _group_of(state, event.episode_id.rpartition("/")[0], event)
    if event.episode_id not in group.arrival_of:
        raise InconsistentLogError(
            event.seq, event.kind, f"{event.episode_id} is neither queued nor arrived"
        )


def _on_dropped(rules: Rules, state: SinkState, event: EpisodeDropped) -> None:
    queued = state.queue.pop(event.episode_id, None)
    if queued is not None:
        state.queued_tokens -= queued.tokens
        return
    arrival = state.groups[event.episode_id.rpartition("/")[0]].arrival_of.get(event.episode_id)
    if arrival is not None:
        arrival.dropped = True


def _check_scored(state: SinkState, event: GroupScored) -> None:
    group = state.groups.get(event.group_id)
    if group is None:
        raise InconsistentLogError(event.seq, event.kind, f"{event.group_id} is not open")
    require(group.complete(), event.seq, event.kind, f"{event.group_id} is not complete")
    if not (group.train and event.admitted):
        return
    require(
        len(event.advantages) == len(event.episode_ids),
        event.seq,
        event.kind,
        f"{len(event.episode_ids)} members scored with {len(event.advantages)} advantages",
    )
    fresh = {a.episode_id for a in group.arrived if a.reward is not None and not a.dropped}
    require_held(event.episode_ids, fresh, event.seq, event.kind, "a fresh arrival to admit")


def _on_scored(rules: Rules, state: SinkState, event: GroupScored) -> None:
    group = state.groups.pop(event.group_id)
    state.first_check = group.train and state.checked_step != state.step
    if not group.train:
        return
    state.checked_step = state.step
    if event.admitted:
        _enqueue(state, group, event)
    sink_idle.count_scored(rules, state, group, event)


def _enqueue(state: SinkState, group: SinkGroup, event: GroupScored) -> None:
    arrivals = {a.episode_id: a for a in group.arrived}
    for episode_id, advantage in zip(event.episode_ids, event.advantages, strict=True):
        arrival = arrivals[episode_id]
        state.queue[episode_id] = Queued(
            arrival.version, advantage, arrival.tokens, group.frozen, arrival.segments
        )
        state.queued_tokens += arrival.tokens


def _check_shipped(state: SinkState, event: BatchShipped) -> None:
    require(event.step == state.step, event.seq, event.kind, f"expected step {state.step}")
    require_held(event.episode_ids, state.queue, event.seq, event.kind, "queued")


def _on_batch_shipped(rules: Rules, state: SinkState, event: BatchShipped) -> None:
    for episode_id in event.episode_ids:
        state.queued_tokens -= state.queue.pop(episode_id).tokens
    state.step = event.step + 1


def _on_version_pending(rules: Rules, state: SinkState, event: VersionPending) -> None:
    state.version = event.version


def _on_version_live(rules: Rules, state: SinkState, event: VersionLive) -> None:
    state.live = event.version


def _on_run_finished(rules: Rules, state: SinkState, event: RunFinished) -> None:
    state.finished = True


# Handlers by exact event class (`core.handlers`): one dict lookup per event.
_CHECKS: Final = (
    Handlers[SinkState, None]()
    .on(EpisodeDispatched, _check_dispatched)
    .on(EpisodesCancelled, _check_cancelled)
    .on(EpisodeDropped, _check_dropped)
    .on(GroupScored, _check_scored)
    .on(BatchShipped, _check_shipped)
    .on(GroupOpened, _check_group_opened)
    .by_kind
)
# The check of one event class, None where it has none: `check`'s lookup, for the combined
# decider (`core.decider.Combined`), which looks each event up itself, a call less per event.
check_of: Final = _CHECKS.get
_APPLIES: Final = (
    RuleHandlers[Rules, SinkState, None]()
    .on(EpisodeCompleted, _on_arrival)
    .on(EpisodeFailed, _on_arrival)
    .on(EpisodeDispatched, _on_dispatched)
    .on(EpisodesCancelled, _on_cancelled)
    .on(EpisodeDropped, _on_dropped)
    .on(GroupScored, _on_scored)
    .on(BatchShipped, _on_batch_shipped)
    .on(GroupOpened, _on_group_opened)
    .on(VersionPending, _on_version_pending)
    .on(VersionLive, _on_version_live)
    .on(RunFinished, _on_run_finished)
    .on(EpisodeInterrupted, sink_mask.on_interrupted)
    .on(EpisodeResumed, sink_mask.on_resumed)
    .by_kind
)


def apply_for(
    rules: Rules,
) -> Callable[[type[Event]], Callable[[Rules, SinkState, Event], None] | None]:
    """The apply of each event class in place (None: nothing to write), the same under any
    run's rules: `apply`'s lookup, for the combined decider (`core.decider.Combined`)."""
    return _APPLIES.get


# --- decide ------------------------------------------------------------------------------


def decide(rules: Rules, state: SinkState, event: Event) -> list[Event]:
    """The sink's reaction to `event` under the run's `rules`, on the state that already
    includes it."""
    decide_kind = _DECISIONS.get(type(event))
    return [] if decide_kind is None else decide_kind(rules, state, event)


def _finalize_if_complete(
    rules: Rules, state: SinkState, event: EpisodeCompleted | EpisodeFailed | EpisodesCancelled
) -> list[Event]:
    """An arrival or a cancellation may complete its group: then it is finalized."""
    if isinstance(event, EpisodesCancelled):
        group = state.groups.get(event.group_id)
    else:
        group = state.groups.get(event.episode_id.rpartition("/")[0])
    if group is None or not group.complete():
        return []
    return _finalize(rules, state, group, event.t)


def _finalize(rules: Rules, state: SinkState, group: SinkGroup, t: float) -> list[Event]:
    """Drop stale arrivals, score the fresh successful members, ask the curriculum; a group
    the run's requeue rule discards drops every arrival (reason `requeue`) and scores none;
    members the run withholds (`core.sink_withhold`) are scored, then dropped (`withheld`)."""
    config, step = state.config, state.step
    bound = rules.arrival_bound(config.max_off_policy_steps)
    arrived = sorted(group.arrived, key=_BY_MEMBER)
    requeue = rules.requeue_group(group, step, state.version, config.max_off_policy_steps)
    drop, view = rules.drop_on_arrival, rules.stale_view
    aborted = rules.leftover_group(group, step)
    withheld = set() if requeue or aborted else withheld_members(rules, state, group, arrived)
    reason = _drop_reason(requeue, aborted)  # the group's, the same for each of its drops
    out: list[Event] = []
    fresh: list[Arrival] = []
    for arrival in arrived:
        if (
            requeue
            or aborted
            or (
                arrival.episode_id not in withheld
                and drop(group, arrival if view is None else view(arrival), step, bound)
            )
        ):
            out.append(
                EpisodeDropped(
                    t=t,
                    episode_id=arrival.episode_id,
                    reason=reason,
                    age=rollout_age(arrival.version, step),
                )
            )
        elif arrival.reward is not None:
            fresh.append(arrival)
    scored = _score(state, group, fresh, t)
    return [
        *out,
        *evictions(rules, state, scored),
        scored,
        *withheld_drops(state, scored, withheld, arrived),
    ]


_BY_MEMBER: Final = attrgetter("member")


def _drop_reason(requeue: bool, aborted: bool) -> DropReason:
    """Why an arrival is dropped at finalize: its group's requeue, its group's abort as a
    leftover (slime), or its own staleness."""
    return "requeue" if requeue else "leftover" if aborted else "stale"


def _score(state: SinkState, group: SinkGroup, scored: list[Arrival], t: float) -> GroupScored:
    ids = tuple(a.episode_id for a in scored)
    if not group.train or not scored:
        return GroupScored(
            t=t, group_id=group.group_id, episode_ids=ids, advantages=(), admitted=False
        )
    rewards = tuple(a.reward for a in scored if a.reward is not None)
    advantages = grpo_advantages(rewards)
    admitted = state.admit(
        ScoredGroup(
            group_id=group.group_id,
            task_id=group.task_id,
            env=group.env,
            episode_ids=ids,
            rewards=rewards,
            advantages=advantages,
        )
    )
    return GroupScored(
        t=t, group_id=group.group_id, episode_ids=ids, advantages=advantages, admitted=admitted
    )


def _decide_check(
    rules: Rules, state: SinkState, event: BatchShipped | GroupScored | VersionPending | VersionLive
) -> list[Event]:
    """A readiness check, where the run's rule runs one (`Rules.checks_queue`): sweep what it
    names of stale episodes (a scored group's members may be stale, with `stale_check =
    "after-curriculum"`), then cut."""
    sweep = rules.checks_queue(rules, state, event)
    if sweep is None:
        return []
    swept: Iterable[str] | None = ()
    if sweep == "queue":
        swept = None  # the whole queue
    elif sweep == "scored" and isinstance(event, GroupScored) and event.admitted:
        swept = event.episode_ids
    return sink_cut.sweep_and_cut(rules, state, swept, event.t)


def _decide_live(rules: Rules, state: SinkState, event: VersionLive) -> list[Event]:
    """Under the update pause (`Rules.checks_at_live`) a batch held for the update goes now."""
    return _decide_check(rules, state, event) if rules.checks_at_live else []


_DECISIONS: Final = (
    RuleHandlers[Rules, SinkState, list[Event]]()
    .on(EpisodeCompleted, _finalize_if_complete)
    .on(EpisodeFailed, _finalize_if_complete)
    .on(EpisodesCancelled, _finalize_if_complete)
    .on(BatchShipped, _decide_check)
    .on(GroupScored, _decide_check)
    .on(VersionPending, _decide_check)
    .on(VersionLive, _decide_live)
    .by_kind
)
