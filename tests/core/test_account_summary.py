"""The run summary (`replay --json`) recounted from the log alone, on every generated log.

The account keeps its counts incrementally as events arrive; this recount reads the whole
log at once with its own bookkeeping (which episodes are in flight, each one's dispatch
version, its own rollout age), so a count the account keeps wrong cannot also be wrong here.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from hypothesis import given

from rolloutlog.events.types import (
    ALWAYS_CANCEL_REASONS,
    BatchShipped,
    EpisodeCompleted,
    EpisodeDispatched,
    EpisodeDropped,
    EpisodeFailed,
    EpisodesCancelled,
    Event,
    GroupOpened,
    GroupScored,
    RunFinished,
    RunStarted,
)
from rolloutlog.replay.fold import fold_events
from rolloutlog.testing.strategies import world_logs


def _recount(log: list[Event]) -> dict[str, Any]:
    """What the summary should say, from the whole log (no restarts in these logs)."""
    kinds = Counter(event.kind for event in log)
    size: dict[str, int] = {}
    train: dict[str, bool] = {}
    stamp: dict[str, int] = {}
    in_flight: set[str] = set()
    cancelled = dict.fromkeys(ALWAYS_CANCEL_REASONS, 0)  # `redundant` only where it occurs
    scored = partial = admitted = late = unscheduled = trained = pruned = 0
    ages: Counter[int] = Counter()
    frozen: dict[str, bool] = {}
    finished, bound, past_bound = None, 0, 0
    owed: list[str] = []  # groups discarded for requeue whose task no group took yet
    requeue_seen: set[str] = set()
    requeued = 0
    for event in log:
        match event:
            case RunStarted():
                bound = event.config["max_off_policy_steps"]
            case GroupOpened():
                size[event.group_id] = event.group_size
                train[event.group_id] = event.work == "train"
                frozen[event.group_id] = event.frozen
                if event.work == "train" and owed:
                    owed.pop(0)
                    requeued += 1
            case EpisodeDropped(reason="requeue"):
                group_id = event.episode_id.rpartition("/")[0]
                if group_id not in owed and group_id not in requeue_seen:
                    requeue_seen.add(group_id)
                    owed.append(group_id)
            case EpisodeDispatched():
                stamp[event.episode_id] = event.policy_version
                in_flight.add(event.episode_id)
            case EpisodeCompleted() | EpisodeFailed():
                if event.episode_id in in_flight:
                    in_flight.remove(event.episode_id)
                else:
                    late += 1
            case EpisodesCancelled():
                in_flight.difference_update(event.episode_ids)
                cancelled[event.reason] = cancelled.get(event.reason, 0) + len(event.episode_ids)
                unscheduled += event.unscheduled
            case GroupScored() if train[event.group_id]:
                scored += len(event.episode_ids)
                partial += len(event.episode_ids) < size[event.group_id]
                admitted += event.admitted
            case BatchShipped():
                trained += len(event.trained_ids)
                pruned += len(event.episode_ids) - len(event.trained_ids)
                # the batch for step s trains on policy s - 1; an episode's age is how many
                # versions that is past the one it was dispatched at
                ages.update(event.step - 1 - stamp[e] for e in event.trained_ids)
                past_bound += sum(
                    event.step - 1 - stamp[e] > bound and not frozen[e.rpartition("/")[0]]
                    for e in event.trained_ids
                )
            case RunFinished():
                finished = event.reason
    return {
        "events": len(log),
        "steps_shipped": kinds["batch_shipped"],
        "groups_opened": kinds["group_opened"],
        "groups_finalized": kinds["group_scored"],
        "groups_partial": partial,
        "groups_admitted": admitted,
        "groups_requeued": requeued,
        "episodes_dispatched": kinds["episode_dispatched"],
        "episodes_completed": kinds["episode_completed"],
        "episodes_failed": kinds["episode_failed"],
        "episodes_late": late,
        "episodes_cancelled": cancelled,
        "unscheduled_cancelled": unscheduled,
        "episodes_dropped_stale": sum(isinstance(e, EpisodeDropped) for e in log),
        "episodes_scored": scored,
        "episodes_trained": trained,
        "episodes_pruned_zero_adv": pruned,
        "max_trained_age": max(ages) if ages else None,
        "mean_trained_age": sum(a * n for a, n in ages.items()) / trained if trained else None,
        "trained_age_histogram": {str(a): ages[a] for a in sorted(ages)},
        "episodes_trained_past_bound": past_bound,
        "run_finished": finished,
        "restarts": 0,
        "invariant_violations": [],
    }


@given(world_logs())
def test_the_summary_recounts_the_log(log: list[Event]) -> None:
    result = fold_events(log)
    assert result.error is None and result.fold is not None
    assert result.fold.summary() == _recount(log)
