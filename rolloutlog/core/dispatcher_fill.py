"""The dispatcher's fill: free permits into episodes, oldest open group first, then new groups.

On any event no cancellation answers, the dispatcher (`core.dispatcher.decide`) fills its
free permits in the passes the run's rule gives: each pass continues the open groups that
owe members, oldest first, then opens owed eval groups and train groups (a task the sink
discarded for requeue before a fresh one) while the gate and capacity admission allow,
stamping each member as the run's staleness rule says.
"""

from __future__ import annotations

from collections.abc import Callable
from itertools import islice

from rolloutlog.core.rules.group_shape import members
from rolloutlog.core.rules.table import Rules
from rolloutlog.core.staleness import trainer_lags
from rolloutlog.core.state import DispatcherState, OpenGroup
from rolloutlog.events.types import EpisodeDispatched, Event, GroupOpened, Work

# (group start version, current version) -> the version a member carries (`Rules.stamp`).
Stamp = Callable[[int, int], int]
# Stands for "no limit" where capacity admission is off; any count of free permits is less.
_UNLIMITED = 1 << 62


def gated(rules: Rules, state: DispatcherState) -> bool:
    """Train dispatch pauses while the trainer lags the step by more than the run's lag
    (`target_lag`, or prime-rl's 1: `Rules.lag`; never where the source has no gate:
    `Rules.gate`; read once, `Rules.gate_lag`), and, under `weight_update = drain`, while
    an update waits for the train work in flight (`Rules.drain_pause`); under `recycle`,
    until every recycled episode is resumed (they go first); under `update_pause =
    "until-live"`, until the update is live and the work it interrupted resumed
    (`Rules.update_pause`). A pause the run does not use is None: nothing is called."""
    partial = state.partial
    if partial.recycled:
        return True
    drain, paused = rules.drain_pause, rules.update_pause
    if drain is not None and drain(state):
        return True
    if paused is not None and paused(partial.live, state.version, len(partial.interrupted)):
        return True
    version: int = getattr(state, rules.gate_reads)
    return trainer_lags(version, state.step, rules.gate_lag)


def _train_allowance(rules: Rules, state: DispatcherState) -> int:
    """How many train episodes may go out now: none while gated, else admission's, raised to
    its idle floor where the run keeps the liveness exception (`Rules.live`); unlimited
    where the run has no admission rule (`Rules.allowance` is None)."""
    if gated(rules, state):
        return 0
    allowance = rules.allowance
    if allowance is None:
        return _UNLIMITED
    config, ledger, version = state.config, state.ledger, state.version
    left = allowance(config, ledger, version)
    if left is None:
        return _UNLIMITED
    return rules.live(left, rules.idle_floor(config, ledger, version))


def fill(rules: Rules, state: DispatcherState, free: int, t: float) -> list[Event]:
    """Use the `free` permits (more than none: most events find none, and the dispatcher
    asks for no fill then), in the passes the run's rule gives (`Rules.fill_passes`): in
    each, continue the oldest open group that owes members, else open new ones (of the
    pass's work; None: any). Smoothing's cap (`Rules.permits`) only where the run smooths."""
    permits = rules.permits
    if permits is not None:
        free = permits(free, state.config, state.window_growth)
        if free <= 0:
            return []
    train = _train_allowance(rules, state)
    out: list[Event] = []
    for work in rules.fill_passes:
        for group_id in state.owing:
            group = state.groups[group_id]
            if work is not None and (work == "train") != group.train:
                continue
            count = min(free, group.unscheduled, train if group.train else free)
            if count <= 0:
                continue
            first = group.dispatched
            _dispatch_members(rules.stamp, state, group, group.start_version, first, count, t, out)
            free -= count
            train -= count if group.train else 0
            if free == 0:
                return out
        # the train room the pass's open groups left over is not carried to the next pass
        free = _open_groups(rules, state, free, train if work != "eval" else 0, t, out)
        if free <= 0:
            break
    return out


def _open_groups(
    rules: Rules, state: DispatcherState, free: int, train: int, t: float, out: list[Event]
) -> int:
    """Open owed eval groups, then train groups while `train` allows; the permits left.
    Groups already opened in `out` (an earlier pass) count as opened."""
    config = state.config
    opened = [e for e in out if type(e) is GroupOpened]
    number, eval_owed = state.groups_opened + len(opened), state.eval_owed
    # Requeued tasks, oldest first, where the run's order says (`Rules.requeue_line`); the
    # train groups an earlier pass opened have taken their place in the line.
    line, owed = rules.requeue_line(state), iter(state.requeue)
    if opened:  # most fills open nothing before this pass: nothing to count
        eval_owed -= sum(e.work == "eval" for e in opened)
        for takes in islice(line, sum(e.work == "train" for e in opened)):
            if takes:
                next(owed)
    while free > 0:
        work: Work
        if eval_owed > 0:
            work, eval_owed = "eval", eval_owed - 1
        elif train > 0:
            work = "train"
        else:
            return free
        number += 1
        due = next(owed, None) if work == "train" and next(line) else None
        task = state.task_source(config, number, work) if due is None else state.task_of(due)
        group = OpenGroup(
            group_id=f"g{number}",
            number=number,
            train=work == "train",
            frozen=task.frozen,
            size=members(config.group_size, config.group_redundancy),
            start_version=state.version,
        )
        out.append(
            GroupOpened(
                t=t,
                group_id=group.group_id,
                work=work,
                env=task.env,
                task_id=task.task_id,
                group_size=config.group_size,
                policy_version=state.version,
                step=state.step,
                frozen=task.frozen,
            )
        )
        count = min(free, group.size, train if group.train else free)
        _dispatch_members(rules.stamp, state, group, state.version, 0, count, t, out)
        free -= count
        train -= count if group.train else 0
    return free


def _dispatch_members(
    stamp: Stamp,
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
    is what the reference system did before per-episode enforcement (`Rules.stamp`).
    """
    version = stamp(start_version, state.version)
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
