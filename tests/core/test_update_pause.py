"""`update_pause`: new train work and a held batch go at `version_pending` (`none`), or wait
until the update is live and, for dispatch, the work it interrupted resumed (`until-live`,
the sources of AReaL, verl, slime and ROLL). Each value pinned by a small run where the two
part ways, and the account's check of the pause by a log that breaks it."""

from __future__ import annotations

import attrs
import pytest

from rolloutlog.core.account import Account
from rolloutlog.core.config import RunConfig
from rolloutlog.core.presets import FIELD, preset_overrides
from rolloutlog.events.types import EpisodeInterrupted, EpisodeResumed, Event, VersionLive
from tests.core.core_events import dispatched, opened
from tests.core.test_scenarios import Run

PAUSING = {"areal", "verl-fully-async", "verl-wait", "verl-drop", "slime-oversample"}
PAUSING |= {"slime-recycle", "roll-flash"}


def _run(update_pause: str, **keys: object) -> Run:
    """G = 1, three permits, batches of two at bound 1 and target_lag 1: batch 2 ships when
    g4/0 arrives, and when g5/0 arrives the gate is shut (a permit free, g6/0 and g7/0 out)
    until v1 is announced. Soft staleness: nothing is cancelled at the update."""
    run = Run(
        group_size=1,
        max_inflight=3,
        batch_size=2,
        max_off_policy_steps=1,
        target_lag=1,
        staleness="soft",
        update_pause=update_pause,
        **keys,
    )
    run.complete("g1/0", "g2/0", "g3/0", "g4/0", "g5/0")
    assert len(run.of_kind("batch_shipped")) == 2 and run.inflight() == ["g6/0", "g7/0"]
    return run


def _live(run: Run, version: int) -> list[Event]:
    run.t += 1
    return run.feed(VersionLive(t=run.t, version=version))


def _kinds(events: list[Event]) -> list[str]:
    return [e.kind for e in events]


def test_new_work_goes_at_version_pending_or_once_the_version_is_live() -> None:
    now = _run("none")
    assert _kinds(now.publish(1)) == ["version_pending", "group_opened", "episode_dispatched"]
    paused = _run("until-live")
    assert _kinds(paused.publish(1)) == ["version_pending"]
    assert _kinds(_live(paused, 1)) == ["version_live", "group_opened", "episode_dispatched"]


def test_a_held_batch_ships_at_version_pending_or_once_the_version_is_live() -> None:
    now, paused = _run("none"), _run("until-live")
    for run in (now, paused):
        run.complete("g6/0")  # batch 3 full, held until v1 (the ship hold)
        assert len(run.of_kind("batch_shipped")) == 2
    assert "batch_shipped" in _kinds(now.publish(1))
    assert "batch_shipped" not in _kinds(paused.publish(1))
    assert _kinds(_live(paused, 1))[:2] == ["version_live", "batch_shipped"]


def test_under_interrupt_new_work_waits_for_the_interrupted_work_to_resume() -> None:
    run = _run("until-live", weight_update="interrupt")
    run.publish(1)
    for episode_id in run.inflight():
        run.feed(
            EpisodeInterrupted(t=run.t, episode_id=episode_id, completion_tokens=2, reason="update")
        )
    assert _kinds(_live(run, 1)) == ["version_live"]  # neither is resumed yet
    resumed = run.feed(EpisodeResumed(t=run.t, episode_id="g6/0", policy_version=1))
    assert _kinds(resumed) == ["episode_resumed"]  # g7/0 is not
    resumed = run.feed(EpisodeResumed(t=run.t, episode_id="g7/0", policy_version=1))
    assert _kinds(resumed) == ["episode_resumed", "group_opened", "episode_dispatched"]


@pytest.mark.parametrize("kind", ["episode_dispatched", "batch_shipped"])
def test_the_account_reports_what_goes_out_during_a_paused_update(kind: str) -> None:
    """The log a `none` run writes, checked as an `until-live` run's: the first train
    dispatch, or the held batch, in the reaction to `version_pending` is reported."""
    run = _run("none")
    if kind == "batch_shipped":
        run.complete("g6/0")
    announced = run.publish(1)
    config = attrs.evolve(run.config, update_pause="until-live")
    account = Account(config, raise_on_violation=False)
    for event in run.log:
        account.feed(event)
    seq = next(e.seq for e in announced if e.kind == kind)
    assert (
        account.violations[0] == f"seq {seq} ({kind}): {kind} while v1 is not live (update_pause)"
    )


def test_the_account_reports_a_dispatch_before_the_interrupted_work_resumed() -> None:
    """v1 is live but g6/0 and g7/0 still wait for their resumption: a train dispatch now is
    reported (AReaL's executor resumes only after `agenerate` resubmitted them)."""
    run = _run("until-live", weight_update="interrupt")
    run.publish(1)
    for episode_id in run.inflight():
        run.feed(
            EpisodeInterrupted(t=run.t, episode_id=episode_id, completion_tokens=2, reason="update")
        )
    _live(run, 1)
    seq = len(run.log)
    group = attrs.evolve(opened("g8", 1, 3, size=1), t=run.t, seq=seq)
    early = attrs.evolve(dispatched("g8/0", 1), t=run.t, seq=seq + 1)
    account = Account(run.config, raise_on_violation=False)
    for event in [*run.log, group, early]:
        account.feed(event)
    assert account.violations == [
        f"seq {seq + 1} (episode_dispatched): episode_dispatched before the work the update "
        "interrupted resumed"
    ]


def test_the_sources_that_pause_for_an_update_are_the_presets_that_do() -> None:
    paused = {name for name in FIELD if preset_overrides(name)["update_pause"] == "until-live"}
    assert paused == PAUSING
    assert RunConfig().update_pause == "none"  # rolloutlog's own rule, and prime-rl's
