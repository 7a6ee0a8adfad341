"""The bounded queue (`queue_limit`, verl's MessageQueue and PipelineRL): an admitted group
that would overfill the sink's queue first evicts the oldest queued work, reason `evicted`."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest

from rolloutlog.core.account import InvariantViolation
from rolloutlog.core.config import ConfigError, RunConfig
from rolloutlog.core.presets import CHOICES
from rolloutlog.core.state import Queued
from rolloutlog.events.types import EpisodeDropped, GroupScored
from rolloutlog.replay.step_metrics import DROPPED, EVICTED, StepMetrics
from tests.core.planted import fed
from tests.core.test_scenarios import Run

# Soft staleness (nothing drops for age); no lag, so batch 1 ships and batch 2 is held until
# v1: what completes meanwhile waits in a queue of at most `queue_limit` episodes.
HELD: dict[str, Any] = {
    "staleness": "soft",
    "group_size": 2,
    "max_inflight": 8,
    "batch_size": 2,
    "target_lag": 0,
    "queue_limit": 4,
}


def _evicted(run: Run) -> list[str]:
    return [e.episode_id for e in run.log if isinstance(e, EpisodeDropped)]


def _fill_while_held(run: Run) -> None:
    """g1 ships batch 1; g2, g3 fill the queue; g4 arrives to a full queue."""
    run.complete("g1/0", "g1/1", "g2/0", "g2/1", "g3/0", "g3/1", "g4/0", "g4/1")


def test_a_full_queue_evicts_its_oldest_episodes_before_the_admitted_group() -> None:
    run = Run(**HELD)
    _fill_while_held(run)
    assert _evicted(run) == ["g2/0", "g2/1"]
    drops = [e for e in run.log if isinstance(e, EpisodeDropped)]
    assert {e.reason for e in drops} == {"evicted"}
    scored = next(e for e in run.log if isinstance(e, GroupScored) and e.group_id == "g4")
    assert all(e.seq < scored.seq for e in drops)  # room is made before the group joins
    assert sorted(run.loop.sink_state.queue) == ["g3/0", "g3/1", "g4/0", "g4/1"]


def test_an_unbounded_queue_evicts_nothing() -> None:
    run = Run(**{**HELD, "queue_limit": 0})
    _fill_while_held(run)
    assert _evicted(run) == []
    assert len(run.loop.sink_state.queue) == 6


def test_oldest_group_evicts_whole_groups_the_fewest_that_make_room() -> None:
    """G = 3, batch 2: batch 1 leaves g1/2 queued; g2 fills the queue to 4; g3 needs 3 more
    places: g1's remainder and all of g2 go (oldest-episode would keep g2/2)."""
    config = {**HELD, "group_size": 3, "max_inflight": 9}
    grouped = Run(**config, queue_eviction="oldest-group")
    single = Run(**config)
    for run in (grouped, single):
        run.complete(*(f"g{g}/{m}" for g in (1, 2, 3) for m in range(3)))
    assert _evicted(grouped) == ["g1/2", "g2/0", "g2/1", "g2/2"]
    assert _evicted(single) == ["g1/2", "g2/0", "g2/1"]


def _newest(queue: Mapping[str, Queued], excess: int) -> list[str]:
    return list(queue)[len(queue) - max(0, excess) :]


def _too_eager(queue: Mapping[str, Queued], excess: int) -> list[str]:
    return list(queue)[: max(1, excess + 1)]


def _too_few(queue: Mapping[str, Queued], excess: int) -> list[str]:
    return list(queue)[: max(0, excess - 1)]


def _one_too_many(queue: Mapping[str, Queued], excess: int) -> list[str]:
    return list(queue)[: excess + 1] if excess > 0 else []


@pytest.mark.parametrize(
    ("planted", "problem"),
    [
        (_newest, "but the oldest queued is g2/0"),
        (_too_eager, "from a queue of 2 with room"),
        (_too_few, "the queue would hold 5 > limit 4"),
        (_one_too_many, "evicted 3, 2 needed"),
    ],
)
def test_the_account_flags_a_planted_eviction_bug(
    monkeypatch: pytest.MonkeyPatch, planted: Any, problem: str
) -> None:
    monkeypatch.setitem(CHOICES["queue_eviction"], "oldest-episode", {"evict": planted})
    with pytest.raises(InvariantViolation, match=problem):
        _fill_while_held(Run(**HELD))


def test_a_queue_that_cannot_hold_a_group_or_a_batch_is_refused() -> None:
    with pytest.raises(ConfigError, match="queue_limit: must be 0 or >= group_size"):
        RunConfig.from_mapping({"group_size": 8, "batch_size": 4, "queue_limit": 6})
    with pytest.raises(ConfigError, match="queue_limit: must be 0 or >= group_size"):
        RunConfig.from_mapping({"group_size": 2, "batch_size": 64, "queue_limit": 32})


def test_a_queue_that_whole_group_eviction_keeps_short_of_a_batch_is_refused() -> None:
    """Found by the drained-update property: G=8, B=11, a limit of 11 under `oldest-group`
    never held a batch (a queue of 8 that took a group evicted one back to 8), so the
    simulator ran 200,000 world events without shipping."""
    held = {"group_size": 8, "batch_size": 11, "queue_eviction": "oldest-group"}
    with pytest.raises(ConfigError, match=r"batch_size \+ group_size - 1 \(18\)"):
        RunConfig.from_mapping({**held, "queue_limit": 17})
    RunConfig.from_mapping({**held, "queue_limit": 18})
    RunConfig.from_mapping({**held, "queue_limit": 11, "queue_eviction": "oldest-episode"})


def test_evictions_are_counted_apart_from_stale_drops() -> None:
    """`replay --json`'s `episodes_evicted` and `metrics`' `off_policy/evicted` count the
    evictions; neither counts them as stale drops."""
    run = Run(**HELD)
    _fill_while_held(run)
    metrics = StepMetrics()
    for event in run.log:
        metrics.observe(event)
    summary = fed(run.log, raising=True).summary()
    assert (summary["episodes_evicted"], summary["episodes_dropped_stale"]) == (2, 0)
    assert (metrics.run_values()[EVICTED], metrics.run_values()[DROPPED]) == (2, 0)
