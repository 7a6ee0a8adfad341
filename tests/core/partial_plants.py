"""The events `test_account_faults_partial.py`'s plants put into a generated log: the
partial-rollout world events (interruptions, resumptions, a version going live), a next
dispatch, and a restart with its cancellations, each built from the account's books."""

from __future__ import annotations

import attrs

from rolloutlog.core.account import Account
from rolloutlog.events.types import (
    EpisodeDispatched,
    EpisodeInterrupted,
    EpisodeResumed,
    EpisodesCancelled,
    Event,
    InterruptReason,
)
from tests.core.planted import valid_restart


def interrupted(event: Event, episode_id: str, tokens: int, reason: InterruptReason) -> Event:
    return EpisodeInterrupted(
        t=event.t, episode_id=episode_id, completion_tokens=tokens, reason=reason
    )


def resumed(event: Event, episode_id: str, version: int) -> Event:
    return EpisodeResumed(t=event.t, episode_id=episode_id, policy_version=version)


def next_dispatch(account: Account, event: Event) -> EpisodeDispatched | None:
    """The next member of the first open train group that still has one unscheduled, at
    the version it would be stamped with; None if no such group."""
    for group_id, group in account.groups.items():
        if group.train and group.owes and group.unscheduled > 0:
            stamp = account.version if account.per_episode else group.start_version
            member = group.dispatched
            return EpisodeDispatched(
                t=event.t,
                episode_id=f"{group_id}/{member}",
                group_id=group_id,
                member=member,
                policy_version=stamp,
            )
    return None


def restart_with_cuts(account: Account, event: Event, version: int) -> list[Event]:
    """A restart from checkpoint `version` that names what is in flight, then the
    dispatcher's cancellations of it (reason `restart`), one per group, as a loop writes
    them."""
    restart = attrs.evolve(valid_restart(account, event.t, event.seq), version=version)
    cuts: list[Event] = [
        EpisodesCancelled(
            t=event.t,
            group_id=group_id,
            episode_ids=tuple(group.inflight),
            unscheduled=0,
            reason="restart",
        )
        for group_id, group in account.groups.items()
        if group.inflight
    ]
    return [restart, *cuts]
