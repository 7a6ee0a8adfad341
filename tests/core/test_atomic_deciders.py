"""Atomic, read-only deciders: a refused event changes nothing, and `decide` never writes.

Found by review: cancelling `("g1/0", "g1/7")` removed `g1/0` and then raised on `g1/7`,
leaving the state half applied; replay had to fold the log a third time to report it.
"""

from __future__ import annotations

import copy
from typing import Any

from hypothesis import given

from rolloutlog.core.config import RunConfig
from rolloutlog.core.errors import InconsistentLogError
from rolloutlog.core.loop import DISPATCHER, SINK, Decider, ReactionLoop
from rolloutlog.events.types import EpisodesCancelled, Event, RunStarted
from rolloutlog.replay.fold import LogFold
from rolloutlog.testing.strategies import Tampered, tampered_logs, world_logs


def _fold_until_refused(decider: Decider[Any], log: list[Event]) -> int | None:
    """Evolve `decider` over `log`; at the first refused event, check nothing was written."""
    state = decider.initial_state(RunConfig.from_mapping(log[0].config))  # type: ignore[attr-defined]
    for event in log:
        before = copy.deepcopy(state)
        try:
            state = decider.evolve(state, event)
        except InconsistentLogError:
            assert state == before, f"{decider.name} half applied seq {event.seq}"
            return event.seq
    return None


@given(tampered_logs(decided_only=False))
def test_a_refused_event_leaves_each_decider_as_it_was(tampered: Tampered) -> None:
    for decider in (SINK, DISPATCHER):
        _fold_until_refused(decider, tampered.log)


@given(tampered_logs(decided_only=False))
def test_a_refused_event_leaves_the_replay_fold_as_it_was(tampered: Tampered) -> None:
    fold = LogFold.from_run_started(tampered.log[0])
    for event in tampered.log:
        before = copy.deepcopy((fold.sink_state, fold.dispatcher_state, fold.digest))
        summary = fold.summary()
        try:
            fold.apply(event)
        except InconsistentLogError:
            assert (fold.sink_state, fold.dispatcher_state, fold.digest) == before
            assert fold.summary() == summary and fold.next_seq == event.seq
            return


@given(world_logs(max_steps=60))
def test_decide_never_writes(log: list[Event]) -> None:
    config = RunConfig.from_mapping(log[0].config)  # type: ignore[attr-defined]
    states = [SINK.initial_state(config), DISPATCHER.initial_state(config)]
    for event in log:
        for index, decider in enumerate((SINK, DISPATCHER)):
            states[index] = decider.evolve(states[index], event)
            before = copy.deepcopy(states[index])
            decider.decide(states[index], event)
            assert states[index] == before, f"{decider.name} wrote in decide at seq {event.seq}"


def test_a_cancellation_naming_one_unknown_member_cancels_none() -> None:
    """The case from the review, pinned: neither decider keeps `g1/0` cancelled."""
    config = RunConfig(group_size=8, max_inflight=8)
    loop = ReactionLoop(config)
    loop.feed(
        RunStarted(t=0.0, config=config.to_dict(), seed=0, schema_version=1, code_version="x")
    )
    states = copy.deepcopy((loop.sink_state, loop.dispatcher_state))
    bad = EpisodesCancelled(
        t=1.0, seq=99, group_id="g1", episode_ids=("g1/0", "g1/9"), unscheduled=0, reason="stale"
    )
    for decider, state in ((SINK, loop.sink_state), (DISPATCHER, loop.dispatcher_state)):
        try:
            decider.evolve(state, bad)
        except InconsistentLogError as error:
            assert "g1/9" in str(error) and error.seq == 99
        else:
            raise AssertionError(f"{decider.name} accepted a cancellation of g1/9")
    assert (loop.sink_state, loop.dispatcher_state) == states
