"""Acceptance rules at the sink: which arrived or queued episodes are dropped as stale.

The staleness test itself is `core.staleness.is_stale` (one definition); these rules say
which episodes it is applied to. The sink calls the arrival rule its run's preset table
chose (`core.presets`) for each arrival of a group it finalizes, and the queue rule for
each queued episode when the step advances; soft staleness keeps both. A requeue rule
(tinker, slime-lag) discards a stale group whole instead, and its task is opened again. A
bounded queue (`queue_limit`: verl's fully async MessageQueue, PipelineRL) evicts its oldest
work when an admitted group would overfill it. Under `stale_tokens = mask` a drop reads an
episode's last segment, and a batch masks the tokens of its segments past the bound.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from itertools import islice
from typing import TypeVar

import attrs

from rolloutlog.core.rules.table import Rules, Sweep
from rolloutlog.core.staleness import is_stale, is_stale_against_version, trainer_lags
from rolloutlog.core.state import Arrival, Queued, SinkGroup, SinkState
from rolloutlog.events.types import BatchShipped, DropReason, Event, GroupScored

_Item = TypeVar("_Item", "Arrival", "Queued")
# An arrival held to this bound at finalize is never stale there.
NO_BOUND = sys.maxsize


def drop_stale_arrival(group: SinkGroup, arrival: Arrival, step: int, bound: int) -> bool:
    """Per-episode: an arrival is dropped iff it is itself past the bound at `step`."""
    return is_stale(arrival.version, step, bound, train=group.train, frozen=group.frozen)


def drop_stale_and_its_siblings(group: SinkGroup, arrival: Arrival, step: int, bound: int) -> bool:
    """Per-group: a group that lost a member to a stale cancellation is void, so its later
    siblings are dropped with it; otherwise as per-episode."""
    return group.stale_cancelled > 0 or group.is_stale(arrival.version, step, bound)


def stale_in_queue(queued: Queued, step: int, bound: int) -> bool:
    """A queued episode (admitted, so train) the step has carried past the bound."""
    return is_stale(queued.version, step, bound, train=True, frozen=queued.frozen)


def keep_arrival(group: SinkGroup, arrival: Arrival, step: int, bound: int) -> bool:
    """Soft: nothing is dropped for its age (AReaL trains what its admission let out)."""
    return False


def keep_queued(queued: Queued, step: int, bound: int) -> bool:
    """Soft: the queue is never swept for age."""
    return False


# --- requeue: a stale group discarded whole, its task opened again --------------------------
# `requeue_group(group, step, version, bound)`: at completion, whether every arrival of the
# group is past the rule's bound, so that the whole group is discarded (each arrival dropped,
# reason `requeue`) and the dispatcher opens its task again. `swept_reason()`: the reason of
# a queued episode the step carried past the bound (only `requeue` requeues its task).


def never_requeue(group: SinkGroup, step: int, version: int, bound: int) -> bool:
    """No requeue: stale arrivals are dropped by the staleness rule alone."""
    return False


def requeue_stale_for_batch(group: SinkGroup, step: int, version: int, bound: int) -> bool:
    """At ship (tinker): the group is past the bound for the batch it would join now,
    `(step − 1) − version of its sampler > bound`, counted for every arrival."""
    return bool(group.arrived) and all(
        group.is_stale(arrival.version, step, bound) for arrival in group.arrived
    )


def requeue_lagging_version(group: SinkGroup, step: int, version: int, bound: int) -> bool:
    """At completion (slime-lag): accepted iff `current version − its version ≤ bound`,
    read once, when the group completes; the queue time after it is not counted."""
    train, frozen = group.train, group.frozen
    return bool(group.arrived) and all(
        is_stale_against_version(arrival.version, version, bound, train=train, frozen=frozen)
        for arrival in group.arrived
    )


def swept_as_stale() -> DropReason:
    """A queued episode the step carried past the bound is dropped, its task not requeued."""
    return "stale"


def swept_for_requeue() -> DropReason:
    """At ship (tinker): a queued group past the bound of the batch being cut is discarded
    and its task requeued, like one that completes already past it."""
    return "requeue"


# --- withhold: a stale member scored with its group, its tokens never shipped --------------
# `withholds(group, arrival, version, bound)`: at finalize, whether the arrival is scored with
# its group and then withheld (dropped with reason `withheld`) instead of trained; None where
# nothing is (a stale arrival is dropped, or its work cancelled, by the other rules).


def withhold_past_version_bound(
    group: SinkGroup, arrival: Arrival, version: int, bound: int
) -> bool:
    """prime-rl #2960: a live-policy train member whose generation started more than `bound`
    versions behind the current (published) one, `version − its stamp > bound`, is scored
    with its group, so its reward shapes its siblings' advantages, but never ships."""
    train, frozen = group.train, group.frozen
    return is_stale_against_version(arrival.version, version, bound, train=train, frozen=frozen)


