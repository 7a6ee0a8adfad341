"""The simulated world under `weight_update = interrupt`: every update aborts what is
generating (its tokens so far at its own token rate) and resubmits it when the update goes
live, paying a prefill of its prompt and tokens so far. The log it records replays clean,
verifies, and the reference model re-decides it; under the default `freeze` nothing of
this is scheduled."""

from __future__ import annotations

from collections import Counter

import pytest

from rolloutlog.events.types import (
    BatchShipped,
    EpisodeCompleted,
    EpisodeInterrupted,
    EpisodeResumed,
    Event,
)
from rolloutlog.replay.log_replay import replay_log
from rolloutlog.replay.source import MemoryLog
from rolloutlog.replay.step_metrics import StepMetrics
from rolloutlog.replay.verify import verify_log
from rolloutlog.testing.equivalence import COLUMNAR_FOLD, PLAIN_FOLD, assert_equivalent
from rolloutlog.testing.reference import reference_log
from tests.runtime.sim.sim_helpers import slow_update_run


@pytest.mark.parametrize("seed", [0, 3])
def test_an_interrupting_run_is_a_log_every_checker_accepts(seed: int) -> None:
    events, _ = slow_update_run(seed, **{"run.weight_update": "interrupt"})
    kinds = Counter(event.kind for event in events)
    assert kinds["episode_interrupted"] > 0
    assert kinds["episode_resumed"] <= kinds["episode_interrupted"]
    replay = replay_log(MemoryLog(events))
    assert replay.error is None and replay.summary["invariant_violations"] == []
    assert verify_log(MemoryLog(events)).divergence is None
    assert reference_log(events) == events


