"""Targeted damage: one known fault put into a valid log, and where it must be reported.

`tampered_logs` damages a random event, so few of its logs reach a given failure branch of
the account or the sink. Here each example puts one fault of a chosen kind into a generated
log, so every example reaches its branch, and the report must name the damaged event's seq
and kind and say what is wrong. The account is fed the events directly (the fold would let
the deciders refuse the event first); the deciders' own refusals are checked by the fold.
"""

from __future__ import annotations

from collections.abc import Callable

import attrs
import pytest
from hypothesis import given
from hypothesis import strategies as st

from rolloutlog.core.account import Account
from rolloutlog.core.account.properties import HARD_BOUND, kept_properties
from rolloutlog.core.errors import InconsistentLogError
from rolloutlog.events.types import (
    WORLD_KINDS,
    BatchShipped,
    EpisodeCompleted,
    EpisodeDispatched,
    EpisodeDropped,
    EpisodesCancelled,
    Event,
    GroupOpened,
    RunFinished,
    RunResumed,
    VersionPending,
)
from rolloutlog.replay.fold import fold_events
from rolloutlog.testing.strategies import world_logs
from tests.core.planted import account_for, config_of, fed, valid_restart

NEVER_DISPATCHED = "g9999/0"


def _finish(log: list[Event]) -> int:
    return next(i for i, event in enumerate(log) if isinstance(event, RunFinished))


def _after_the_end(log: list[Event], event: Event) -> tuple[list[Event], int]:
    seq = len(log)
    return [*log, attrs.evolve(event, seq=seq, t=log[-1].t)], seq


def _group_after_finish(log: list[Event]) -> tuple[list[Event], int, str]:
    opened = next(event for event in log if isinstance(event, GroupOpened))
    damaged, seq = _after_the_end(log, opened)
    return damaged, seq, "group opened after run_finished"


def _restart_after_finish(log: list[Event]) -> tuple[list[Event], int, str]:
    resumed = RunResumed(t=0.0, reason="restart", episode_ids=(), version=0)
    damaged, seq = _after_the_end(log, resumed)
    return damaged, seq, "a restart after run_finished"


def _arrival_never_dispatched(log: list[Event]) -> tuple[list[Event], int, str]:
    completed = EpisodeCompleted(
        t=0.0, episode_id=NEVER_DISPATCHED, reward=1.0, prompt_tokens=1, completion_tokens=1
    )
    damaged, seq = _after_the_end(log, completed)
    return damaged, seq, f"{NEVER_DISPATCHED} was never dispatched"


def _drop_never_queued(log: list[Event]) -> tuple[list[Event], int, str]:
    dropped = EpisodeDropped(t=0.0, episode_id=NEVER_DISPATCHED, reason="stale", age=1)
    damaged, seq = _after_the_end(log, dropped)
    return damaged, seq, "dropped but neither queued nor arrived"


def _version_again_after_restart(log: list[Event]) -> tuple[list[Event], int, str]:
    """A valid restart just before `run_finished`, then the last version announced again."""
    prefix = log[: _finish(log)]
    account = fed(prefix)
    resumed = valid_restart(account, prefix[-1].t, len(prefix))
    again = VersionPending(t=prefix[-1].t, seq=len(prefix) + 1, version=account.version)
    return [*prefix, resumed, again], again.seq, "a version is announced once"


def _straggler_cut_without_risk(log: list[Event]) -> tuple[list[Event], int, str] | None:
    """Right after a completion, the rest of its group cut as stragglers although none of
    the group's fresh arrivals sits at the bound (the first such point in the log)."""
    account = account_for(log)
    for index, event in enumerate(log):
        account.feed(event)
        group_id = (
            event.episode_id.rpartition("/")[0] if isinstance(event, EpisodeCompleted) else ""
        )
        group = account.groups.get(group_id)
        if group is None or not group.train or group.frozen or not group.owes:
            continue
        fresh = [
            version
            for episode_id, (_, version, reward, _) in group.arrived.items()
            if reward is not None and episode_id not in group.dropped
        ]
        if fresh and all(account.step - 1 - version != account.bound for version in fresh):
            cut = EpisodesCancelled(
                t=event.t,
                group_id=group_id,
                episode_ids=tuple(group.inflight),
                unscheduled=group.unscheduled,
                reason="straggler",
            )
            damaged = [*log[: index + 1], cut, *log[index + 1 :]]
            renumbered = [attrs.evolve(e, seq=seq) for seq, e in enumerate(damaged)]
            return renumbered, index + 1, "straggler cut without an arrival at risk"
    return None


def _world_boundary_in_flight(log: list[Event]) -> tuple[list[Event], Account] | None:
    """The log up to its first world event that finds episodes in flight (that event
    excluded), with the account fed that prefix: a point to plant a world event at."""
    account = account_for(log)
    for index, event in enumerate(log):
        if event.kind in WORLD_KINDS and index > 1 and account.inflight:
            return log[:index], account
        account.feed(event)
    return None