def the_bound(bound: int) -> int:
    """At finalize an arrival is held to the run's bound: a stale one is dropped before its
    group is scored, and the curriculum never sees it."""
    return bound


def no_bound_before_curriculum(bound: int) -> int:
    """prime-rl: finalize drops only a group voided by a stale cancellation; stale arrivals
    are scored and shown to the curriculum, and the queue check after they are queued (the
    insertion sweep) drops them."""
    return NO_BOUND


def check_at_each_step_event(rules: Rules, state: SinkState, event: Event) -> Sweep | None:
    """The queue is checked whenever a batch ships (swept whole: the step moved), a group
    is scored (its queued members swept: with `stale_check = "after-curriculum"` they may
    be stale) or a version is announced (nothing aged: cut only)."""
    if type(event) is BatchShipped:
        return "queue"
    return "scored" if type(event) is GroupScored else "nothing"


def check_at_next_finalize(rules: Rules, state: SinkState, event: Event) -> Sweep | None:
    """prime-rl's lazy sweep: the readiness check runs when a train group finalizes, not
    when a batch ships, and sweeps the whole queue at the first check of a step (queued
    episodes age only when the step moves); a new version only releases a batch that a
    check of this step held."""
    if type(event) is BatchShipped or state.checked_step != state.step:
        return None
    if type(event) is GroupScored:
        return "queue" if state.first_check else "scored"
    return "nothing"


def check_while_sampling(rules: Rules, state: SinkState, event: Event) -> Sweep | None:
    """verl's v1 sampler (`ReplayBufferAsync.sample`): stale finished groups are evicted only
    while a step samples its batch, at every poll of the whole buffer, and stay buffered
    while the step trains and syncs. Here: no check while the ship hold or the update pause
    keeps batch `step` back; past them, each check sweeps the whole queue, then cuts."""
    return None if held_back(rules, state) else "queue"


def held_back(rules: Rules, state: SinkState) -> bool:
    """Whether batch `step` is kept back: by the ship hold (the trainer is too far behind to
    take it yet) or by the update pause (the trainer takes it once the update is live)."""
    if trainer_lags(state.version, state.step, rules.hold_lag):
        return True
    paused = rules.update_pause
    return paused is not None and paused(state.live, state.version, 0)


# --- a bounded queue: what a full queue drops to take an admitted group ------------------------
# `evict(queue, excess)`: the queued episodes dropped (reason `evicted`) so that `excess` more
# episodes than the queue limit fit, always from the front (the queue is in queue order, and a
# group's members stay next to each other in it: they join together and only ever leave).


def evict_oldest_episodes(queue: Mapping[str, Queued], excess: int) -> list[str]:
    """PipelineRL's ring buffer (`processed_entries_queue`, a sample there is an episode):
    the oldest episodes, one for each episode too many."""
    return list(islice(queue, max(0, excess)))


def evict_oldest_groups(queue: Mapping[str, Queued], excess: int) -> list[str]:
    """verl's `MessageQueue.put_sample` (a sample there is one prompt's `rollout.n`
    responses: a group) and PipelineRL's raw chunk queue (a chunk is groups' samples):
    whole groups, the oldest first, the fewest that make room for `excess` episodes."""
    evicted: list[str] = []
    last_group = ""
    for episode_id in queue:
        group_id = episode_id.rpartition("/")[0]
        if len(evicted) >= excess and group_id != last_group:
            break
        evicted.append(episode_id)
        last_group = group_id
    return evicted


# --- stale tokens: what a drop reads of an episode's segments, and what a batch masks ---------
# `stale_view(item)`: the arrival or queued episode as the staleness drop reads it (its
# `version` the one the drop tests; None under drop, the default: the item as it is, its
# dispatch stamp `start`). `masked(queued, step, bound)`: the completion tokens of
# a trained episode that carry no gradient in batch `step`.


def read_end(item: _Item) -> _Item:
    """Mask: a drop reads the version of the episode's last segment, `end`; its earlier
    segments past the bound train masked instead."""
    segments = item.segments
    if not segments or segments[-1][0] == item.version:
        return item
    return attrs.evolve(item, version=segments[-1][0])


def tokens_past_the_bound(queued: Queued, step: int, bound: int) -> int:
    """Mask: the tokens of the segments past the bound at `step` (a token's age is
    `(step − 1) − v_k`, its segment's version); a frozen source's never are."""
    return sum(
        tokens
        for version, tokens in queued.segments
        if is_stale(version, step, bound, train=True, frozen=queued.frozen)
    )
