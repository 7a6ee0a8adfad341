"""The plants of `test_account_faults_more.py` for the reports of `core.account.leftovers`
(slime's abort of the leftovers), kept here so that the test file holds its worlds, tables
and tests: an abort skipped at the ship (of groups in flight, or of the queue), a leftover
cancellation or drop of the step's own work, or under run-on, a cancellation that leaves
members owed, and an aborted group scored. Each takes `(account, event)` and returns
`Planted | None`, or builds such a plant; the drops and cancellations they put in are
`tests/core/field_plants.py`'s."""

from __future__ import annotations

import attrs

from rolloutlog.core.account import Account
from rolloutlog.core.account.groups import age
from rolloutlog.events.types import (
    EpisodeDispatched,
    EpisodeDropped,
    Event,
    GroupOpened,
    GroupScored,
    LimitSet,
    RunStarted,
)
from tests.core.field_plants import cancel_all, cancel_with_the_dispatch, cancelled, one_short
from tests.core.field_plants import drop as _drop
from tests.core.field_plants import drop_oldest as _drop_oldest
from tests.core.planted_faults import Plant, Planted

# --- slime's abort of the leftovers (core.account.leftovers) ---------------------------


def _still_holds(event: Event) -> LimitSet:
    """A world event that neither cancels nor drops (a permit limit, never binding): what
    settles the reaction before it."""
    return LimitSet(t=event.t, max_inflight=10**6)


def _earlier(account: Account, group_id: str) -> bool:
    """A train group opened for a batch that has shipped (the test's own reading)."""
    return account.checks.leftovers.opened_at.get(group_id, account.step) < account.step


def abort_skipped(account: Account, event: Event) -> Planted | None:
    """At the ship's first leftover cancellation, the world moves on instead."""
    if not cancelled("leftover", event):
        return None
    owed = sorted(
        g
        for g in account.checks.leftovers.opened_at
        if _earlier(account, g) and account.groups[g].owes
    )
    return [_still_holds(event)], f"leftovers not aborted at the ship: {owed[:3]}"


def queue_kept(account: Account, event: Event) -> Planted | None:
    """At the ship's first leftover drop from the queue, the world moves on instead."""
    if not isinstance(event, EpisodeDropped) or event.reason != "leftover":
        return None
    if event.episode_id not in account.queue:
        return None
    kept = sum(step < account.step for step in account.checks.leftovers.queued_at.values())
    return [_still_holds(event)], f"{kept} queued past the batch, kept"


def leftover_cancel_of_this_step(account: Account, event: EpisodeDispatched) -> tuple[Event, str]:
    """Right after a dispatch, its group (opened at this very step: the boundary) cancelled
    whole as a leftover."""
    cancel = cancel_with_the_dispatch(account, event, "leftover")
    return cancel, f"leftover cancellation of {event.group_id} with no batch full"


def leftover_leaves_owed(unscheduled: bool) -> Plant:
    """The ship's leftover cancellation less one member: unscheduled (where it cancels
    some), or in flight."""

    def plant(account: Account, event: Event) -> Planted | None:
        if not cancelled("leftover", event) or bool(event.unscheduled) != unscheduled:
            return None
        problem = f"leftover cancellation leaves {event.group_id} owing members"
        return [one_short(event)], problem

    return plant


def leftover_cancel_under_run_on() -> Plant:
    """Under run-on, a train group opened for a batch that has shipped (what the abort rule
    would cancel) cancelled whole as a leftover. A run-on account keeps no leftover books
    (it does not use the abort's check), so the plant keeps its own: the step each train
    group opened at, from the events it is shown, afresh at each log's `run_started`."""
    opened_at: dict[str, int] = {}

    def plant(account: Account, event: Event) -> Planted | None:
        if isinstance(event, RunStarted):
            opened_at.clear()
        elif isinstance(event, GroupOpened) and event.work == "train":
            opened_at[event.group_id] = event.step
        for group_id, group in account.groups.items():
            if group.owes and opened_at.get(group_id, account.step) < account.step:
                cancel = cancel_all(event, group_id, group, "leftover")
                return [cancel], f"leftover cancellation of {group_id} with no batch full"
        return None

    return plant


def leftover_drop_of_this_step(account: Account, event: Event) -> Planted | None:
    """An arrival of a train group opened at this step (the boundary), dropped as a
    leftover."""
    for group_id, group in account.groups.items():
        if not group.train or _earlier(account, group_id):
            continue
        for episode_id, (_, version, _, _) in group.arrived.items():
            if episode_id not in group.dropped:
                drop = _drop(event, episode_id, "leftover", age(version, account.step))
                return [drop], f"leftover drop of {episode_id}, no batch full"
    return None


def leftover_drop_from_the_queue(account: Account, event: Event) -> Planted | None:
    """Under run-on, the oldest queued episode dropped as a leftover."""
    if not account.queue:
        return None
    oldest, drop = _drop_oldest(account, event, "leftover")
    return [drop], f"leftover drop of {oldest}, no batch full"


def leftover_scores(account: Account, event: Event) -> Planted | None:
    """An earlier step's group, aborted, scored with one member (the fewest that score)."""
    if not isinstance(event, GroupScored) or not _earlier(account, event.group_id):
        return None
    group = account.groups[event.group_id]
    if not group.arrived:
        return None
    first = min(group.arrived, key=lambda e: group.arrived[e][0])
    scored = attrs.evolve(event, episode_ids=(first,), advantages=(0.0,))
    return [scored], f"{event.group_id} is a leftover, and scores 1"