def _restart_leaves_episodes_in_flight(log: list[Event]) -> tuple[list[Event], int, str] | None:
    """A restart naming what is outstanding, and no reaction cancelling it."""
    point = _world_boundary_in_flight(log)
    if point is None:
        return None
    prefix, account = point
    resumed = valid_restart(account, prefix[-1].t, len(prefix))
    return [*prefix, resumed], resumed.seq, "outstanding at the restart, in flight"


def _finished_with_work_open(log: list[Event]) -> tuple[list[Event], int, str] | None:
    """`run_finished` while groups are open and episodes in flight, nothing cancelled."""
    point = _world_boundary_in_flight(log)
    if point is None:
        return None
    prefix, account = point
    finished = RunFinished(t=prefix[-1].t, seq=len(prefix), reason="steps")
    in_flight = f"{len(account.inflight)} episodes in flight at the end"
    return [*prefix, finished], finished.seq, f"groups left open|{in_flight}"


def _stale_member_left_in_flight(log: list[Event]) -> tuple[list[Event], int, str] | None:
    """Per-episode: a version update whose reaction cancelled stale members, cut off before
    that reaction (the log ends at the update)."""
    if config_of(log).staleness != "per-episode":
        return None
    for index, event in enumerate(log):
        after = log[index + 1] if index + 1 < len(log) else None
        if (
            isinstance(event, VersionPending)
            and isinstance(after, EpisodesCancelled)
            and after.reason == "stale"
            and after.episode_ids
        ):
            return log[: index + 1], index, f"stale {after.episode_ids[0]} of "
    return None


def _version_inside_the_checkpoint(log: list[Event]) -> tuple[list[Event], int, str] | None:
    """A valid restart just before `run_finished`, then a version older than it announced."""
    prefix = log[: _finish(log)]
    account = fed(prefix)
    if account.version == 0:
        return None
    resumed = valid_restart(account, prefix[-1].t, len(prefix))
    older = VersionPending(t=prefix[-1].t, seq=len(prefix) + 1, version=account.version - 1)
    return [*prefix, resumed, older], older.seq, "its batch would train twice"


def _dispatch_of_the_wrong_member(log: list[Event]) -> tuple[list[Event], int, str]:
    """The first dispatch, naming the next member's episode id (the log ends there)."""
    index = next(i for i, e in enumerate(log) if isinstance(e, EpisodeDispatched))
    dispatched = log[index]
    assert isinstance(dispatched, EpisodeDispatched)
    wrong = f"{dispatched.group_id}/{dispatched.member + 1}"
    damaged = [*log[:index], attrs.evolve(dispatched, episode_id=wrong)]
    return damaged, index, f"{wrong} is not member {dispatched.member}"


def _fresh_episode_cancelled_as_stale(log: list[Event]) -> tuple[list[Event], int, str]:
    """The run's first episode cancelled as stale right after its dispatch (at age 0)."""
    index = next(i for i, e in enumerate(log) if isinstance(e, EpisodeDispatched))
    dispatched = log[index]
    assert isinstance(dispatched, EpisodeDispatched)
    cut = EpisodesCancelled(
        t=dispatched.t,
        seq=index + 1,
        group_id=dispatched.group_id,
        episode_ids=(dispatched.episode_id,),
        unscheduled=0,
        reason="stale",
    )
    return [*log[: index + 1], cut], cut.seq, f"{dispatched.episode_id} is not stale"


def _batch_one_short_of_the_hold(log: list[Event]) -> tuple[list[Event], int, str] | None:
    """Right after a batch that shipped when its hold had just lifted, the next batch
    (the version one short of its hold: the boundary)."""
    account = account_for(log)
    for index, event in enumerate(log):
        account.feed(event)
        if isinstance(event, BatchShipped) and account.version == event.step - 1 - (
            account.target_lag
        ):
            early = BatchShipped(
                t=event.t,
                seq=index + 1,
                step=account.step,
                episode_ids=(),
                trained_ids=(),
                tokens=0,
            )
            return [*log[: index + 1], early], early.seq, "before the ship hold lifts"
    return None


def _shipped_past_the_bound(log: list[Event]) -> tuple[list[Event], int, str] | None:
    """A trained episode whose dispatch is recorded at a version far below the real one:
    by the account's arithmetic it ships past the bound (where the policy keeps the bound)."""
    if HARD_BOUND not in kept_properties(config_of(log)):
        return None
    account = account_for(log)
    for index, event in enumerate(log):
        aged = isinstance(event, BatchShipped) and [
            e for e in event.episode_ids if account.queue.get(e, (0, False))[1]
        ]
        if aged:
            return _dispatched_far_below(log, aged[0], account.bound, index)
        account.feed(event)
    return None


