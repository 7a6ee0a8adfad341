"""The simulated world under `recycle` (slime's partial rollout): every shipped batch aborts
the train work then generating (reason `recycle`, its tokens so far), which is resubmitted
first when the next version goes live, paying a prefill of its prompt and tokens so far.
The log it records replays clean, verifies, and the reference model re-decides it."""

from __future__ import annotations

from collections import Counter

import attrs
import pytest

from rolloutlog.events.types import EpisodeInterrupted, EpisodeResumed, Event
from rolloutlog.replay.log_replay import replay_log
from rolloutlog.replay.source import MemoryLog
from rolloutlog.replay.verify import verify_log
from rolloutlog.runtime.sim.scenario import load_scenario
from rolloutlog.testing.reference import reference_log
from tests.runtime.sim.sim_helpers import run_collect

LONG = {"world.task_length_tokens": 512}


def _run(seed: int, **keys: object) -> tuple[list[Event], float]:
    scenario = load_scenario("smoke", {**LONG, "run.recycle": True, **keys})
    events, result = run_collect(attrs.evolve(scenario, steps=8).with_seed(seed))
    return events, result.virtual_seconds


@pytest.mark.parametrize(
    ("seed", "rule"), [(0, "freeze"), (3, "freeze"), (0, "interrupt"), (3, "interrupt")]
)
def test_a_recycling_run_is_a_log_every_checker_accepts(seed: int, rule: str) -> None:
    events, _ = _run(seed, **{"run.weight_update": rule})
    reasons = Counter(e.reason for e in events if isinstance(e, EpisodeInterrupted))
    assert reasons["recycle"] > 0
    assert rule == "interrupt" or reasons["update"] == 0  # what recycled has stopped already
    replay = replay_log(MemoryLog(events))
    assert replay.error is None and replay.summary["invariant_violations"] == []
    assert verify_log(MemoryLog(events)).divergence is None
    assert reference_log(events) == events


def test_recycled_work_resumes_under_the_next_version_before_any_train_dispatch() -> None:
    events, _ = _run(0)
    train = {
        e.group_id  # type: ignore[attr-defined]
        for e in events
        if e.kind == "group_opened" and e.work == "train"  # type: ignore[attr-defined]
    }
    waiting: dict[str, int] = {}  # recycled -> the version live when it stopped
    live = 0
    for event in events:
        if event.kind == "version_live":
            live = event.version  # type: ignore[attr-defined]
        elif isinstance(event, EpisodeInterrupted) and event.reason == "recycle":
            waiting[event.episode_id] = live
        elif isinstance(event, EpisodeResumed) and event.episode_id in waiting:
            assert event.policy_version == live > waiting.pop(event.episode_id)
        elif event.kind == "episodes_cancelled":  # a stale cancellation frees its permit
            for episode_id in event.episode_ids:  # type: ignore[attr-defined]
                waiting.pop(episode_id, None)
        elif event.kind == "episode_dispatched":
            assert not (waiting and event.group_id in train)  # type: ignore[attr-defined]


def test_the_prefill_of_resuming_recycled_work_costs_time() -> None:
    _, fast_s = _run(0, **{"world.prefill_tokens_per_s": 1e9})
    _, slow_s = _run(0, **{"world.prefill_tokens_per_s": 50.0})
    assert slow_s > fast_s
