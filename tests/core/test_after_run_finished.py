"""Nothing after `run_finished`: no group opened, no episode dispatched, no batch shipped.

Groups that finalize in the shutdown cancellations still get exactly one `group_scored`,
but are never trained; the checker (and so `replay`, on either fold) flags a log that
opens, dispatches or ships after `run_finished`.
"""

from __future__ import annotations

from pathlib import Path

import attrs
import pytest
from click.testing import CliRunner

from rolloutlog.cli import main
from rolloutlog.core.account import Account
from rolloutlog.core.config import RunConfig
from rolloutlog.core.loop import ReactionLoop
from rolloutlog.events.log_reader import read_log
from rolloutlog.events.schema import SCHEMA_VERSION
from rolloutlog.events.types import (
    BatchShipped,
    EpisodeCompleted,
    EpisodeDispatched,
    Event,
    GroupOpened,
    RunFinished,
    RunStarted,
)
from rolloutlog.replay.log_replay import replay_log
from rolloutlog.replay.source import MemoryLog


def _completed(episode_id: str, t: float, reward: float) -> EpisodeCompleted:
    return EpisodeCompleted(
        t=t, episode_id=episode_id, reward=reward, prompt_tokens=1, completion_tokens=1
    )


def shutdown_fills_a_batch() -> list[Event]:
    """G=2, 4 permits, batches of 3: g1 is queued (2), g2 has one arrival when the run ends.

    The shutdown cancellation finalizes g2 with one scored member, which would make the
    queue 3 = a full batch: before the rule, batch 1 shipped after `run_finished`.
    """
    run = RunConfig.from_mapping(
        {"group_size": 2, "max_inflight": 4, "batch_size": 3, "filter_zero_advantages": False}
    )
    loop = ReactionLoop(run, observers=(Account(run),))
    log = loop.feed(
        RunStarted(
            t=0.0, config=run.to_dict(), seed=0, schema_version=SCHEMA_VERSION, code_version="t"
        )
    )
    log += loop.feed(_completed("g1/0", 1.0, 1.0))
    log += loop.feed(_completed("g1/1", 2.0, 0.0))
    log += loop.feed(_completed("g2/0", 3.0, 1.0))
    return log + loop.feed(RunFinished(t=4.0, reason="steps"))


def test_groups_finalizing_at_shutdown_are_scored_once_and_never_trained() -> None:
    log = shutdown_fills_a_batch()
    end = next(i for i, e in enumerate(log) if e.kind == "run_finished")
    after = [e.kind for e in log[end + 1 :]]
    assert "batch_shipped" not in [e.kind for e in log]
    assert not {"group_opened", "episode_dispatched", "batch_shipped"} & set(after)
    opened = [e.group_id for e in log if isinstance(e, GroupOpened)]
    scored = [e.group_id for e in log if e.kind == "group_scored"]  # type: ignore[attr-defined]
    assert sorted(scored) == sorted(opened) == ["g1", "g2", "g3", "g4"]
    assert "group_scored" in after  # g2 and g3 finalize in the shutdown


def _with(log: list[Event], *late: Event) -> list[Event]:
    """`log` with `late` appended, numbered on from its last seq."""
    return [*log, *(attrs.evolve(e, seq=len(log) + i) for i, e in enumerate(late))]


def _late_batch(log: list[Event]) -> Event:
    """The batch the sink shipped after `run_finished` before the rule (g1 and g2/0)."""
    return BatchShipped(
        t=4.0, step=1, episode_ids=("g1/0", "g1/1", "g2/0"), trained_ids=("g1/0",), tokens=2
    )


def _late_group(log: list[Event]) -> Event:
    """A group opened after `run_finished`, numbered on from the last one opened."""
    opened = [e for e in log if isinstance(e, GroupOpened)]
    return attrs.evolve(opened[-1], group_id=f"g{len(opened) + 1}")


@pytest.mark.parametrize("columnar", [True, False], ids=["columnar", "plain"])
@pytest.mark.parametrize(
    ("late", "problem"),
    [(_late_batch, "batch shipped after run_finished"), (_late_group, "group opened after")],
)
def test_replay_flags_a_log_that_acts_after_run_finished(late, problem, columnar) -> None:
    log = shutdown_fills_a_batch()
    replay = replay_log(MemoryLog(_with(log, late(log))), columnar=columnar)
    violations = replay.summary["invariant_violations"]
    assert replay.error is None
    assert any(f"seq {len(log)} " in v and problem in v for v in violations), violations


@pytest.mark.parametrize("columnar", [True, False], ids=["columnar", "plain"])
def test_replay_flags_a_dispatch_after_run_finished(columnar) -> None:
    log = shutdown_fills_a_batch()
    opened = _late_group(log)
    group_id = opened.group_id  # type: ignore[attr-defined]
    dispatched = EpisodeDispatched(
        t=4.0, episode_id=f"{group_id}/0", group_id=group_id, member=0, policy_version=0
    )
    replay = replay_log(MemoryLog(_with(log, opened, dispatched)), columnar=columnar)
    violations = replay.summary["invariant_violations"]
    assert any("dispatch after run_finished" in v for v in violations), violations


def test_simulate_ships_exactly_the_steps_asked_for(tmp_path: Path) -> None:
    """The default scenario used to ship batch 21 after `run_finished(steps)` at step 20."""
    log = tmp_path / "run.arrow"
    result = CliRunner().invoke(main, ["simulate", "--steps", "20", "--log", str(log)])
    assert result.exit_code == 0, result.output
    events = read_log(log)
    end = next(i for i, e in enumerate(events) if e.kind == "run_finished")
    shipped = [e.step for e in events if isinstance(e, BatchShipped)]
    assert shipped == list(range(1, 21))
    assert not [e for e in events[end:] if e.kind in ("group_opened", "batch_shipped")]
