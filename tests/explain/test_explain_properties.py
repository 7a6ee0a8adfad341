"""Properties over scripted logs (restarted ones too): each wait's causes add up to it and
none is negative; the waits are the trainer's idle and update time of the timeline; any
step and any episode can be told."""

from __future__ import annotations

import math

from hypothesis import given
from hypothesis import strategies as st

from rolloutlog.events.schema import iter_batch_columns
from rolloutlog.events.types import Event
from rolloutlog.replay.explain import explain_log
from rolloutlog.replay.explain_story import Story
from rolloutlog.replay.source import MemoryLog
from rolloutlog.replay.spans import read_spans
from rolloutlog.testing.strategies import world_logs


@given(st.one_of(world_logs(), world_logs(restarts=True)))
def test_the_causes_add_up_to_each_wait_and_none_is_negative(log: list[Event]) -> None:
    explanation = explain_log(MemoryLog(log))
    for step in explanation.steps:
        assert step.wait >= 0 and step.wasted_rollout_s >= 0, step
        assert all(seconds >= 0 for seconds in step.causes.values()), step
        assert math.isclose(math.fsum(step.causes.values()), step.wait, abs_tol=1e-9), step
    shipped = [e.step for e in log if e.kind == "batch_shipped"]
    assert [s.step for s in explanation.steps] == shipped[: len(explanation.steps)]


@given(world_logs())
def test_the_waits_are_the_timelines_idle_and_update_time(log: list[Event]) -> None:
    spans = read_spans(MemoryLog(log))
    explanation = explain_log(MemoryLog(log))
    waiting = math.fsum(end - start for start, end, code in spans.trainer if code != 0)
    assert math.isclose(explanation.total_wait() + explanation.tail_s, waiting, abs_tol=1e-6)


@given(world_logs(), st.data())
def test_any_step_and_any_episode_can_be_told(log: list[Event], data: st.DataObject) -> None:
    explanation = explain_log(MemoryLog(log))
    if explanation.steps:
        step = data.draw(st.sampled_from(explanation.steps))
        traced = explain_log(MemoryLog(log), trace_step=step.step)
        spans = math.fsum(end - start for start, end, _, _ in traced.spans)
        assert math.isclose(spans, step.wait, abs_tol=1e-9)
        Story(step=step.step).read(iter_batch_columns(MemoryLog(log).batches()))
    dispatched = [e.episode_id for e in log if e.kind == "episode_dispatched"]
    if dispatched:
        story = Story(episode_id=data.draw(st.sampled_from(dispatched)))
        lines = story.read(iter_batch_columns(MemoryLog(log).batches()))
        assert story.seen and lines
