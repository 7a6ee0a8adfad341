"""The reaction loop's guards on generated logs: it takes world events only, `run_started`
first and once, and its two bounds refuse exactly the reaction that passes them."""

from __future__ import annotations

import attrs
import pytest
from hypothesis import given
from hypothesis import strategies as st

from rolloutlog.core.config import ConfigError
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


@given(world_logs(max_steps=20), st.sampled_from(["both batch keys", "lag past bound"]))
def test_a_recorded_config_that_could_not_start_is_replayed_as_recorded(
    log: list[Event], fault: str
) -> None:
    """Another orchestrator may record a config rolloutlog would not start: replay takes it."""
    started = log[0]
    assert isinstance(started, RunStarted)
    config = dict(started.config)
    if fault == "both batch keys":
        config.update(batch_size=4, token_batch_size=100)
    else:
        config["target_lag"] = config["max_off_policy_steps"] + 1
    loop = ReactionLoop.from_run_started(attrs.evolve(started, config=config))
    assert loop.config.to_dict() == config
    assert loop.config.startup_problems()


@given(world_logs(max_steps=20), st.sampled_from(["group_size", "staleness", "tasks"]))
def test_a_recorded_config_with_a_bad_value_is_refused_as_recorded(
    log: list[Event], key: str
) -> None:
    started = log[0]
    assert isinstance(started, RunStarted)
    bad = attrs.evolve(started, config={**started.config, key: "nonsense"})
    with pytest.raises(ConfigError) as refused:
        ReactionLoop.from_run_started(bad)
    assert str(refused.value).startswith(f"run_started.config.{key}: must ")
