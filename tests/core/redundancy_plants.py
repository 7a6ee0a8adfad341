"""The plants of `test_account_faults_more.py` for the reports of `core.account.redundancy`
(ROLL's redundant members), kept here so that the test file holds its worlds, tables and
tests: an arrival past G where the redundant cancellation was, a redundant cancellation one
arrival short or with no redundancy, one that leaves members owed, and one skipped. Each
takes `(account, event)` and returns `Planted | None`, or builds such a plant; the
cancellations they put in are `tests/core/field_plants.py`'s."""

from __future__ import annotations

from rolloutlog.core.account import Account
from rolloutlog.events.types import EpisodeCompleted, EpisodeDispatched, EpisodeFailed, Event
from tests.core.field_plants import cancel_all, cancel_with_the_dispatch, cancelled, one_short
from tests.core.planted_faults import Planted

# --- redundant members (core.account.redundancy) ----------------------------------------


def _arrival(event: Event) -> str | None:
    if isinstance(event, EpisodeCompleted | EpisodeFailed):
        return event.episode_id
    return None


def arrives_past_g(account: Account, event: Event) -> Planted | None:
    """Instead of the redundant cancellation, one of its members arrives: G + 1."""
    if not cancelled("redundant", event) or not event.episode_ids:
        return None
    group = account.groups[event.group_id]
    completed = EpisodeCompleted(
        t=event.t,
        episode_id=event.episode_ids[0],
        reward=0.0,
        prompt_tokens=1,
        completion_tokens=1,
    )
    return [completed], f"{event.group_id}: {group.size + 1} arrived, more than G={group.size}"


def cancelled_one_arrival_short(account: Account, event: Event) -> Planted | None:
    """In place of a group's G-th arrival (the boundary), a redundant cancellation."""
    episode_id = _arrival(event)
    group = account.inflight.get(episode_id) if episode_id else None
    if group is None or len(group.arrived) != group.size - 1:
        return None
    group_id = episode_id.rpartition("/")[0]
    cancel = cancel_all(event, group_id, group, "redundant")
    return [cancel], f"redundant cancel of {group_id} at {group.size - 1} of G arrived"


def cancelled_without_redundancy(account: Account, event: EpisodeDispatched) -> tuple[Event, str]:
    arrived = len(account.groups[event.group_id].arrived)
    cancel = cancel_with_the_dispatch(account, event, "redundant")
    return cancel, f"redundant cancel of {event.group_id} at {arrived} of G arrived"


def redundant_leaves_owed(account: Account, event: Event) -> Planted | None:
    if not cancelled("redundant", event):
        return None
    return [one_short(event)], f"redundant cancel of {event.group_id} leaves members owed"


def redundant_skipped(account: Account, event: Event) -> Planted | None:
    """A group's G-th arrival while it owes more members, and the log ends there: the
    redundant cancellation its reaction owes never comes."""
    episode_id = event.episode_id if isinstance(event, EpisodeCompleted) else None
    group = account.inflight.get(episode_id) if episode_id else None
    if group is None or len(group.arrived) != group.size - 1:
        return None
    if len(group.inflight) < 2 and not group.unscheduled:
        return None
    due = [episode_id.rpartition("/")[0]]
    return [event], f"G arrived but members still owed, not cancelled: {due}"
