"""The loop takes a world event whole or not at all, on generated logs.

A world event the deciders refuse changes nothing and the loop goes on; a reaction that
fails after its world event was applied (a bound, an observer's violation) leaves part of
a reaction in the states, so every later `feed` is refused, naming where it broke.
"""

from __future__ import annotations

from typing import Any

import attrs
import pytest
from hypothesis import given

from rolloutlog.core.account import InvariantViolation
from rolloutlog.core.errors import InconsistentLogError, LoopBoundError, LoopFailedError
from rolloutlog.core.loop import ReactionLoop
from rolloutlog.events.types import UNSEQUENCED, WORLD_KINDS, Event, RunResumed, RunStarted
from rolloutlog.testing.strategies import world_logs


def _world(log: list[Event]) -> list[Event]:
    return [event for event in log if event.kind in WORLD_KINDS]


def _loop(log: list[Event], **options: Any) -> ReactionLoop:
    started = log[0]
    assert isinstance(started, RunStarted)
    return ReactionLoop.from_run_started(started, **options)


@given(world_logs(max_steps=30))
def test_a_loop_past_its_bound_refuses_the_next_event(log: list[Event]) -> None:
    world = _world(log)
    loop = _loop(log, max_depth=1)
    failed_at = None
    for event in world:
        try:
            loop.feed(event)
        except LoopBoundError:
            failed_at = event.seq
            break
    if failed_at is None or failed_at == world[-1].seq:
        return  # nothing nested, or the last event did: nothing left to feed
    following = world[[e.seq for e in world].index(failed_at) + 1]
    with pytest.raises(LoopFailedError, match=rf"the reaction to seq {failed_at} \("):
        loop.feed(following)


class _Tripwire:
    """An observer that raises at one seq, as the account does at a violation."""

    def __init__(self, seq: int) -> None:
        self.seq = seq

    def observe(self, event: Event, loop: ReactionLoop) -> None:
        if event.seq == self.seq:
            raise InvariantViolation(f"planted at seq {event.seq}")

    def settled(self, world_event: Event, loop: ReactionLoop) -> None:
        """Nothing to check once a world event settles."""


@given(world_logs(max_steps=30))
def test_a_violation_mid_reaction_refuses_the_next_event(log: list[Event]) -> None:
    decided = [e for e in log if e.kind not in WORLD_KINDS]
    world = _world(log)
    later = [w for w in world if decided and w.seq > decided[0].seq]
    if not later:
        return
    loop = _loop(log, observers=(_Tripwire(decided[0].seq),))
    with pytest.raises(InvariantViolation):
        for event in world:
            loop.feed(event)
    with pytest.raises(LoopFailedError, match=r"InvariantViolation: planted at seq"):
        loop.feed(later[0])


@given(world_logs(max_steps=30))
def test_a_refused_world_event_changes_nothing_and_the_loop_goes_on(log: list[Event]) -> None:
    world = _world(log)
    loop = _loop(log)
    loop.feed(world[0])
    before = loop.next_seq
    bogus = RunResumed(t=world[0].t, reason="test", episode_ids=("g999/0",), version=0)
    with pytest.raises(InconsistentLogError, match=rf"^seq {before} \(run_resumed\)"):
        loop.feed(bogus, fresh=True)
    assert bogus.seq == UNSEQUENCED  # handed back as it was handed over
    numbered = attrs.evolve(bogus, seq=before)  # one that carries its seq keeps it
    with pytest.raises(InconsistentLogError, match=rf"^seq {before} \(run_resumed\)"):
        loop.feed(numbered, fresh=True)
    assert numbered.seq == before
    assert loop.next_seq == before
    appended = [event for w in world[1:] for event in loop.feed(w)]
    assert appended == log[before:]  # the rest of the log, as if nothing had been refused
