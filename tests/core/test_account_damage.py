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
from rolloutlog.core.config import RunConfig
from rolloutlog.core.errors import InconsistentLogError
from rolloutlog.events.types import (
    BatchShipped,
    EpisodeCompleted,
    EpisodeDropped,
    EpisodesCancelled,
    Event,
    GroupOpened,
    GroupScored,
    RunFinished,
    RunResumed,
    RunStarted,
    VersionPending,
)
from rolloutlog.replay.fold import fold_events
from rolloutlog.testing.strategies import world_logs

NEVER_DISPATCHED = "g9999/0"


def _config(log: list[Event]) -> RunConfig:
    first = log[0]
    assert isinstance(first, RunStarted)
    return RunConfig.from_mapping(first.config, where="run_started.config", startable=False)


def _config_account(log: list[Event]) -> Account:
    return Account(_config(log), raise_on_violation=False)


def _fed(log: list[Event]) -> Account:
    account = _config_account(log)
    for event in log:
        account.feed(event)
    return account


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
    account = _fed(prefix)
    resumed = RunResumed(
        t=prefix[-1].t,
        seq=len(prefix),
        reason="restart",
        episode_ids=tuple(account.inflight),
        version=account.version,
    )
    again = VersionPending(t=prefix[-1].t, seq=len(prefix) + 1, version=account.version)
    return [*prefix, resumed, again], again.seq, "a version is announced once"


def _advantages_changed(log: list[Event]) -> tuple[list[Event], int, str] | None:
    index = next(
        (i for i, e in enumerate(log) if isinstance(e, GroupScored) and e.advantages), None
    )
    if index is None:
        return None
    scored = log[index]
    assert isinstance(scored, GroupScored)
    changed = (scored.advantages[0] + 0.5, *scored.advantages[1:])
    damaged = [*log[:index], attrs.evolve(scored, advantages=changed), *log[index + 1 :]]
    return damaged, index, "!= GRPO"


def _straggler_cut_without_risk(log: list[Event]) -> tuple[list[Event], int, str] | None:
    """Right after a completion, the rest of its group cut as stragglers although none of
    the group's fresh arrivals sits at the bound (the first such point in the log)."""
    account = _config_account(log)
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
            for episode_id, (_, version, reward) in group.arrived.items()
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


DAMAGES: dict[str, Callable[[list[Event]], tuple[list[Event], int, str] | None]] = {
    "group_opened": _group_after_finish,
    "run_resumed": _restart_after_finish,
    "episode_completed": _arrival_never_dispatched,
    "episode_dropped": _drop_never_queued,
    "version_pending": _version_again_after_restart,
    "group_scored": _advantages_changed,
    "episodes_cancelled": _straggler_cut_without_risk,
}


@pytest.mark.parametrize("kind", sorted(DAMAGES))
@given(log=world_logs(max_steps=60))
def test_the_account_reports_a_planted_fault_at_its_seq_and_kind(
    kind: str, log: list[Event]
) -> None:
    damage = DAMAGES[kind](log)
    if damage is None:  # the log has no event of the kind to damage
        return
    damaged, seq, problem = damage
    assert damaged[seq].kind == kind
    reports = _fed(damaged).violations
    assert any(
        report.startswith(f"seq {seq} ({kind}): ") and problem in report for report in reports
    ), (seq, kind, problem, reports)


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
