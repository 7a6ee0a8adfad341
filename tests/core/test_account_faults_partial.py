"""Every report of the account on the partial-rollout mechanism (`core.account_partial`:
interruptions at a weight update, resumptions, recycling, drains) and the version and
restart reports of `core.account_restart` that `test_account_faults.py` leaves, each set
off by one planted fault at its own seq, as there; the plants' harness is
`tests/core/planted_faults.py`, the events they put in `tests/core/partial_plants.py`.

Each fault runs in a world whose rule keys make its plant point common (`weight_update`,
`recycle`, eval or frozen groups pinned in `run_configs`); how often it finds one is
written by the worlds.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import attrs
import pytest
from hypothesis import given
from hypothesis import strategies as st

from rolloutlog.core.account import Account
from rolloutlog.core.account_partial import Segments
from rolloutlog.events.types import (
    EpisodeDispatched,
    EpisodeFailed,
    EpisodeInterrupted,
    EpisodesCancelled,
    Event,
    InterruptReason,
    RunFinished,
    VersionLive,
    VersionPending,
)
from rolloutlog.testing.strategies import run_configs, world_logs
from tests.core.interrupted_runs import done
from tests.core.partial_plants import (
    interrupted,
    next_dispatch,
    restart_with_cuts,
    resumed,
)
from tests.core.planted import fed, valid_restart
from tests.core.planted_faults import (
    UNKNOWN,
    Plant,
    Planted,
    after_a_dispatch,
    check_reported,
    first_plant,
    restart_point,
)

# --- worlds ---------------------------------------------------------------------------

# Small worlds of train work that ship a batch early and often (a batch of one, groups of
# two), so that updates, and the work they interrupt, come early in a log.
_SMALL: dict[str, Any] = {
    "group_size": 2,
    "max_inflight": 6,
    "batch_size": 1,
    "token_batch_size": None,
    "max_off_policy_steps": 2,
    "target_lag": 1,
    "staleness": "per-episode",
    "eval_interval": 0,
    "frozen_fraction": 0.0,
    "curriculum": "all",
    "admission": "none",
    "updates_per_sync": 1,
    "ship_wait": "none",
    "straggler_cut": False,
    "group_redundancy": 0,
    "leftovers": "run-on",
    "stale_member": "run-on",
    "requeue": "none",
}


def _went_live(log: list[Event]) -> bool:
    return any(isinstance(e, VersionLive) for e in log)


def _world(**keys: Any) -> st.SearchStrategy[list[Event]]:
    """Worlds where a version went live: the short ones that never ship a batch (about two
    in five of the first draws) hold no point for any plant here."""
    return world_logs(configs=run_configs(**{**_SMALL, **keys}), max_steps=80).filter(_went_live)


# Reach, measured over each test's first 25 derandomized examples (`mutation` profile):
# every plant finds its point in 25 of 25 logs except "interruption with fewer tokens" (20),
# "completion with fewer tokens" (21), "eval work recycled" (23), "interruption of a frozen
# source" (19), "train dispatch before the recycled resume" (23), "train dispatch during a
# drain" (21), "update live with work uninterrupted" (23) and "version inside the
# checkpoint" (16); of the cases taken, "an interruption with as many tokens as the last"
# (17). Without `_went_live` the worlds gave 8 to 16 of 25 for most plants.
FREEZE = _world(weight_update="freeze", recycle=False)
INTERRUPT = _world(weight_update="interrupt", recycle=False)
DRAIN = _world(weight_update="drain", recycle=False)
RECYCLE = _world(weight_update="freeze", recycle=True)
# Frozen sources are recycled too (their update-time exemption is not recycling's).
RECYCLE_FROZEN = _world(weight_update="freeze", recycle=True, frozen_fraction=0.5)
# Wider groups under fewer permits: groups hold members not yet dispatched while recycled
# work waits (the dispatch that must wait needs one).
RECYCLE_WIDE = _world(weight_update="freeze", recycle=True, group_size=4, max_inflight=3)
FROZEN = _world(weight_update="interrupt", recycle=False, frozen_fraction=0.5)
EVAL_RECYCLE = _world(weight_update="freeze", recycle=True, eval_interval=1)
# A trainer that may lag two batches: a checkpoint two ahead of the announced version.
LAGGING = _world(weight_update="freeze", recycle=False, max_off_policy_steps=3, target_lag=2)
RESTARTS = world_logs(configs=run_configs(**_SMALL), max_steps=80, restarts=True)


# --- episode_interrupted --------------------------------------------------------------

Put = Callable[[Account, EpisodeDispatched], tuple[Event, str]]


def _after_a_dispatch_where(when: Callable[[Account, EpisodeDispatched], bool], put: Put) -> Plant:
    """The event `put` makes, right after the first dispatch where `when` holds (shown the
    account before that dispatch)."""
    planted = after_a_dispatch(put)

    def plant(account: Account, event: Event) -> Planted | None:
        if not isinstance(event, EpisodeDispatched) or not when(account, event):
            return None
        return planted(account, event)

    return plant


def _anywhere(account: Account, event: EpisodeDispatched) -> bool:
    return True


def _interrupt_it(reason: InterruptReason, problem: Callable[[Account, str], str]) -> Put:
    """An interruption (`reason`, no tokens) of the episode just dispatched."""

    def put(account: Account, event: EpisodeDispatched) -> tuple[Event, str]:
        return interrupted(event, event.episode_id, 0, reason), problem(account, event.episode_id)

    return put


def _under_the_rule(reason: InterruptReason) -> Put:
    return _interrupt_it(
        reason,
        lambda account, _: f"reason {reason!r} under weight_update {account.weight_update!r}",
    )


def _not_recycling(account: Account, event: EpisodeDispatched) -> bool:
    return not account.recycling


def _recycling_eval(account: Account, event: EpisodeDispatched) -> bool:
    return account.recycling and not account.groups[event.group_id].train


def _frozen_in_an_update(account: Account, event: EpisodeDispatched) -> bool:
    return account.groups[event.group_id].frozen and account.live_version < account.version


def _no_update_under_way(account: Account, event: EpisodeDispatched) -> bool:
    return account.live_version >= account.version  # at the boundary: the version is live


def _not_in_flight(account: Account, event: Event) -> Planted | None:
    if not isinstance(event, EpisodeInterrupted):
        return None
    stray = f"{UNKNOWN}/0"
    return [attrs.evolve(event, episode_id=stray)], f"{stray} is not in flight"


def _interrupted_twice(account: Account, event: Event) -> Planted | None:
    if not isinstance(event, EpisodeInterrupted):
        return None
    return [event, event], f"{event.episode_id} is interrupted"


def _last_tokens(account: Account, episode_id: str) -> int:
    """The tokens an episode had at its last interruption; 0 if none."""
    books = account.segments.get(episode_id)
    return books.tokens[-1] if books is not None and books.tokens else 0


def _after_going_live(put: Callable[[Account, VersionLive, str], Planted | None]) -> Plant:
    """At the first `version_live` that finds an interrupted episode in flight that may
    resume under it: the update, then the events `put` makes of that episode (with its
    problem). Resumptions are few in generated logs (inference takes one at a time, and
    overload cuts take many first), so the plants that need one make it."""

    def plant(account: Account, event: Event) -> Planted | None:
        if not isinstance(event, VersionLive):
            return None
        waiting = [
            e
            for e, books in account.segments.items()
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


def _fewer_tokens_at_an_interruption(less: int) -> Plant:
    """An interrupted episode resumed, then interrupted at the next update with `less`
    tokens fewer than it had (0: as many, the boundary, taken)."""

    def put(account: Account, live: VersionLive, episode_id: str) -> Planted | None:
        last, v = _last_tokens(account, episode_id), live.version
        if last < 1 or account.shipped() <= v:  # the next version needs its batch
            return None
        again = interrupted(live, episode_id, last - less, "update")
        events = [resumed(live, episode_id, v), VersionPending(t=live.t, version=v + 1), again]
        return events, f"{episode_id} has {last - less} tokens, fewer than {last} before"

    return _after_going_live(put)


# --- episode_resumed ------------------------------------------------------------------


def _resumed_twice(account: Account, live: VersionLive, episode_id: str) -> Planted:
    again = resumed(live, episode_id, live.version)
    return [again, again], f"{episode_id} was not interrupted"


def _resume_it(account: Account, event: EpisodeDispatched) -> tuple[Event, str]:
    """A resumption of the episode just dispatched, never interrupted."""
    return resumed(event, event.episode_id, account.live_version), (
        f"{event.episode_id} was not interrupted"
    )


def _resumed_off_the_live_version(off: int) -> Plant:
    def put(account: Account, live: VersionLive, episode_id: str) -> Planted:
        v, wrong = live.version, live.version + off
        problem = f"resumed under v{wrong}, but inference serves v{v}"
        return [resumed(live, episode_id, wrong)], problem

    return _after_going_live(put)


Arrival = Callable[[Account, Event, str], Event]  # an event of an episode, after `event`
_GENERATING = Segments(start=0, interrupted=False)  # the books of one never interrupted


def _after_cutting_interrupted_work(then: Arrival) -> Plant:
    """Right after a cancellation of an interrupted episode (whose books stay until the
    next version goes live), the event `then` makes of it; the problem is a resumption's
    (a late arrival of it is taken)."""

    def plant(account: Account, event: Event) -> Planted | None:
        if not isinstance(event, EpisodesCancelled):
            return None
        cut = [e for e in event.episode_ids if account.segments.get(e, _GENERATING).interrupted]
        if not cut:
            return None
        return [event, then(account, event, cut[0])], f"{cut[0]} was not interrupted"

    return plant


def _resume_cut_work(account: Account, event: Event, episode_id: str) -> Event:
    return resumed(event, episode_id, account.live_version)


def _recycled_and_resumed_at_once(account: Account, event: Event) -> Planted | None:
    """A recycled episode resumed under the version it stopped at (the boundary: the check
    is `≤`; valid logs resume it one later)."""
    if not isinstance(event, EpisodeInterrupted) or event.reason != "recycle":
        return None
    live = account.live_version
    again = resumed(event, event.episode_id, live)
    return [event, again], f"{event.episode_id} recycled and resumed under v{live}"


# --- arrivals -------------------------------------------------------------------------


def _arrival_while_interrupted(arrival: Arrival) -> Plant:
    def plant(account: Account, event: Event) -> Planted | None:
        if not isinstance(event, EpisodeInterrupted):
            return None
        problem = f"{event.episode_id} is interrupted and was not resumed"
        return [event, arrival(account, event, event.episode_id)], problem

    return plant


def _completed(account: Account, event: Event, episode_id: str) -> Event:
    return done(episode_id, event.t)


def _failed(account: Account, event: Event, episode_id: str) -> Event:
    return EpisodeFailed(t=event.t, episode_id=episode_id, error="lost")


def _fewer_tokens_at_the_completion(less: int) -> Plant:
    """An interrupted episode resumed, then completed with `less` tokens fewer than it had
    (0: as many, the boundary, taken)."""

    def put(account: Account, live: VersionLive, episode_id: str) -> Planted | None:
        last = _last_tokens(account, episode_id)
        if last < 1:
            return None
        events = [resumed(live, episode_id, live.version), done(episode_id, live.t, last - less)]
        return events, f"{episode_id} completes with {last - less} tokens, had {last}"

    return _after_going_live(put)


# --- episode_dispatched ---------------------------------------------------------------


def _dispatch_while(waiting: Callable[[Account], str | None]) -> Plant:
    """A train dispatch put in at the first event where `waiting` names what it waits for
    (the problem), with a train group that has a member to dispatch."""

    def plant(account: Account, event: Event) -> Planted | None:
        problem = waiting(account)
        dispatch = next_dispatch(account, event) if problem else None
        if dispatch is None or problem is None:
            return None
        return [dispatch], problem

    return plant


def _drain_waits(account: Account) -> str | None:
    if account.live_version >= account.version:
        return None
    return f"train dispatch while v{account.version} waits for the work in flight"


def _recycled_wait(account: Account) -> str | None:
    waiting = sorted(
        e
        for e, books in account.segments.items()
        if books.recycled_under is not None and e in account.inflight
    )
    return f"train dispatch before the recycled {waiting[:3]} resumed" if waiting else None


# --- version_live ---------------------------------------------------------------------


def _live_leaving(books: str, how: str) -> Plant:
    """The announced version live at the first event where the episodes in `books`
    (`at_update` or `at_ship`) still hold some in flight."""

    def plant(account: Account, event: Event) -> Planted | None:
        left = sorted(e for e in getattr(account, books) if e in account.inflight)
        if not left:
            return None
        live = VersionLive(t=event.t, version=account.version)
        return [live], f"in flight {how}: {left[:3]}"

    return plant


# --- version_pending and run_resumed (core.account_restart) ---------------------------


def _announced_at(version: Callable[[Account], int]) -> Plant:
    def plant(account: Account, event: Event) -> Planted | None:
        if not isinstance(event, VersionPending):
            return None
        v, shipped = version(account), account.shipped()
        problem = f"v{v} after v{account.version} with {shipped} batches shipped"
        return [attrs.evolve(event, version=v)], problem + ": a version is announced once"

    return plant


def _announced_in_the_checkpoint(inside: int) -> Plant:
    """A restart from the last batch shipped, ahead of the announced version, then the
    version `inside` versions before that checkpoint, still past the announced one (0: the
    checkpoint itself, the boundary, taken)."""

    def plant(account: Account, event: Event) -> Planted | None:
        shipped = account.shipped()
        v = shipped - inside
        if not restart_point(account, event) or v <= account.version:
            return None
        announced = VersionPending(t=event.t, version=v)
        problem = f"v{v} is inside checkpoint v{shipped} resumed from: its batch would train"
        return [*restart_with_cuts(account, event, shipped), announced], problem

    return plant


def _restart_after_the_end(account: Account, event: Event) -> Planted | None:
    if not restart_point(account, event):
        return None
    restart = valid_restart(account, event.t, event.seq)
    return [RunFinished(t=event.t, reason="steps"), restart], "a restart after run_finished"


def _restart_leaves_work_in_flight(account: Account, event: Event) -> Planted | None:
    """A restart whose cancellations never come: at its settling, what it named is still
    in flight."""
    if not restart_point(account, event):
        return None
    restart = valid_restart(account, event.t, event.seq)
    return [restart], f"outstanding at the restart, in flight: {sorted(account.inflight)[:3]}"


# --- the table ------------------------------------------------------------------------

FAULTS: dict[str, tuple[str, st.SearchStrategy[list[Event]], Plant]] = {
    "interruption under freeze": (
        "episode_interrupted",
        FREEZE,
        _after_a_dispatch_where(_anywhere, _under_the_rule("update")),
    ),
    "recycling without the rule": (
        "episode_interrupted",
        INTERRUPT,
        _after_a_dispatch_where(_anywhere, _under_the_rule("recycle")),
    ),
    "interruption of work not in flight": ("episode_interrupted", INTERRUPT, _not_in_flight),
    "recycled before a batch shipped": (
        "episode_interrupted",
        RECYCLE,
        _after_a_dispatch_where(
            _not_recycling,
            _interrupt_it(
                "recycle", lambda *_: "recycled, but no batch shipped since the last update"
            ),
        ),
    ),
    "eval work recycled": (
        "episode_interrupted",
        EVAL_RECYCLE,
        _after_a_dispatch_where(
            _recycling_eval,
            _interrupt_it("recycle", lambda _, e: f"{e} is eval work, never recycled"),
        ),
    ),
    "interruption of a frozen source": (
        "episode_interrupted",
        FROZEN,
        _after_a_dispatch_where(
            _frozen_in_an_update,
            _interrupt_it("update", lambda _, e: f"{e} is from a frozen source"),
        ),
    ),
    "interruption with no update under way": (
        "episode_interrupted",
        INTERRUPT,
        _after_a_dispatch_where(
            _no_update_under_way,
            _interrupt_it(
                "update", lambda a, _: f"no weight update under way (v{a.version} is live)"
            ),
        ),
    ),
    "interrupted twice": ("episode_interrupted", INTERRUPT, _interrupted_twice),
    "recycled twice": ("episode_interrupted", RECYCLE, _interrupted_twice),
    "interruption with fewer tokens": (
        "episode_interrupted",
        INTERRUPT,
        _fewer_tokens_at_an_interruption(1),
    ),
    "resumed twice": ("episode_resumed", INTERRUPT, _after_going_live(_resumed_twice)),
    "resumption of work never interrupted": (
        "episode_resumed",
        INTERRUPT,
        _after_a_dispatch_where(_anywhere, _resume_it),
    ),
    "resumption of cancelled work": (
        "episode_resumed",
        INTERRUPT,
        _after_cutting_interrupted_work(_resume_cut_work),
    ),
    "resumed under a later version": (
        "episode_resumed",
        INTERRUPT,
        _resumed_off_the_live_version(1),
    ),
    "resumed under an earlier version": (
        "episode_resumed",
        INTERRUPT,
        _resumed_off_the_live_version(-1),
    ),
    "recycled and resumed at once": ("episode_resumed", RECYCLE, _recycled_and_resumed_at_once),
    "completion while interrupted": (
        "episode_completed",
        INTERRUPT,
        _arrival_while_interrupted(_completed),
    ),
    "failure while recycled": (
        "episode_failed",
        RECYCLE_FROZEN,
        _arrival_while_interrupted(_failed),
    ),
    "completion with fewer tokens": (
        "episode_completed",
        INTERRUPT,
        _fewer_tokens_at_the_completion(1),
    ),
    "train dispatch during a drain": ("episode_dispatched", DRAIN, _dispatch_while(_drain_waits)),
    "train dispatch before the recycled resume": (
        "episode_dispatched",
        RECYCLE_WIDE,
        _dispatch_while(_recycled_wait),
    ),
    "update live with work uninterrupted": (
        "version_live",
        INTERRUPT,
        _live_leaving("at_update", "uninterrupted at the update"),
    ),
    "update live with work undrained": (
        "version_live",
        DRAIN,
        _live_leaving("at_update", "undrained at the update"),
    ),
    "version live with work unrecycled": (
        "version_live",
        RECYCLE,
        _live_leaving("at_ship", "unrecycled since the ship"),
    ),
    "version announced twice": ("version_pending", FREEZE, _announced_at(lambda a: a.version)),
    "version ahead of its batch": (
        "version_pending",
        FREEZE,
        _announced_at(lambda a: a.shipped() + 1),
    ),
    "version inside the checkpoint": ("version_pending", LAGGING, _announced_in_the_checkpoint(1)),
    "restart after the end": ("run_resumed", RESTARTS, _restart_after_the_end),
    "restart leaves work in flight": ("run_resumed", RESTARTS, _restart_leaves_work_in_flight),
}

# The same plants undone at their boundary, and an arrival the checks must let pass:
# nothing is reported at the planted event. (The other side of each boundary, the valid
# one, every generated log checks as it is built: `world_logs(checked=True)`.)
TAKEN: dict[str, tuple[st.SearchStrategy[list[Event]], Plant]] = {
    "a late completion of cancelled interrupted work": (
        INTERRUPT,
        _after_cutting_interrupted_work(_completed),
    ),
    "an interruption with as many tokens as the last": (
        INTERRUPT,
        _fewer_tokens_at_an_interruption(0),
    ),
    "a completion with as many tokens as the last interruption": (
        INTERRUPT,
        _fewer_tokens_at_the_completion(0),
    ),
    "a version announced at the checkpoint resumed from": (
        LAGGING,
        _announced_in_the_checkpoint(0),
    ),
}

# What the dispatcher alone refuses of these faults (`core.dispatcher_partial` mirrors
# most of the account's interruption checks; the sink accepts them all). Those not listed
# only the account checks: token counts, drains, recycled waits, what goes live, restarts.
_ANNOUNCED = (
    r"v\d+ after v\d+ with \d+ batches shipped: a version is announced once, after its batch"
)
REFUSALS_PARTIAL: dict[tuple[str, str], str] = {
    (fault, "dispatcher"): refusal
    for fault, refusal in {
        "interruption under freeze": (
            "the run's weight_update is freeze and recycle is off: no episode is interrupted"
        ),
        "recycling without the rule": (
            "reason 'recycle' under weight_update 'interrupt' and recycle off"
        ),
        "interruption of work not in flight": "G is not in flight",
        "recycled before a batch shipped": (
            r"no batch shipped since v\d+ went live: nothing is recycled"
        ),
        "eval work recycled": "G is eval work",
        "interruption of a frozen source": "G is from a frozen source",
        "interruption with no update under way": r"no weight update under way \(v\d+ is live\)",
        "interrupted twice": "G is interrupted",
        "recycled twice": "G is interrupted",
        "resumed twice": "G was not interrupted",
        "resumption of work never interrupted": "G was not interrupted",
        "resumption of cancelled work": "G was not interrupted",
        "resumed under a later version": r"resumed under v\d+, but inference serves v\d+",
        "resumed under an earlier version": r"resumed under v\d+, but inference serves v\d+",
        "recycled and resumed at once": (
            r"G was recycled under v\d+: it resumes once the next version is live"
        ),
        "completion while interrupted": "G is interrupted and was not resumed",
        "failure while recycled": "G is interrupted and was not resumed",
        "version announced twice": _ANNOUNCED,
        "version ahead of its batch": _ANNOUNCED,
        "restart after the end": "the run already finished",
    }.items()
}


@pytest.mark.parametrize("fault", sorted(FAULTS))
@given(data=st.data())
def test_each_report_names_its_planted_fault(fault: str, data: st.DataObject) -> None:
    kind, worlds, plant = FAULTS[fault]
    check_reported(fault, kind, plant, data.draw(worlds, label="log"), REFUSALS_PARTIAL)


@pytest.mark.parametrize("case", sorted(TAKEN))
@given(data=st.data())
def test_a_fault_undone_at_its_boundary_is_taken(case: str, data: st.DataObject) -> None:
    """The fault's comparison allows its boundary (a survivor would turn `<` into `<=`):
    nothing is reported at the planted event. (The log ends there: a world event before it
    may be reported for what its reactions left undone.)"""
    worlds, plant = TAKEN[case]
    planted = first_plant(data.draw(worlds, label="log"), plant)
    if planted is None:  # no point in this log where the boundary can be planted
        return
    damaged = planted[0]
    seq = len(damaged) - 1
    reports = fed(damaged).violations
    assert not [r for r in reports if r.startswith(f"seq {seq} ")], reports