def test_a_resumed_episode_completes_with_every_token_it_had() -> None:
    events, _ = slow_update_run(0, **{"run.weight_update": "interrupt"})
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
    the prefill separates them: at a slow prefill rate an interrupting run takes longer.
    In the independent world, where a rollout's seconds do not depend on what else runs
    (in the shared world a resubmitted request also changes its place in the batch)."""
    independent = {"world.inference": "independent"}
    _, frozen_s = slow_update_run(0, **independent)
    interrupt = {"run.weight_update": "interrupt", **independent}
    _, fast_s = slow_update_run(0, **interrupt, **{"world.prefill_tokens_per_s": 1e9})
    _, slow_s = slow_update_run(0, **interrupt, **{"world.prefill_tokens_per_s": 50.0})
    assert fast_s == pytest.approx(frozen_s, rel=1e-6)
    assert slow_s > frozen_s


def test_a_shared_prefill_queues_the_resumptions_of_one_update() -> None:
    """Each resumption alone pays its own tokens; sharing one engine's prefill rate, the
    k-th waits for those before it, so the same run takes longer (`prefill_shared` is the
    independent world's: a shared world's server queues its prefills anyway)."""
    interrupt = {
        "run.weight_update": "interrupt",
        "world.prefill_tokens_per_s": 500.0,
        "world.inference": "independent",
    }
    alone, alone_s = slow_update_run(0, **interrupt)
    shared, shared_s = slow_update_run(0, **interrupt, **{"world.prefill_shared": True})
    assert shared_s > alone_s
    resumed = Counter(event.kind for event in shared)["episode_resumed"]
    assert resumed > 0 and Counter(event.kind for event in alone)["episode_resumed"] > 0


def test_under_freeze_nothing_is_interrupted() -> None:
    events, _ = slow_update_run(0)
    assert not {"episode_interrupted", "episode_resumed"} & {event.kind for event in events}


def test_the_partial_ratio_and_the_largest_span_recount_the_log() -> None:
    events, _ = slow_update_run(3, **{"run.weight_update": "interrupt"})
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


def _token_ages(events: list[Event]) -> dict[int, Counter[int]]:
    """Per step, the trained tokens by age recounted from the log: the tokens between two
    interruptions at the age of the version the episode went on under."""
    segments: dict[str, list[tuple[int, int]]] = {}  # id -> (version, tokens so far) marks
    steps: dict[int, Counter[int]] = {}
    for event in events:
        if event.kind == "episode_dispatched":
            segments[event.episode_id] = [(event.policy_version, 0)]  # type: ignore[attr-defined]
        elif isinstance(event, EpisodeInterrupted | EpisodeCompleted):
            version, _ = segments[event.episode_id][-1]
            segments[event.episode_id][-1] = (version, event.completion_tokens)
        elif isinstance(event, EpisodeResumed):
            marks = segments[event.episode_id]
            marks.append((event.policy_version, marks[-1][1]))
        elif isinstance(event, BatchShipped):
            ages = steps[event.step] = Counter()
            for episode_id in event.trained_ids:
                before = 0
                for version, so_far in segments[episode_id]:
                    ages[max(0, event.step - 1 - version)] += so_far - before
                    before = so_far
    return steps


def test_the_token_age_split_recounts_the_log() -> None:
    events, _ = slow_update_run(3, **{"run.weight_update": "interrupt"})
    ages = sum(_token_ages(events).values(), Counter())
    summary = replay_log(MemoryLog(events)).summary
    assert len(ages) > 1
    assert summary["trained_token_age_histogram"] == {str(a): ages[a] for a in sorted(ages)}


def _mean(ages: Counter[int]) -> float | None:
    tokens = sum(ages.values())
    return sum(a * n for a, n in ages.items()) / tokens if tokens else None


def test_metrics_split_each_steps_trained_tokens_by_age() -> None:
    events, _ = slow_update_run(3, **{"run.weight_update": "interrupt"})
    steps = _token_ages(events)
    by_rows = StepMetrics.from_batches(MemoryLog(events).batches())
    by_events = StepMetrics()
    for event in events:
        by_events.observe(event)
    assert by_rows.rows == by_events.rows
    rows = {row["step"]: row for row in by_rows.rows}
    for step, ages in steps.items():
        assert rows[step]["off_policy/token_age/mean"] == pytest.approx(_mean(ages))
        assert rows[step]["off_policy/token_age/max"] == max(
            (a for a in ages if ages[a]), default=None
        )
    run = by_rows.run_values()
    summary = replay_log(MemoryLog(events)).summary
    assert run["off_policy/token_age/mean"] == pytest.approx(_mean(sum(steps.values(), Counter())))
    assert run["off_policy/partial_ratio"] == summary["partial_ratio"] > 0
    frozen, _ = slow_update_run(3)
    assert (
        "off_policy/partial_ratio"
        not in StepMetrics.from_batches(MemoryLog(frozen).batches()).run_values()
    )


@pytest.mark.parametrize("keys", [{"run.weight_update": "interrupt"}, {"run.recycle": True}])
@pytest.mark.parametrize("seed", [1, 2])  # seeds whose first batch trains before any abort
def test_the_columnar_replay_reports_the_plain_folds_token_split(
    keys: dict[str, object], seed: int
) -> None:
    """The fast path hands a segmenting run to the plain fold from its first row, so the
    two report one split (it never counts segments it did not see)."""
    events, _ = slow_update_run(seed, **keys)
    assert COLUMNAR_FOLD(events).path.startswith("plain (seq 0:")
    assert "trained_token_age_histogram" in PLAIN_FOLD(events).summary  # type: ignore[operator]
    assert_equivalent(events, PLAIN_FOLD, COLUMNAR_FOLD)
    # cut before its first interruption, no row says the run segments: its config does
    first = next(n for n, e in enumerate(events) if isinstance(e, EpisodeInterrupted))
    assert PLAIN_FOLD(events[:first]).summary["trained_token_age_histogram"]  # type: ignore[index]
    assert_equivalent(events[:first], PLAIN_FOLD, COLUMNAR_FOLD)


def test_a_zero_second_update_interrupts_before_it_goes_live() -> None:
    """Pinned: with `weight_update_s = 0` the update went live before the aborts its
    announcement scheduled for the same moment, and the first abort was refused ("no
    weight update under way"); `rolloutlog whatif` fits 0 s from an AReaL import."""
    events, _ = slow_update_run(
        0, **{"run.weight_update": "interrupt", "world.weight_update_s": 0.0}
    )
    assert Counter(event.kind for event in events)["episode_interrupted"] > 0
    replay = replay_log(MemoryLog(events))
    assert replay.error is None and replay.summary["invariant_violations"] == []
