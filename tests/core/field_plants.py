"""Small worlds of the field presets and the drops and cancellations their plants put in,
shared by `test_account_faults_field.py` and the plants of `test_account_faults_more.py`."""

from __future__ import annotations

from typing import Any

import attrs
from hypothesis import strategies as st

from rolloutlog.core.account import Account
from rolloutlog.core.account.groups import Group, age
from rolloutlog.core.presets import preset_overrides
from rolloutlog.events.types import (
    CancelReason,
    DropReason,
    EpisodeDispatched,
    EpisodeDropped,
    EpisodesCancelled,
    Event,
)
from rolloutlog.testing.strategies import run_configs, world_logs

# Small worlds where versions move under running work: no frozen or eval groups, no
# curriculum, episode batches of one group.
SMALL: dict[str, Any] = {
    "group_size": 3,
    "max_inflight": 6,
    "batch_size": 3,
    "token_batch_size": None,
    "max_off_policy_steps": 0,
    "target_lag": 0,
    "frozen_fraction": 0.0,
    "eval_interval": 0,
    "curriculum": "all",
}


def worlds(preset: str, max_steps: int = 150, **keys: Any) -> st.SearchStrategy[list[Event]]:
    """Small worlds under `preset`'s keys, with `keys` on top."""
    config = run_configs(**{**SMALL, **preset_overrides(preset), **keys})
    return world_logs(configs=config, max_steps=max_steps)


def drop(event: Event, episode_id: str, reason: DropReason, dropped_age: int) -> EpisodeDropped:
    return EpisodeDropped(t=event.t, episode_id=episode_id, reason=reason, age=dropped_age)


def queued_age(account: Account, episode_id: str) -> int:
    return age(account.queue[episode_id][0], account.step)


def drop_oldest(account: Account, event: Event, reason: DropReason) -> tuple[str, EpisodeDropped]:
    """The oldest queued episode, and its drop with `reason` at its age."""
    oldest = next(iter(account.queue))
    return oldest, drop(event, oldest, reason, queued_age(account, oldest))


def cancel_all(
    event: Event, group_id: str, group: Group, reason: CancelReason
) -> EpisodesCancelled:
    """Everything `group` owes, cancelled with `reason` at `event`'s time."""
    return EpisodesCancelled(
        t=event.t,
        group_id=group_id,
        episode_ids=tuple(group.inflight),
        unscheduled=group.unscheduled,
        reason=reason,
    )


def one_short(event: EpisodesCancelled) -> EpisodesCancelled:
    """The cancellation less one unscheduled member (or, with none, its last member)."""
    if event.unscheduled:
        return attrs.evolve(event, unscheduled=event.unscheduled - 1)
    return attrs.evolve(event, episode_ids=event.episode_ids[:-1])


def cancelled(reason: str, event: Event) -> bool:
    return isinstance(event, EpisodesCancelled) and event.reason == reason


def cancel_with_the_dispatch(
    account: Account, event: EpisodeDispatched, reason: CancelReason
) -> EpisodesCancelled:
    """Right after a dispatch, everything its group owes (the dispatch too) cancelled."""
    group = account.groups[event.group_id]
    return EpisodesCancelled(
        t=event.t,
        group_id=event.group_id,
        episode_ids=(*group.inflight, event.episode_id),
        unscheduled=group.unscheduled - 1,
        reason=reason,
    )
