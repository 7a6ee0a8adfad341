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
from rolloutlog.core.presets import rules_for
from rolloutlog.events.schema import SCHEMA_VERSION
from rolloutlog.events.types import EpisodesCancelled, Event, RunStarted
from rolloutlog.replay.fold import fold_events
from rolloutlog.testing.strategies import Tampered, tampered_logs, world_logs


def _fold(decider: Decider[Any], events: list[Event]) -> tuple[Any, int | None]:
    """Evolve `decider` over `events`: its state, and the seq of the event it refused."""
    config = RunConfig.from_mapping(events[0].config)  # type: ignore[attr-defined]
    state, rules = decider.initial_state(config), rules_for(config)
    for event in events:
        try:
            state = decider.evolve(rules, state, event)
        except InconsistentLogError as error:
            # the refusal names the event it refused and says what is wrong with it
            assert (error.seq, error.kind) == (event.seq, event.kind), error
            assert isinstance(error.problem, str) and error.problem, error
            return state, event.seq
    return state, None


@given(tampered_logs(decided_only=False))
def test_a_refused_event_leaves_each_decider_as_it_was(tampered: Tampered) -> None:
    """Whatever a decider refuses, its state is exactly the state of the events before."""
    for decider in (SINK, DISPATCHER):
        state, refused = _fold(decider, tampered.log)
        if refused is not None:
            assert state == _fold(decider, tampered.log[:refused])[0], decider.name


@given(tampered_logs(decided_only=False))
def test_a_refused_event_leaves_the_replay_fold_as_it_was(tampered: Tampered) -> None:
    """Replay's fold checks both deciders (and the log) before anything is written."""
    result = fold_events(tampered.log)
    if result.error is None or result.fold is None:
        return
    before = fold_events(tampered.log, stop_before=result.error.seq).fold
    assert before is not None
    fold = result.fold
    assert (fold.sink_state, fold.dispatcher_state) == (before.sink_state, before.dispatcher_state)
    assert (fold.digest, fold.next_seq) == (before.digest, before.next_seq)
    assert fold.summary() == before.summary()


@given(world_logs(max_steps=60))
def test_decide_never_writes(log: list[Event]) -> None:
    """Two folds of the same log, one asking both deciders to decide after every event:
    their states never differ."""
    config = RunConfig.from_mapping(log[0].config)  # type: ignore[attr-defined]
    for decider in (SINK, DISPATCHER):
        asked, untouched = decider.initial_state(config), decider.initial_state(config)
        rules = rules_for(config)
        for event in log:
            asked = decider.evolve(rules, asked, event)
            untouched = decider.evolve(rules, untouched, event)
            decider.decide(rules, asked, event)
            assert asked == untouched, f"{decider.name} wrote in decide at seq {event.seq}"


def test_a_cancellation_naming_one_unknown_member_cancels_none() -> None:
    """The case from the review, pinned: neither decider keeps `g1/0` cancelled."""
    config = RunConfig(group_size=8, max_inflight=8)
    loop = ReactionLoop(config)
    loop.feed(
        RunStarted(
            t=0.0, config=config.to_dict(), seed=0, schema_version=SCHEMA_VERSION, code_version="x"
        )
    )
    states = copy.deepcopy((loop.sink_state, loop.dispatcher_state))
    bad = EpisodesCancelled(
        t=1.0, seq=99, group_id="g1", episode_ids=("g1/0", "g1/9"), unscheduled=0, reason="stale"
    )
    for decider, state in ((SINK, loop.sink_state), (DISPATCHER, loop.dispatcher_state)):
        try:
            decider.evolve(loop.rules, state, bad)
        except InconsistentLogError as error:
            assert "g1/9" in str(error) and error.seq == 99
        else:
            raise AssertionError(f"{decider.name} accepted a cancellation of g1/9")
    assert (loop.sink_state, loop.dispatcher_state) == states
