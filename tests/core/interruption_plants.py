"""The plants of `test_account_faults_partial.py` for the reports of `core.account.partial`,
kept here so that the test file holds its worlds, tables and tests: interruptions and
resumptions the run does not allow, arrivals of interrupted work, a train dispatch while an
update waits (a drain, recycled work) and a version live with work left at it. Each takes
`(account, event)` and returns `Planted | None`, or builds such a plant; the events they
put in are `tests/core/partial_plants.py`'s."""

from __future__ import annotations

from collections.abc import Callable

import attrs

from rolloutlog.core.account import Account
from rolloutlog.core.account.partial import Segments
from rolloutlog.events.types import (
    EpisodeDispatched,
    EpisodeFailed,
    EpisodeInterrupted,
    EpisodesCancelled,
    Event,
    InterruptReason,
    VersionLive,
    VersionPending,
)
from tests.core.interrupted_runs import done
from tests.core.partial_plants import interrupted, next_dispatch, resumed
from tests.core.planted_faults import UNKNOWN, Plant, Planted, after_a_dispatch

# --- episode_interrupted --------------------------------------------------------------

Put = Callable[[Account, EpisodeDispatched], tuple[Event, str]]


def after_a_dispatch_where(when: Callable[[Account, EpisodeDispatched], bool], put: Put) -> Plant:
    """The event `put` makes, right after the first dispatch where `when` holds (shown the
    account before that dispatch)."""
    planted = after_a_dispatch(put)

    def plant(account: Account, event: Event) -> Planted | None:
        if not isinstance(event, EpisodeDispatched) or not when(account, event):
            return None
        return planted(account, event)

    return plant


def anywhere(account: Account, event: EpisodeDispatched) -> bool:
    return True


def interrupt_it(reason: InterruptReason, problem: Callable[[Account, str], str]) -> Put:
    """An interruption (`reason`, no tokens) of the episode just dispatched."""

    def put(account: Account, event: EpisodeDispatched) -> tuple[Event, str]:
        return interrupted(event, event.episode_id, 0, reason), problem(account, event.episode_id)

    return put


def under_the_rule(reason: InterruptReason) -> Put:
    return interrupt_it(
        reason,
        lambda account, _: (
            f"reason {reason!r} under weight_update {account.checks.partial.weight_update!r}"
        ),
    )


def not_recycling(account: Account, event: EpisodeDispatched) -> bool:
    return not account.checks.partial.recycling


def recycling_eval(account: Account, event: EpisodeDispatched) -> bool:
    return account.checks.partial.recycling and not account.groups[event.group_id].train


def frozen_in_an_update(account: Account, event: EpisodeDispatched) -> bool:
    return account.groups[event.group_id].frozen and account.live_version < account.version


def no_update_under_way(account: Account, event: EpisodeDispatched) -> bool:
    return account.live_version >= account.version  # at the boundary: the version is live


def not_in_flight(account: Account, event: Event) -> Planted | None:
    if not isinstance(event, EpisodeInterrupted):
        return None
    stray = f"{UNKNOWN}/0"
    return [attrs.evolve(event, episode_id=stray)], f"{stray} is not in flight"


def interrupted_twice(account: Account, event: Event) -> Planted | None:
    if not isinstance(event, EpisodeInterrupted):
        return None
    return [event, event], f"{event.episode_id} is interrupted"


def _last_tokens(account: Account, episode_id: str) -> int:
    """The tokens an episode had at its last interruption; 0 if none."""
    books = account.checks.partial.segments.get(episode_id)
    return books.tokens[-1] if books is not None and books.tokens else 0


def after_going_live(put: Callable[[Account, VersionLive, str], Planted | None]) -> Plant:
    """At the first `version_live` that finds an interrupted episode in flight that may
    resume under it: the update, then the events `put` makes of that episode (with its
    problem). Resumptions are few in generated logs (inference takes one at a time, and
    overload cuts take many first), so the plants that need one make it."""

    def plant(account: Account, event: Event) -> Planted | None:
        if not isinstance(event, VersionLive):
            return None
        waiting = [
            e
            for e, books in account.checks.partial.segments.items()
            if books.interrupted
            and e in account.inflight
            and (books.recycled_under is None or books.recycled_under < event.version)
        ]
        planted = put(account, event, waiting[0]) if waiting else None
        if planted is None:
            return None
        events, problem = planted
        return [event, *events], problem

    return plant


def fewer_tokens_at_an_interruption(less: int) -> Plant:
    """An interrupted episode resumed, then interrupted at the next update with `less`
    tokens fewer than it had (0: as many, the boundary, taken)."""

    def put(account: Account, live: VersionLive, episode_id: str) -> Planted | None:
        last, v = _last_tokens(account, episode_id), live.version
        if last < 1 or account.shipped() <= v:  # the next version needs its batch
            return None
        again = interrupted(live, episode_id, last - less, "update")
        events = [resumed(live, episode_id, v), VersionPending(t=live.t, version=v + 1), again]
        return events, f"{episode_id} has {last - less} tokens, fewer than {last} before"

    return after_going_live(put)