def _dispatched_far_below(
    log: list[Event], episode_id: str, bound: int, shipped: int
) -> tuple[list[Event], int, str]:
    index = next(
        i
        for i, e in enumerate(log)
        if isinstance(e, EpisodeDispatched) and e.episode_id == episode_id
    )
    dispatched = log[index]
    assert isinstance(dispatched, EpisodeDispatched)
    far = attrs.evolve(dispatched, policy_version=dispatched.policy_version - bound - 5)
    damaged = [*log[:index], far, *log[index + 1 : shipped + 1]]
    return damaged, shipped, f"{episode_id} shipped at age "


DAMAGES: dict[str, Callable[[list[Event]], tuple[list[Event], int, str] | None]] = {
    "group opened after the end": _group_after_finish,
    "restart after the end": _restart_after_finish,
    "arrival never dispatched": _arrival_never_dispatched,
    "drop never queued": _drop_never_queued,
    "version again after a restart": _version_again_after_restart,
    "version inside the checkpoint": _version_inside_the_checkpoint,
    "straggler cut without risk": _straggler_cut_without_risk,
    "fresh episode cancelled as stale": _fresh_episode_cancelled_as_stale,
    "dispatch of the wrong member": _dispatch_of_the_wrong_member,
    "batch one short of the hold": _batch_one_short_of_the_hold,
    "batch ships past the bound": _shipped_past_the_bound,
    "restart leaves episodes in flight": _restart_leaves_episodes_in_flight,
    "finished with work open": _finished_with_work_open,
    "stale member left in flight": _stale_member_left_in_flight,
}
KINDS = {
    "group opened after the end": "group_opened",
    "restart after the end": "run_resumed",
    "arrival never dispatched": "episode_completed",
    "drop never queued": "episode_dropped",
    "version again after a restart": "version_pending",
    "version inside the checkpoint": "version_pending",
    "straggler cut without risk": "episodes_cancelled",
    "fresh episode cancelled as stale": "episodes_cancelled",
    "dispatch of the wrong member": "episode_dispatched",
    "batch one short of the hold": "batch_shipped",
    "batch ships past the bound": "batch_shipped",
    "restart leaves episodes in flight": "run_resumed",
    "finished with work open": "run_finished",
    "stale member left in flight": "version_pending",
}


@pytest.mark.parametrize("fault", sorted(DAMAGES))
@given(log=world_logs(max_steps=60))
def test_the_account_reports_a_planted_fault_at_its_seq_and_kind(
    fault: str, log: list[Event]
) -> None:
    damage = DAMAGES[fault](log)
    if damage is None:  # the log has no point where this fault can be planted
        return
    damaged, seq, problems = damage
    kind = KINDS[fault]
    assert damaged[seq].kind == kind
    account = fed(damaged)
    reports = account.violations
    for problem in problems.split("|"):
        assert any(
            report.startswith(f"seq {seq} ({kind}): ") and problem in report for report in reports
        ), (seq, kind, problem, reports)
    # the summary lists them, unless it is asked for unchecked (`diff`, `show`)
    assert account.summary()["invariant_violations"] == reports
    assert account.summary(checked=False)["invariant_violations"] == []


@given(world_logs(max_steps=60, restarts=True))
def test_a_restarted_run_passes_the_account(log: list[Event]) -> None:
    """A valid restart (from the last announced version, naming what was outstanding) and
    what follows it set off no report (most of these logs restart once)."""
    assert fed(log).violations == []


def _shipped(log: list[Event]) -> int | None:
    return next((i for i, e in enumerate(log) if isinstance(e, BatchShipped)), None)


@given(world_logs(max_steps=60), st.sampled_from(["step", "episode"]))
def test_a_wrong_batch_is_refused_at_its_seq_and_kind(log: list[Event], field: str) -> None:
    index = _shipped(log)
    if index is None:  # no batch shipped in this world
        return
    shipped = log[index]
    assert isinstance(shipped, BatchShipped)
    if field == "step":
        wrong = attrs.evolve(shipped, step=shipped.step + 1)
    else:
        wrong = attrs.evolve(shipped, episode_ids=(*shipped.episode_ids, NEVER_DISPATCHED))
    error = fold_events([*log[:index], wrong, *log[index + 1 :]]).error
    assert isinstance(error, InconsistentLogError)
    assert (error.seq, error.kind) == (index, "batch_shipped"), error


@given(world_logs(max_steps=60))
def test_a_drop_of_an_episode_in_flight_is_refused_by_name(log: list[Event]) -> None:
    index = next(i for i, e in enumerate(log) if isinstance(e, EpisodeDispatched))
    dispatched = log[index]
    assert isinstance(dispatched, EpisodeDispatched)
    drop = EpisodeDropped(
        t=dispatched.t, seq=index + 1, episode_id=dispatched.episode_id, reason="stale", age=0
    )
    error = fold_events([*log[: index + 1], drop]).error
    assert isinstance(error, InconsistentLogError)
    assert (error.seq, error.kind) == (drop.seq, "episode_dropped"), error
    assert f"{dispatched.episode_id} is neither queued nor arrived" in str(error)
