"""Duplicate and post-finish arrivals: recorded and ignored, like late ones (docs/contract.md).

A second completion or failure of one episode, or any arrival after `run_finished`, is a
fact the log keeps; it frees no permit, never reaches the sink and is never counted twice.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given

from rolloutlog.core.account import Account
from rolloutlog.core.config import RunConfig
from rolloutlog.core.errors import InconsistentLogError
from rolloutlog.core.loop import DISPATCHER, ReactionLoop
from rolloutlog.events.schema import SCHEMA_VERSION
from rolloutlog.events.types import (
    SINK_KINDS,
    WORLD_KINDS,
    EpisodeCompleted,
    EpisodeFailed,
    Event,
    GroupScored,
    RunFinished,
    RunStarted,
)
from rolloutlog.testing.equivalence import PLAIN_FOLD
from rolloutlog.testing.strategies import world_logs


def _loop() -> tuple[ReactionLoop, Account]:
    config = RunConfig(group_size=2, max_inflight=2, batch_size=2)
    checker = Account(config)
    loop = ReactionLoop(config, observers=(checker,))
    loop.feed(
        RunStarted(
            t=0.0, config=config.to_dict(), seed=0, schema_version=SCHEMA_VERSION, code_version="t"
        )
    )
    return loop, checker


def _done(t: float, episode_id: str) -> EpisodeCompleted:
    return EpisodeCompleted(
        t=t, episode_id=episode_id, reward=1.0, prompt_tokens=1, completion_tokens=1
    )


def test_a_second_arrival_of_one_episode_is_recorded_and_ignored() -> None:
    loop, checker = _loop()
    first = loop.feed(_done(1.0, "g1/0"))
    assert [e.kind for e in first] == ["episode_completed", "group_opened", "episode_dispatched"]
    for again in (_done(2.0, "g1/0"), EpisodeFailed(t=3.0, episode_id="g1/0", error="retry")):
        assert [e.kind for e in loop.feed(again)] == [again.kind]
    assert checker.run.late == 2
    assert len(loop.dispatcher_state.inflight) == 2  # g1/1 and g2/0: no permit freed twice
    assert loop.sink_state.groups["g1"].arrived[0].reward == 1.0  # the first arrival stands


def test_arrivals_after_run_finished_are_recorded_and_ignored() -> None:
    loop, checker = _loop()
    finished = loop.feed(RunFinished(t=1.0, reason="steps"))
    assert [e.kind for e in finished] == ["run_finished", "episodes_cancelled", "group_scored"]
    for stray in (_done(2.0, "g1/0"), EpisodeFailed(t=3.0, episode_id="g1/1", error="x")):
        assert [e.kind for e in loop.feed(stray)] == [stray.kind]
    assert checker.run.late == 2
    assert not loop.dispatcher_state.inflight and not loop.sink_state.groups


def _stray_reactions(log: list[Event]) -> list[list[Event]]:
    """The reactions (a world event and what it set off) to arrivals of episodes that were
    not in flight: late, duplicate or after run_finished."""
    reactions: list[list[Event]] = []
    for event in log:
        if event.kind in WORLD_KINDS:
            reactions.append([])
        reactions[-1].append(event)
    inflight: set[str] = set()
    strays = []
    for reaction in reactions:
        world: Any = reaction[0]
        if world.kind in ("episode_completed", "episode_failed"):
            if world.episode_id not in inflight:
                strays.append(reaction)
            inflight.discard(world.episode_id)
        for event in reaction:
            if event.kind == "episode_dispatched":
                inflight.add(event.episode_id)  # type: ignore[union-attr]
            elif event.kind == "episodes_cancelled":
                inflight.difference_update(event.episode_ids)  # type: ignore[union-attr]
    return strays


@given(world_logs())
def test_stray_arrivals_never_reach_the_sink_and_replay_counts_each_once(
    log: list[Event],
) -> None:
    smoothing = log[0].config["admission_smoothing"]  # type: ignore[union-attr]
    strays = _stray_reactions(log)
    for reaction in strays:
        decided = reaction[1:]
        assert not [e for e in decided if e.kind in SINK_KINDS], reaction
        assert smoothing or not decided, reaction  # a new smoothing window may admit more
    summary = PLAIN_FOLD(log).summary
    assert summary is not None
    assert summary["episodes_late"] == len(strays)
    assert summary["invariant_violations"] == []


def test_a_group_scored_while_the_dispatcher_owes_members_is_refused_by_name() -> None:
    """Regression: a log whose cancellation was lost scores a group the dispatcher still
    holds; a late arrival then crashed capacity admission's ledger with a KeyError. The
    dispatcher now refuses the `group_scored` itself, naming its seq."""
    config = RunConfig(group_size=2, max_inflight=2, batch_size=2, admission="capacity")
    loop = ReactionLoop(config)
    start = RunStarted(
        t=0.0, config=config.to_dict(), seed=0, schema_version=SCHEMA_VERSION, code_version="t"
    )
    log = loop.feed(start) + loop.feed(_done(1.0, "g1/0"))  # g1/1 stays in flight
    state, rules = DISPATCHER.initial_state(config), loop.rules
    for event in log:
        state = DISPATCHER.evolve(rules, state, event)
    scored = GroupScored(
        t=2.0, seq=99, group_id="g1", episode_ids=("g1/0",), advantages=(0.0,), admitted=True
    )
    with pytest.raises(InconsistentLogError, match=r"seq 99 .*g1 scored while"):
        DISPATCHER.evolve(rules, state, scored)
