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
    EpisodeInterrupted,
    EpisodeResumed,
    EpisodesCancelled,
    Event,
    GroupOpened,
    GroupScored,
    LimitSet,
    RunFinished,
    RunResumed,
    VersionLive,
    VersionPending,
)

if TYPE_CHECKING:
    from rolloutlog.core.account import Account


def _completed(account: Account, event: EpisodeCompleted) -> None:
    account._tokens_arrived(event.episode_id, event.completion_tokens)
    account._partial_arrival(event.seq, event.kind, event.episode_id, event.completion_tokens)
    tokens = event.prompt_tokens + event.completion_tokens
    account.on_arrival(event.seq, event.kind, event.episode_id, event.reward, tokens)


def _failed(account: Account, event: EpisodeFailed) -> None:
    account._partial_arrival(event.seq, event.kind, event.episode_id, None)
    account.on_arrival(event.seq, event.kind, event.episode_id, None)


def _shipped(account: Account, event: BatchShipped) -> None:
    account._partial_shipped(event.episode_ids, event.trained_ids)
    account._tokens_shipped(event.step, event.episode_ids, event.trained_ids)
    account.on_shipped(
        event.seq,
        event.step,
        event.episode_ids,
        event.trained_ids,
        event.tokens,
        event.masked_tokens,
    )


def _dispatched(account: Account, event: EpisodeDispatched) -> None:
    account._partial_dispatched(event.seq, event.group_id)
    account.on_dispatched(
        event.seq, event.episode_id, event.group_id, event.member, event.policy_version
    )


def _announced(account: Account, event: VersionPending) -> None:
    account._partial_announced()
    account.on_version_pending(event.seq, event.version)


FEEDS: Final[dict[type[Event], Callable[[Account, Any], object]]] = {
    EpisodeCompleted: _completed,
    EpisodeFailed: _failed,
    EpisodeDispatched: _dispatched,
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
    BatchShipped: _shipped,
    VersionPending: _announced,
    VersionLive: lambda a, e: a.on_live(e.seq, e.version),
    EpisodeInterrupted: lambda a, e: a.on_interrupted(
        e.seq, e.episode_id, e.completion_tokens, e.reason
    ),
    EpisodeResumed: lambda a, e: a.on_continued(e.seq, e.episode_id, e.policy_version),
    RunResumed: lambda a, e: a.on_resumed(e.seq, e.episode_ids, e.version),
    LimitSet: lambda a, e: a.on_limit_set(e.max_inflight),
    RunFinished: lambda a, e: a.on_run_finished(e.reason),
}
