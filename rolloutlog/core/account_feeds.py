"""Which `Account.on_*` method each event class feeds, with which of its fields.

`Account.observe` looks an event's class up here (event classes are final): one dict lookup
per event instead of a `match` that tries every class pattern in turn.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Final

from rolloutlog.events.types import (
    BatchShipped,
    EpisodeCompleted,
    EpisodeDispatched,
    EpisodeDropped,
    EpisodeFailed,
    EpisodesCancelled,
    Event,
    GroupOpened,
    GroupScored,
    LimitSet,
    RunFinished,
    RunResumed,
    VersionPending,
)

if TYPE_CHECKING:
    from rolloutlog.core.account import Account

FEEDS: Final[dict[type[Event], Callable[[Account, Any], object]]] = {
    EpisodeCompleted: lambda a, e: a.on_arrival(
        e.seq, e.kind, e.episode_id, e.reward, e.prompt_tokens + e.completion_tokens
    ),
    EpisodeFailed: lambda a, e: a.on_arrival(e.seq, e.kind, e.episode_id, None),
    EpisodeDispatched: lambda a, e: a.on_dispatched(
        e.seq, e.episode_id, e.group_id, e.member, e.policy_version
    ),
    EpisodesCancelled: lambda a, e: a.on_cancelled(
        e.seq, e.group_id, e.episode_ids, e.unscheduled, e.reason
    ),
    GroupOpened: lambda a, e: a.on_group_opened(
        e.seq,
        e.group_id,
        e.work,
        e.group_size,
        e.frozen,
        e.policy_version,
        e.step,
        (e.task_id, e.env),
    ),
    EpisodeDropped: lambda a, e: a.on_dropped(e.seq, e.episode_id, e.reason, e.age),
    GroupScored: lambda a, e: a.on_scored(
        e.seq, e.group_id, e.episode_ids, e.advantages, e.admitted
    ),
    BatchShipped: lambda a, e: a.on_shipped(e.seq, e.step, e.episode_ids, e.trained_ids, e.tokens),
    VersionPending: lambda a, e: a.on_version_pending(e.seq, e.version),
    RunResumed: lambda a, e: a.on_resumed(e.seq, e.episode_ids, e.version),
    LimitSet: lambda a, e: a.on_limit_set(e.max_inflight),
    RunFinished: lambda a, e: a.on_run_finished(e.reason),
}