# --- episode_resumed ------------------------------------------------------------------


def resumed_twice(account: Account, live: VersionLive, episode_id: str) -> Planted:
    again = resumed(live, episode_id, live.version)
    return [again, again], f"{episode_id} was not interrupted"


def resume_it(account: Account, event: EpisodeDispatched) -> tuple[Event, str]:
    """A resumption of the episode just dispatched, never interrupted."""
    return resumed(event, event.episode_id, account.live_version), (
        f"{event.episode_id} was not interrupted"
    )


def resumed_off_the_live_version(off: int) -> Plant:
    def put(account: Account, live: VersionLive, episode_id: str) -> Planted:
        v, wrong = live.version, live.version + off
        problem = f"resumed under v{wrong}, but inference serves v{v}"
        return [resumed(live, episode_id, wrong)], problem

    return after_going_live(put)


Arrival = Callable[[Account, Event, str], Event]  # an event of an episode, after `event`
_GENERATING = Segments(start=0, interrupted=False)  # the books of one never interrupted


def after_cutting_interrupted_work(then: Arrival) -> Plant:
    """Right after a cancellation of an interrupted episode (whose books stay until the
    next version goes live), the event `then` makes of it; the problem is a resumption's
    (a late arrival of it is taken)."""

    def plant(account: Account, event: Event) -> Planted | None:
        if not isinstance(event, EpisodesCancelled):
            return None
        cut = [
            e
            for e in event.episode_ids
            if account.checks.partial.segments.get(e, _GENERATING).interrupted
        ]
        if not cut:
            return None
        return [event, then(account, event, cut[0])], f"{cut[0]} was not interrupted"

    return plant


def resume_cut_work(account: Account, event: Event, episode_id: str) -> Event:
    return resumed(event, episode_id, account.live_version)


def recycled_and_resumed_at_once(account: Account, event: Event) -> Planted | None:
    """A recycled episode resumed under the version it stopped at (the boundary: the check
    is `≤`; valid logs resume it one later)."""
    if not isinstance(event, EpisodeInterrupted) or event.reason != "recycle":
        return None
    live = account.live_version
    again = resumed(event, event.episode_id, live)
    return [event, again], f"{event.episode_id} recycled and resumed under v{live}"


# --- arrivals -------------------------------------------------------------------------


def arrival_while_interrupted(arrival: Arrival) -> Plant:
    def plant(account: Account, event: Event) -> Planted | None:
        if not isinstance(event, EpisodeInterrupted):
            return None
        problem = f"{event.episode_id} is interrupted and was not resumed"
        return [event, arrival(account, event, event.episode_id)], problem

    return plant


def completed(account: Account, event: Event, episode_id: str) -> Event:
    return done(episode_id, event.t)


def failed(account: Account, event: Event, episode_id: str) -> Event:
    return EpisodeFailed(t=event.t, episode_id=episode_id, error="lost")


def fewer_tokens_at_the_completion(less: int) -> Plant:
    """An interrupted episode resumed, then completed with `less` tokens fewer than it had
    (0: as many, the boundary, taken)."""

    def put(account: Account, live: VersionLive, episode_id: str) -> Planted | None:
        last = _last_tokens(account, episode_id)
        if last < 1:
            return None
        events = [resumed(live, episode_id, live.version), done(episode_id, live.t, last - less)]
        return events, f"{episode_id} completes with {last - less} tokens, had {last}"

    return after_going_live(put)


# --- episode_dispatched ---------------------------------------------------------------


def dispatch_while(waiting: Callable[[Account], str | None]) -> Plant:
    """A train dispatch put in at the first event where `waiting` names what it waits for
    (the problem), with a train group that has a member to dispatch."""

    def plant(account: Account, event: Event) -> Planted | None:
        problem = waiting(account)
        dispatch = next_dispatch(account, event) if problem else None
        if dispatch is None or problem is None:
            return None
        return [dispatch], problem

    return plant


def drain_waits(account: Account) -> str | None:
    if account.live_version >= account.version:
        return None
    return f"train dispatch while v{account.version} waits for the work in flight"


def recycled_wait(account: Account) -> str | None:
    waiting = sorted(
        e
        for e, books in account.checks.partial.segments.items()
        if books.recycled_under is not None and e in account.inflight
    )
    return f"train dispatch before the recycled {waiting[:3]} resumed" if waiting else None


# --- version_live ---------------------------------------------------------------------


def live_leaving(books: str, how: str) -> Plant:
    """The announced version live at the first event where the episodes in `books`
    (`at_update` or `at_ship` of `core.account.partial`) still hold some in flight."""

    def plant(account: Account, event: Event) -> Planted | None:
        left = sorted(e for e in getattr(account.checks.partial, books) if e in account.inflight)
        if not left:
            return None
        live = VersionLive(t=event.t, version=account.version)
        return [live], f"in flight {how}: {left[:3]}"

    return plant
