"""Known answers: worlds built so that each wait's causes hold by construction."""

from __future__ import annotations

from rolloutlog.core.config import RunConfig
from rolloutlog.replay.explain import explain_log
from rolloutlog.replay.explain_state import CAUSES
from rolloutlog.replay.source import MemoryLog
from tests.explain.tiny_world import TinyWorld


def _only(causes: dict[str, float], **expected: float) -> dict[str, float]:
    """`causes` as a test reads them: every cause, the ones not named at 0."""
    return {cause: expected.get(cause, 0.0) for cause in CAUSES}


def test_one_straggler_holds_batch_7_for_exactly_4_seconds() -> None:
    # One group a batch, one group in flight at a time: g7 goes out at t=6 when batch 6
    # ships; g7/0 is back at 7, g7/1 (the straggler) at 11. Later groups take 6 s, so
    # nothing else can fill batch 7 first. The trainer is free at 6.5 (batch 6 trained).
    config = RunConfig(group_size=2, batch_size=2, max_inflight=2)

    def duration(episode_id: str) -> float:
        group = int(episode_id[1:].partition("/")[0])
        return 5.0 if episode_id == "g7/1" else 6.0 if group > 7 else 1.0

    steps = explain_log(MemoryLog(TinyWorld(config, duration).run(8))).steps
    batch_7 = steps[6]
    assert (batch_7.step, batch_7.shipped_at, batch_7.wait_from) == (7, 11.0, 6.5)
    assert batch_7.causes == _only(batch_7.causes, straggler=4.0, fill=0.5)
    assert batch_7.wait == 4.5
    # the batches before it waited 0.5 s each for their group (1 s out, 0.5 s training)
    assert [s.causes["fill"] for s in steps[1:6]] == [0.5] * 5
    assert all(s.causes["straggler"] == 0 for s in steps[:6])


def test_a_weight_update_of_2_5_seconds_pauses_every_step() -> None:
    # Four groups in flight, two a batch, every rollout 1 s: the next batch is always
    # shipped before the update ends, so every wait after the first is the update alone.
    config = RunConfig(group_size=2, batch_size=4, max_inflight=8)
    world = TinyWorld(config, lambda episode_id: 1.0, train_s=1.0, update_s=lambda step: 2.5)
    steps = explain_log(MemoryLog(world.run(6))).steps
    assert steps[0].causes == _only(steps[0].causes, fill=1.0)
    for step in steps[1:]:
        assert step.causes == _only(step.causes, pause=2.5), step


def test_a_gate_closed_while_the_trainer_trains_is_charged_for_the_late_group() -> None:
    # Training takes 10 s, rollouts 1 s, the update 0.5 s, target_lag 0, two permits, one
    # group a batch. A group whose first member went out before the batch before it
    # shipped is back in 1 s and waits for the ship hold: that step waits for the update
    # alone. Otherwise the gate holds the group back (both permits free) until the version
    # is announced, and after the update the trainer waits 0.5 s more for it: the gate's.
    # The dispatcher refills a permit before the sink ships, so the two alternate.
    config = RunConfig(
        group_size=2, batch_size=2, max_inflight=2, max_off_policy_steps=1, target_lag=0
    )
    world = TinyWorld(config, lambda episode_id: 1.0, train_s=10.0, update_s=lambda step: 0.5)
    steps = explain_log(MemoryLog(world.run(7))).steps
    assert steps[0].causes == _only(steps[0].causes, fill=1.0)
    for step in steps[1:]:
        gated = 0.5 if step.step % 2 else 0.0
        assert step.causes == _only(step.causes, pause=0.5, gate=gated), step
