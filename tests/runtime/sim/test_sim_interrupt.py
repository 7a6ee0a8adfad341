"""The simulated world under `weight_update = interrupt`: every update aborts what is
generating (its tokens so far at its own token rate) and resubmits it when the update goes
live, paying a prefill of its prompt and tokens so far. The log it records replays clean,
verifies, and the reference model re-decides it; under the default `freeze` nothing of
this is scheduled."""

from __future__ import annotations

from collections import Counter

import attrs
import pytest

from rolloutlog.events.types import EpisodeCompleted, EpisodeInterrupted, EpisodeResumed, Event
from rolloutlog.replay.log_replay import replay_log
from rolloutlog.replay.source import MemoryLog
from rolloutlog.replay.verify import verify_log
from rolloutlog.runtime.sim.scenario import load_scenario
from rolloutlog.testing.reference import reference_log
from tests.runtime.sim.sim_helpers import run_collect

SLOW_UPDATES = {"world.weight_update_s": 4.0, "world.task_length_tokens": 512}


def _run(seed: int, **keys: object) -> tuple[list[Event], float]:
    scenario = load_scenario("smoke", {**SLOW_UPDATES, **keys})
    events, result = run_collect(attrs.evolve(scenario, steps=8).with_seed(seed))
    return events, result.virtual_seconds


@pytest.mark.parametrize("seed", [0, 3])
def test_an_interrupting_run_is_a_log_every_checker_accepts(seed: int) -> None:
    events, _ = _run(seed, **{"run.weight_update": "interrupt"})
    kinds = Counter(event.kind for event in events)
    assert kinds["episode_interrupted"] > 0
    assert kinds["episode_resumed"] <= kinds["episode_interrupted"]
    replay = replay_log(MemoryLog(events))
    assert replay.error is None and replay.summary["invariant_violations"] == []
    assert verify_log(MemoryLog(events)).divergence is None
    assert reference_log(events) == events


def test_a_resumed_episode_completes_with_every_token_it_had() -> None:
    events, _ = _run(0, **{"run.weight_update": "interrupt"})
    had: dict[str, int] = {}
    live = 0
    for event in events:
        if event.kind == "version_live":
            live = event.version  # type: ignore[attr-defined]
        if isinstance(event, EpisodeInterrupted):
            assert event.completion_tokens >= had.get(event.episode_id, 0)
            had[event.episode_id] = event.completion_tokens
        if isinstance(event, EpisodeResumed):
            assert event.policy_version == live
        if isinstance(event, EpisodeCompleted) and event.episode_id in had:
            assert event.completion_tokens >= had.pop(event.episode_id)


def test_the_prefill_of_resuming_costs_time_and_freeze_pays_none() -> None:
    """Decisions are the same under both rules (nothing is freed or restamped), so only
    the prefill separates them: at a slow prefill rate an interrupting run takes longer."""
    _, frozen_s = _run(0)
    interrupt = {"run.weight_update": "interrupt"}
    _, fast_s = _run(0, **interrupt, **{"world.prefill_tokens_per_s": 1e9})
    _, slow_s = _run(0, **interrupt, **{"world.prefill_tokens_per_s": 50.0})
    assert fast_s == pytest.approx(frozen_s, rel=1e-6)
    assert slow_s > frozen_s


def test_a_shared_prefill_queues_the_resumptions_of_one_update() -> None:
    """Each resumption alone pays its own tokens; sharing one engine's prefill rate, the
    k-th waits for those before it, so the same run takes longer."""
    interrupt = {"run.weight_update": "interrupt", "world.prefill_tokens_per_s": 500.0}
    alone, alone_s = _run(0, **interrupt)
    shared, shared_s = _run(0, **interrupt, **{"world.prefill_shared": True})
    assert shared_s > alone_s
    resumed = Counter(event.kind for event in shared)["episode_resumed"]
    assert resumed > 0 and Counter(event.kind for event in alone)["episode_resumed"] > 0


def test_under_freeze_nothing_is_interrupted() -> None:
    events, _ = _run(0)
    assert not {"episode_interrupted", "episode_resumed"} & {event.kind for event in events}


def test_the_partial_ratio_and_the_largest_span_recount_the_log() -> None:
    events, _ = _run(3, **{"run.weight_update": "interrupt"})
    start: dict[str, int] = {}
    end: dict[str, int] = {}
    trained: list[str] = []
    for event in events:
        if event.kind == "episode_dispatched":
            start[event.episode_id] = event.policy_version  # type: ignore[attr-defined]
        elif isinstance(event, EpisodeResumed):
            end[event.episode_id] = event.policy_version
        elif event.kind == "batch_shipped":
            trained += event.trained_ids  # type: ignore[attr-defined]
    partial = [e for e in trained if e in end]
    summary = replay_log(MemoryLog(events)).summary
    assert partial and summary["partial_ratio"] == len(partial) / len(trained)
    assert summary["largest_version_span"] == max(end[e] - start[e] for e in partial)
