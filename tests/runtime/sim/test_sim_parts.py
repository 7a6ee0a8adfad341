"""The simulator's parts on their own: streams, the clock, inference, the trainer, the world."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from rolloutlog.runtime.sim.clock import Entry, EventQueue
from rolloutlog.runtime.sim.inference import Inference
from rolloutlog.runtime.sim.metrics import Series
from rolloutlog.runtime.sim.streams import RandomStreams, named_stream, stream_key
from rolloutlog.runtime.sim.trainer import Trainer
from rolloutlog.runtime.sim.world import EpisodePlan, Task, WorldModel
from rolloutlog.runtime.sim.world_config import WorldConfig


def test_streams_are_independent_of_each_other() -> None:
    streams = RandomStreams(5)
    streams["durations"].random(1000)  # drawing more from one stream ...
    alone = named_stream(5, "failures").random(4)
    assert np.array_equal(streams["failures"].random(4), alone)  # ... leaves the others as is
    assert not np.array_equal(
        named_stream(5, "failures").random(4), named_stream(6, "failures").random(4)
    )
    assert stream_key("tasks") == 0x50586597  # CRC-32 of the name: stable across versions
    with pytest.raises(KeyError, match="no random stream"):
        streams["weather"]


def test_the_clock_orders_by_time_then_by_scheduling_and_skips_cancelled() -> None:
    queue = EventQueue()
    late = queue.push(2.0, "late")
    queue.push(1.0, "first")
    queue.push(1.0, "second")
    queue.cancel(late)
    queue.push(3.0, "last")
    assert [queue.pop().item for _ in range(3)] == ["first", "second", "last"]  # type: ignore[union-attr]
    assert queue.pop() is None
    with pytest.raises(ValueError, match="already cancelled"):
        queue.cancel(late)


def test_the_clock_compacts_dead_entries() -> None:
    queue = EventQueue()
    entries = [queue.push(float(i), i) for i in range(2000)]
    for entry in entries[:1900]:
        queue.cancel(entry)
    assert len(queue) == 100
    assert queue.entries() <= 2 * 100 + 256
    assert [queue.pop().item for _ in range(100)] == list(range(1900, 2000))  # type: ignore[union-attr]


@given(
    st.lists(
        st.tuples(st.sampled_from(["push", "move", "pop"]), st.integers(0, 20), st.integers(0, 9)),
        max_size=300,
    )
)
def test_moving_an_entry_is_cancelling_it_and_pushing_its_item(
    steps: list[tuple[str, int, int]],
) -> None:
    """`move` keeps an earlier place for an entry moved later: what comes out, and in
    which order among equal times, is what `cancel` and `push` give."""
    moved, pushed = EventQueue(), EventQueue()
    live: dict[int, tuple[Entry, Entry]] = {}  # item -> its entry in each queue
    out: tuple[list[object], list[object]] = ([], [])
    for n, (op, t, key) in enumerate(steps):
        if op == "push" or (op == "move" and key not in live):
            live[n] = (moved.push(float(t), n), pushed.push(float(t), n))
        elif op == "move":
            entry, twin = live[key]
            moved.move(entry, float(t))
            pushed.cancel(twin)
            live[key] = (entry, pushed.push(float(t), key))
        for queue, seen in zip((moved, pushed), out, strict=True):
            if op == "pop" and (entry := queue.pop()) is not None:
                seen.append((entry.t, entry.item))
                live.pop(entry.item, None)  # type: ignore[call-overload]
    for queue, seen in zip((moved, pushed), out, strict=True):
        while (entry := queue.pop()) is not None:
            seen.append((entry.t, entry.item))
    assert out[0] == out[1]
    assert len(moved) == len(pushed) == 0


def test_a_series_stays_bounded_and_keeps_its_start() -> None:
    series = Series(max_points=16)
    for i in range(10_000):
        series.add(float(i), float(i))
    assert 8 <= len(series.points) <= 16
    assert series.points[0] == (0.0, 0.0)
    assert [t for t, _ in series.points] == sorted(t for t, _ in series.points)


def _plan(work_s: float, late: bool = False) -> EpisodePlan:
    return EpisodePlan(
        task=Task(100.0, 0.5),
        train=True,
        work_s=work_s,
        failed=False,
        reward=1.0,
        completion_tokens=100,
        late_if_cancelled=late,
    )


def test_a_weight_update_pauses_inference_and_cancellation_counts_work_done() -> None:
    queue = EventQueue()
    inference = Inference(queue, pause_on_update=True, prompt_tokens=10)
    inference.start(0.0, "g1/0", _plan(10.0))
    inference.start(0.0, "g1/1", _plan(10.0))
    inference.pause(4.0, 5.0)  # paused from t=4 to t=9: 4 s done, 6 s to go
    inference.start(5.0, "g1/2", _plan(1.0))  # dispatched during the pause: starts at 9
    assert inference.cancel(6.0, "g1/0", "stale") == pytest.approx(4.0)
    entry = queue.pop()
    assert (
        entry is not None and entry.item == ("episode", "g1/2") and entry.t == pytest.approx(10.0)
    )
    entry = queue.pop()
    assert (
        entry is not None and entry.item == ("episode", "g1/1") and entry.t == pytest.approx(15.0)
    )


def test_a_cancelled_episode_that_loses_the_race_still_arrives() -> None:
    queue = EventQueue()
    inference = Inference(queue, pause_on_update=False, prompt_tokens=10)
    inference.start(0.0, "g1/0", _plan(3.0, late=True))
    assert inference.cancel(1.0, "g1/0", "overload") is None
    entry = queue.pop()
    assert entry is not None
    flight, event = inference.arrive(entry.t, "g1/0")
    assert flight.cancelled == "overload"
    assert event.kind == "episode_completed"


def test_the_trainer_skips_a_publish_only_when_the_next_batch_waits() -> None:
    world = WorldConfig(
        train_step_s=10.0, weight_update_s=2.0, version_skip_rate=1.0, trainer_jitter=0.0
    )
    queue = EventQueue()
    trainer = Trainer(world, np.random.default_rng(0), queue)
    trainer.shipped(0.0, 1, 8)
    trainer.shipped(1.0, 2, 8)
    assert trainer.trained(10.0, 1) is None  # batch 2 waits: v1 is skipped
    publish = trainer.trained(20.0, 2)  # nothing waits: publish, whatever the draw
    assert publish is not None and publish.version == 2
    trainer.live(22.0, 2)
    assert trainer.phase == "idle"
    assert trainer.busy_seconds(30.0) == pytest.approx(22.0)


def test_members_get_the_same_draws_whatever_the_dispatch_order() -> None:
    def plans(order: list[tuple[str, int]]) -> dict[tuple[str, int], EpisodePlan]:
        world = WorldModel(WorldConfig(failure_rate=0.3), 16, RandomStreams(3))
        world.open_group("g1", "t1", 3, train=True)
        world.open_group("g2", "t2", 3, train=True)
        return {(g, m): world.plan(g, m, inflight=0, max_inflight=8) for g, m in order}

    forward = [(g, m) for g in ("g1", "g2") for m in range(3)]
    assert plans(forward) == plans(list(reversed(forward)))


def test_the_world_frees_a_group_once_every_member_is_settled() -> None:
    world = WorldModel(WorldConfig(), 16, RandomStreams(0))
    world.open_group("g1", "t1", 3, train=True)
    world.plan("g1", 0, inflight=0, max_inflight=4)
    world.unscheduled_cancelled("g1", 2)
    assert world.open_groups() == 0
    with pytest.raises(KeyError, match="not open"):
        world.plan("g1", 1, inflight=0, max_inflight=4)
