"""Small worlds of the field presets and the drops their plants put in, shared by
`test_account_faults_field.py` and `test_account_faults_more.py`."""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

from rolloutlog.core.account import Account
from rolloutlog.core.account_group import age
from rolloutlog.core.presets import preset_overrides
from rolloutlog.events.types import DropReason, EpisodeDropped, Event
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
