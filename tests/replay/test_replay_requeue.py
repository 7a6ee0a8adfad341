"""A tinker log (a group discarded and its task requeued) verifies, replays with the figure
`groups_requeued`, and fails at exactly its seq when the requeue is skipped."""

from __future__ import annotations

import json
from pathlib import Path

import attrs

from rolloutlog.core.tasks import task_for_group
from rolloutlog.events.types import (
    EpisodeDropped,
    Event,
    GroupOpened,
    RunFinished,
    RunStarted,
    VersionLive,
)
from rolloutlog.replay.conformance import check_conformance
from rolloutlog.replay.source import MemoryLog
from rolloutlog.replay.verify import verify_log
from tests.core.planted import fed
from tests.core.requeue_runs import TINKER_REQUEUE, requeue_run, stale_at_completion
from tests.invoke import run
from tests.replay.test_replay_cli import written


def _tinker_log() -> list[Event]:
    """g2 completes past the bound and is requeued as g4 (see tests/core/test_requeue.py)."""
    loop_run = requeue_run("tinker", **TINKER_REQUEUE)
    stale_at_completion(loop_run)
    loop_run.feed(RunFinished(t=99.0, reason="steps"))
    return loop_run.log


def _requeue_skipped(log: list[Event]) -> tuple[list[Event], int]:
    """The requeue g4 opened on a fresh task instead, as if g2's task were never owed."""
    seq = next(e.seq for e in log if isinstance(e, GroupOpened) and e.group_id == "g4")
    fresh = task_for_group(requeue_run("tinker", **TINKER_REQUEUE).config, 4, "train").task_id
    return [attrs.evolve(e, task_id=fresh) if e.seq == seq else e for e in log], seq


def test_a_tinker_log_verifies_and_replays_its_requeue(tmp_path: Path) -> None:
    log = _tinker_log()
    assert any(isinstance(e, EpisodeDropped) and e.reason == "requeue" for e in log)
    assert verify_log(MemoryLog(log)).ok
    account = fed(log)
    assert account.violations == []
    report = json.loads(run("replay", "--json", written(tmp_path, log)).stdout)
    assert report["groups_requeued"] == 1 and report["off_policy/requeued"] == 1
    assert report["invariant_violations"] == []


def test_a_skipped_requeue_fails_verify_and_the_account_at_its_seq(tmp_path: Path) -> None:
    log, seq = _requeue_skipped(_tinker_log())
    verdict = verify_log(MemoryLog(log))
    assert not verdict.ok
    problem = verdict.divergence.seq if verdict.divergence is not None else verdict.error
    assert problem == seq or f"seq {seq}" in str(problem), verdict
    assert fed(log).violations[0].startswith(f"seq {seq} (group_opened): skips the requeue of g2")
    human = run("verify", written(tmp_path, log))
    assert human.exit_code != 0 and f"seq {seq}" in human.output


def test_a_requeue_drop_the_runs_rule_does_not_make_is_reported_at_its_seq() -> None:
    """The same log recorded as if its run never requeued (`requeue = "none"`)."""
    log = _tinker_log()
    started = log[0]
    assert isinstance(started, RunStarted)
    log[0] = attrs.evolve(started, config={**started.config, "requeue": "none"})
    seq = next(e.seq for e in log if isinstance(e, EpisodeDropped) and e.reason == "requeue")
    assert f"seq {seq} (episode_dropped): requeue at completion under requeue rule 'none'" in (
        fed(log).violations
    )


def _tinker_preset_log() -> list[Event]:
    """Under the `tinker` preset itself (G = 1, two workers): g3 and g4 are discarded, and
    g9 reopens g3's task behind the fresh builders (tests/core/test_requeue.py)."""
    run = requeue_run("tinker", group_size=1, batch_size=2, max_inflight=2)
    run.complete("g1/0", "g2/0")
    run.publish(1)
    run.feed(VersionLive(t=run.t + 1, version=1))
    run.complete("g3/0", "g4/0", "g5/0", "g6/0")
    run.publish(2)
    run.feed(VersionLive(t=run.t + 1, version=2))
    run.complete("g7/0", "g8/0")
    run.feed(RunFinished(t=99.0, reason="steps"))
    return run.log


def test_a_tinker_log_on_another_orchestrators_tasks_conforms_with_its_requeue() -> None:
    """The requeued task is the one the log recorded for the discarded group, not the seeded
    source's (the dispatcher took it from the task source, which conformance replaces)."""
    log = [
        attrs.evolve(e, task_id=f"gsm8k/{e.task_id}", env="gsm8k")
        if isinstance(e, GroupOpened)
        else e
        for e in _tinker_preset_log()
    ]
    opened = {e.group_id: e.task_id for e in log if isinstance(e, GroupOpened)}
    assert opened["g9"] == opened["g3"]  # the requeue, behind g5-g8
    verdict = check_conformance(MemoryLog(log), "tinker")
    assert verdict.ok, verdict.error or verdict.nonconformity
