"""A restart in the log (`run_resumed`): the dispatcher cancels what was outstanding
(reason `restart`), the run goes on, and the checker proves nothing was lost or trained
twice across it; replay, verify and diff treat it like any other event."""

from __future__ import annotations

import attrs
import pytest

from rolloutlog.core.account import Account
from rolloutlog.core.config import RunConfig
from rolloutlog.core.errors import InconsistentLogError
from rolloutlog.core.loop import ReactionLoop
from rolloutlog.events.schema import SCHEMA_VERSION
from rolloutlog.events.types import (
    WORLD_KINDS,
    EpisodeCompleted,
    EpisodesCancelled,
    Event,
    RunFinished,
    RunResumed,
    RunStarted,
    VersionLive,
    VersionPending,
)
from rolloutlog.replay.diff import diff_logs
from rolloutlog.replay.log_replay import replay_log
from rolloutlog.replay.source import MemoryLog
from rolloutlog.replay.verify import verify_log
from rolloutlog.testing.equivalence import COLUMNAR_FOLD, PLAIN_FOLD, assert_equivalent

CONFIG = RunConfig(group_size=2, max_inflight=4, batch_size=2, max_off_policy_steps=1)


def _loop() -> tuple[ReactionLoop, list[Event]]:
    loop = ReactionLoop(CONFIG, observers=(Account(CONFIG),))
    log = loop.feed(
        RunStarted(
            t=0.0, config=CONFIG.to_dict(), seed=0, schema_version=SCHEMA_VERSION, code_version="t"
        )
    )
    return loop, log


def _complete(loop: ReactionLoop, episode_id: str, t: float, reward: float = 1.0) -> list[Event]:
    return loop.feed(
        EpisodeCompleted(
            t=t, episode_id=episode_id, reward=reward, prompt_tokens=2, completion_tokens=2
        )
    )


def _crashed_log() -> tuple[ReactionLoop, list[Event]]:
    """g1 completes (one batch ships), g2's members are in flight when the driver dies."""
    loop, log = _loop()
    log += _complete(loop, "g1/0", 1.0, 1.0)
    log += _complete(loop, "g1/1", 2.0, 0.0)
    assert any(e.kind == "batch_shipped" for e in log)
    return loop, log


def test_a_restart_cancels_exactly_what_was_in_flight_and_the_run_goes_on() -> None:
    loop, log = _crashed_log()
    inflight = sorted(loop.dispatcher_state.inflight)
    assert inflight[:2] == ["g2/0", "g2/1"]
    reaction = loop.feed(
        RunResumed(t=3.0, reason="test crash", episode_ids=tuple(inflight), version=0)
    )
    cancels = [e for e in reaction if e.kind == "episodes_cancelled"]
    assert {c.reason for c in cancels} == {"restart"}
    assert sorted(i for c in cancels for i in c.episode_ids) == inflight
    assert all(c.unscheduled == 0 for c in cancels)
    refilled = [e for e in reaction if e.kind == "episode_dispatched"]
    assert refilled and not set(inflight) & set(loop.dispatcher_state.inflight)
    log += reaction + loop.feed(RunFinished(t=4.0, reason="steps"))
    replay = replay_log(MemoryLog(log))
    assert replay.error is None and replay.summary["invariant_violations"] == []
    assert replay.summary["restarts"] == 1
    assert replay.summary["episodes_cancelled"]["restart"] == len(inflight)
    verification = verify_log(MemoryLog(log))
    assert verification.divergence is None and verification.error is None


def test_a_restart_that_misnames_what_was_outstanding_is_an_inconsistent_log() -> None:
    loop, _ = _crashed_log()
    wrong = RunResumed(t=3.0, reason="x", episode_ids=("g2/0",), version=0)
    with pytest.raises(InconsistentLogError, match="outstanding episodes differ"):
        loop.feed(wrong)


def test_a_restart_after_run_finished_is_refused() -> None:
    loop, _ = _crashed_log()
    loop.feed(RunFinished(t=3.0, reason="steps"))
    with pytest.raises(InconsistentLogError, match="already finished"):
        loop.feed(RunResumed(t=4.0, reason="x", episode_ids=(), version=0))


def _checked(log: list[Event]) -> list[str]:
    """The checker's verdict, each world event settled once its reaction is in."""
    checker = Account(CONFIG, raise_on_violation=False)
    world: Event | None = None
    for event in log:
        if event.kind in WORLD_KINDS and world is not None:
            checker.settled(world)
        world = event if event.kind in WORLD_KINDS else world
        checker.observe(event)
    if world is not None:
        checker.settled(world)
    return checker.violations


def test_the_checker_refuses_a_checkpoint_behind_an_announced_version() -> None:
    loop, log = _crashed_log()
    log += loop.feed(VersionPending(t=2.5, version=1))
    log += loop.feed(VersionLive(t=2.6, version=1))
    inflight = tuple(loop.dispatcher_state.inflight)
    resumed = RunResumed(t=3.0, reason="x", episode_ids=inflight, version=0)
    violations = _checked([*log, attrs.evolve(resumed, seq=len(log))])
    assert any("resumes from v0, but v1 was announced" in v for v in violations)


def test_the_checker_refuses_a_version_trained_twice_across_a_restart() -> None:
    """Resumed from checkpoint v1 (batch 1 inside it): announcing v1 again is fine only as
    the checkpoint itself; a version below it would train its batch twice."""
    loop, log = _crashed_log()
    inflight = tuple(loop.dispatcher_state.inflight)
    log += loop.feed(RunResumed(t=3.0, reason="x", episode_ids=inflight, version=1))
    assert _checked(log) == []
    again = VersionPending(t=3.5, version=0, seq=len(log))
    assert any("announced once" in v for v in _checked([*log, again]))


def test_a_restart_cancellation_outside_a_restart_is_a_violation() -> None:
    _, log = _crashed_log()
    stray = EpisodesCancelled(
        t=3.0, seq=len(log), group_id="g2", episode_ids=("g2/0",), unscheduled=0, reason="restart"
    )
    assert any("only what was outstanding" in v for v in _checked([*log, stray]))


def test_diff_against_an_uninterrupted_run_points_at_the_restart() -> None:
    loop, log = _crashed_log()
    uninterrupted = log + _complete(loop, "g2/0", 3.0)
    loop, log = _crashed_log()
    inflight = tuple(loop.dispatcher_state.inflight)
    resumed = log + loop.feed(
        RunResumed(t=3.0, reason="test crash", episode_ids=inflight, version=0)
    )
    difference = diff_logs(MemoryLog(uninterrupted), MemoryLog(resumed))
    assert difference.seq == len(log)
    assert difference.b is not None and difference.b.kind == "run_resumed"


def test_the_columnar_fold_agrees_with_the_plain_fold_across_a_restart() -> None:
    loop, log = _crashed_log()
    inflight = tuple(loop.dispatcher_state.inflight)
    log += loop.feed(RunResumed(t=3.0, reason="x", episode_ids=inflight, version=0))
    log += loop.feed(RunFinished(t=4.0, reason="steps"))
    assert COLUMNAR_FOLD(log).path == "columnar"  # it vouched for the restart itself
    assert_equivalent(log, PLAIN_FOLD, COLUMNAR_FOLD)
