"""The plants of `test_account_faults_more.py` for the reports of `core.account.mask`
(`stale_tokens = mask`), kept here so that the test file holds its worlds, tables and tests:
an episode cancelled as stale that would go on fresh, one dropped with its end within the
bound, masked tokens under `drop` or one more than the stale segments hold, and a stale end
shipped (or, at the bound, one that trains). Each takes `(account, event)` and returns
`Planted | None`, or builds such a plant; the drops they put in are
`tests/core/field_plants.py`'s."""

from __future__ import annotations

import attrs

from rolloutlog.core.account import Account
from rolloutlog.core.account.groups import Group, age
from rolloutlog.events.types import BatchShipped, EpisodesCancelled, Event
from tests.core.field_plants import drop as _drop
from tests.core.planted_faults import Plant, Planted

# --- stale_tokens = mask (core.account.mask) -------------------------------------------


def _ages(group: Group) -> bool:
    """Its members age: live-policy train work (the test's own reading)."""
    return group.train and not group.frozen


def _end(account: Account, episode_id: str) -> int | None:
    """The version of a masking run's arrival's last segment (None: no books for it)."""
    pieces = account.checks.mask.pieces.get(episode_id)
    return pieces[-1][0] if pieces else None


def cancelled_but_going_on_fresh(account: Account, event: Event) -> Planted | None:
    """Under `interrupt` an episode's next tokens come from the live version: one stale by
    its stamp, cancelled as stale while the live version is within the bound."""
    if age(account.version, account.step) > account.bound:
        return None
    for group_id, group in account.groups.items():
        for episode_id, (stamp, _) in group.inflight.items():
            if _ages(group) and age(stamp, account.step) > account.bound:
                cancel = EpisodesCancelled(
                    t=event.t,
                    group_id=group_id,
                    episode_ids=(episode_id,),
                    unscheduled=0,
                    reason="stale",
                )
                problem = f"{episode_id} would go on under v{account.version}, within the bound"
                return [cancel], f"{problem}: not stale under mask"
    return None


def dropped_with_its_end_at_the_bound(account: Account, event: Event) -> Planted | None:
    """A queued episode whose end is exactly at the bound (the boundary: within it),
    dropped as stale."""
    for episode_id, (version, ages, _) in account.queue.items():
        end = _end(account, episode_id)
        if ages and end is not None and age(end, account.step) == account.bound:
            drop = _drop(event, episode_id, "stale", age(version, account.step))
            problem = f"{episode_id} dropped as stale, but its end v{end} is within the bound"
            return [drop], problem
    return None


def masked_under_drop(account: Account, event: Event) -> Planted | None:
    if not isinstance(event, BatchShipped):
        return None
    return [attrs.evolve(event, masked_tokens=1)], "masks 1 tokens; stale_tokens is drop"


def ships_an_end_at(over: int) -> Plant:
    """A queued episode whose end is `over` versions past the bound (1: the boundary, a
    fault; 0: at the bound, none), shipped and trained with its masked tokens counted right
    (held or not: a hold is another report)."""

    def plant(account: Account, event: Event) -> Planted | None:
        if account.finished:
            return None
        for episode_id, (_, ages, tokens) in account.queue.items():
            end = _end(account, episode_id)
            if not ages or end is None or age(end, account.step) != account.bound + over:
                continue
            pieces = account.checks.mask.pieces[episode_id]
            masked = sum(n for v, n in pieces if age(v, account.step) > account.bound)
            shipped = BatchShipped(
                t=event.t,
                step=account.step,
                episode_ids=(episode_id,),
                trained_ids=(episode_id,),
                tokens=tokens,
                masked_tokens=masked,
            )
            at = account.bound + over
            return [shipped], f"{episode_id} trains gradient-bearing tokens at age {at}"
        return None

    return plant


def masks_one_token_more(account: Account, event: Event) -> Planted | None:
    if not isinstance(event, BatchShipped):
        return None
    held = event.masked_tokens
    wrong = attrs.evolve(event, masked_tokens=held + 1)
    return [wrong], f"masks {held + 1} tokens; its segments past the bound hold {held}"
