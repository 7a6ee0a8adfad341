"""The swarm fuzz suite: every drawn world keeps the seven properties on every event.

Each example draws its own scenario (see `sim_strategies.world_scenarios`) and seed, runs
it with the core's raising `Account` as an observer of every appended event, then
writes the log, reads it back and verifies it (`replay.verify`): today's deciders must
append exactly what was recorded, and folding the log must find no violation.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from hypothesis import example, given

from rolloutlog.events.types import WORLD_KINDS
from rolloutlog.replay.fold import fold_events
from rolloutlog.replay.source import open_log
from rolloutlog.replay.verify import verify_log
from rolloutlog.runtime.sim.scenario import Scenario, scenario_from_mapping
from tests.runtime.sim.sim_helpers import run_collect, write_and_read
from tests.runtime.sim.sim_strategies import world_scenarios

ENDINGS = {"steps", "zero_output"}

# Caught: with version jumps, several batches ship in one reaction after a version_pending,
# and the invariant checker once judged in-flight staleness at the later step (core fix).
VERSION_JUMP_THEN_BATCHES = scenario_from_mapping(
    {
        "steps": 3,
        "run": {
            "max_inflight": 1,
            "max_off_policy_steps": 3,
            "group_size": 4,
            "token_batch_size": 200,
            "target_lag": 1,
            "filter_zero_advantages": False,
            "tasks": 4,
            "admission_smoothing": True,
            "curriculum": "informative",
            "zero_output_batches": 3,
        },
        "world": {
            "task_length_tokens": 16,
            "duration_shape": 1.0,
            "train_step_s": 0.0,
            "weight_update_s": 0.0,
            "pause_inference_on_update": False,
            "version_skip_rate": 1.0,
        },
    }
)
# Caught: admission smoothing stalled the run: a stale cancellation spent the window's
# budget with nothing left in flight, so no event came to open the next window.
SMOOTHING_WINDOW_SPENT = scenario_from_mapping(
    {
        "steps": 2,
        "run": {
            "max_inflight": 1,
            "max_off_policy_steps": 0,
            "group_size": 1,
            "token_batch_size": 200,
            "target_lag": 0,
            "filter_zero_advantages": False,
            "tasks": 4,
            "admission_smoothing": True,
            "zero_output_batches": 3,
        },
        "world": {
            "task_length_tokens": 16,
            "duration_shape": 1.0,
            "train_step_s": 0.0,
            "weight_update_s": 0.0,
            "pause_inference_on_update": False,
        },
    }
)


@example(VERSION_JUMP_THEN_BATCHES)
@example(SMOOTHING_WINDOW_SPENT)
@given(world_scenarios())
def test_every_drawn_world_keeps_the_properties_and_replays(scenario: Scenario) -> None:
    events, result = run_collect(scenario, digest=True)  # properties 1-4, 7: raise at a break
    assert result.finished_reason in ENDINGS, result.finished_reason
    if result.finished_reason == "steps":
        assert result.steps_shipped >= scenario.steps
    assert [e for e in events if e.kind in WORLD_KINDS][-1].kind == "run_finished"
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "run.arrow"
        recorded = write_and_read(events, path)
        verification = verify_log(open_log(path))  # property 6: re-deciding the written log
    assert recorded == events  # the log survives the disk
    assert verification.ok, verification.divergence or verification.error
    assert verification.events == len(events)
    folded = fold_events(recorded)
    assert folded.error is None
    assert folded.fold is not None
    assert folded.fold.digest == result.digest
    assert folded.fold.summary()["invariant_violations"] == []


@given(world_scenarios(max_steps=6))
def test_sim_metrics_account_for_every_dispatched_episode(scenario: Scenario) -> None:
    events, result = run_collect(scenario, check=False)
    metrics = result.metrics
    dispatched = sum(event.kind == "episode_dispatched" for event in events)
    assert sum(metrics["episodes_by_fate"].values()) == dispatched
    total = metrics["rollout_seconds_total"]
    assert 0.0 <= metrics["rollout_seconds_wasted"] <= total + 1e-6
    assert abs(sum(metrics["rollout_seconds_by_fate"].values()) - total) <= 1e-6 * max(total, 1)
    trained = sum(len(e.trained_ids) for e in events if e.kind == "batch_shipped")  # type: ignore[union-attr]
    assert metrics["episodes_by_fate"]["trained"] == trained
    idle = metrics["trainer_idle_fraction"]
    assert idle is None or 0.0 <= idle <= 1.0
