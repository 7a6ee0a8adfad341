"""The plants of `test_account_faults_more.py` for the two eviction reports of
`core.account.eviction` that `test_account_faults_field.py` leaves, kept here so that the
test file holds its worlds, tables and tests: a scoring the queue has no room for, and an
eviction of part of a group under `oldest-group`. Each takes `(account, event)` and returns
`Planted | None`; the drops they put in are `tests/core/field_plants.py`'s."""

from __future__ import annotations

from rolloutlog.core.account import Account
from rolloutlog.core.account.groups import advantages
from rolloutlog.events.types import EpisodeDropped, Event, GroupScored
from tests.core.field_plants import drop as _drop
from tests.core.field_plants import queued_age as _queued_age
from tests.core.planted_faults import Planted

# --- bounded-queue eviction (core.account.eviction) ------------------------------------


def _next_scoring(account: Account, event: Event) -> GroupScored | None:
    """At a run's first eviction before a scoring, a scoring the sink could record next: of
    the complete train group with the fewest fresh members (completed, not dropped), all
    admitted."""
    if (
        not isinstance(event, EpisodeDropped)
        or event.reason != "evicted"
        or account.checks.eviction.evicting
    ):
        return None
    complete = [
        (g, group)
        for g, group in account.groups.items()
        if group.train and not group.owes
        if len(group.arrived) + group.cancelled == account.members(group)
    ]
    fresh = [
        (
            g,
            sorted(
                (member, e, reward)
                for e, (member, _, reward, _) in group.arrived.items()
                if reward is not None and e not in group.dropped
            ),
        )
        for g, group in complete
    ]
    if not fresh:
        return None
    group_id, scored = min(fresh, key=lambda f: len(f[1]))
    return GroupScored(
        t=event.t,
        group_id=group_id,
        episode_ids=tuple(e for _, e, _ in scored),
        advantages=tuple(advantages([r for _, _, r in scored])),
        admitted=True,
    )


def scored_with_no_room(account: Account, event: Event) -> Planted | None:
    """In place of the evictions, the scoring that needed them: the queue overfills."""
    scored = _next_scoring(account, event)
    if scored is None:
        return None
    held = len(account.queue) + len(scored.episode_ids)
    if held <= account.checks.eviction.limit:
        return None
    return [scored], f"the queue would hold {held} > limit {account.checks.eviction.limit}"


def evicts_part_of_a_group(account: Account, event: Event) -> Planted | None:
    """Under oldest-group, only as many of the oldest group's members as make room (the
    queue then exactly full), evicted before a scoring."""
    scored = _next_scoring(account, event)
    if scored is None:
        return None
    queued = list(account.queue)
    needed = len(queued) + len(scored.episode_ids) - account.checks.eviction.limit
    oldest = queued[0].rpartition("/")[0]
    part = [e for e in queued if e.rpartition("/")[0] == oldest]
    if not 1 <= needed < len(part) or part[:needed] != queued[:needed]:
        return None
    drops = [_drop(event, e, "evicted", _queued_age(account, e)) for e in part[:needed]]
    return [*drops, scored], "evicts part of a group"
