"""The reaction loop's guards on generated logs: it takes world events only, `run_started`
first and once, and its two bounds refuse exactly the reaction that passes them."""

from __future__ import annotations

import pytest
from hypothesis import given

from rolloutlog.core.errors import LoopBoundError
from rolloutlog.core.loop import ReactionLoop
from rolloutlog.events.types import WORLD_KINDS, Event, RunStarted
from rolloutlog.testing.strategies import world_logs


def _reactions(log: list[Event]) -> list[tuple[Event, int]]:
    """Each world event with the size of its reaction (itself and what it set off)."""
    sizes: list[tuple[Event, int]] = []
    for event in log:
        if event.kind in WORLD_KINDS:
            sizes.append((event, 1))
        else:
            world, size = sizes[-1]
            sizes[-1] = (world, size + 1)
    return sizes


def _replay(log: list[Event], **bounds: int) -> None:
    started = log[0]
    if not isinstance(started, RunStarted):
        raise ValueError("a log starts with run_started")
    loop = ReactionLoop.from_run_started(started, **bounds)
    for event in log:
        if event.kind in WORLD_KINDS:
            loop.feed(event)


@given(world_logs(max_steps=60))
def test_the_reaction_bound_refuses_exactly_the_largest_reaction(log: list[Event]) -> None:
    reactions = _reactions(log)
    largest = max(size for _, size in reactions)
    _replay(log, max_reactions=largest)
    first, _ = next((world, size) for world, size in reactions if size == largest)
    with pytest.raises(LoopBoundError) as refused:
        _replay(log, max_reactions=largest - 1)
    assert str(refused.value) == (
        f"world event seq {first.seq} ({first.kind}) set off more than {largest - 1} events: "
        "the deciders do not settle"
    )


@given(world_logs(max_steps=60))
def test_a_depth_of_one_refuses_the_first_world_event_that_sets_off_a_decision(
    log: list[Event],
) -> None:
    reacting = [world for world, size in _reactions(log) if size > 1]
    if not reacting:  # no world event set off a decision
        _replay(log, max_depth=1)
        return
    with pytest.raises(LoopBoundError) as refused:
        _replay(log, max_depth=1)
    assert str(refused.value) == f"reactions to seq {reacting[0].seq} nest deeper than 1"


@given(world_logs(max_steps=20))
def test_the_loop_takes_world_events_and_run_started_only_first(log: list[Event]) -> None:
    started = log[0]
    assert isinstance(started, RunStarted)
    decided = next(event for event in log if event.kind not in WORLD_KINDS)
    later_world = next(event for event in log[1:] if event.kind in WORLD_KINDS)
    loop = ReactionLoop.from_run_started(started)
    with pytest.raises(ValueError, match=r"^run_started must be the first event of a log"):
        loop.feed(later_world)
    loop.feed(started)
    after_start = loop.next_seq
    with pytest.raises(ValueError, match=r"^run_started must be the first event of a log"):
        loop.feed(started)
    with pytest.raises(
        ValueError, match=f"^feed takes world events; {decided.kind} is decided by the deciders$"
    ):
        loop.feed(decided)
    assert after_start == _reactions(log)[0][1]
    assert loop.next_seq == after_start  # the refused events appended nothing
