"""Verify a log: re-decide it from its world events and compare every decided event.

A log records two kinds of facts: world events (what happened outside: completions,
failures, version updates, limit changes) and decided events (what the dispatcher and the
sink made of them). Verification feeds only the world events to a fresh `ReactionLoop`
running today's deciders and compares each event the loop appends with the recorded event
at the same seq, field by field (seq and `t` included). The first mismatch is the
divergence: the seq, what the deciders decide there, what the log holds there, and the
state just before it, which is what the decision was made from.

The recorded decided events are never applied, only compared, so one tampered decided
event fails verification at exactly its seq and nowhere before it.
"""

from __future__ import annotations

from collections import deque
from typing import Any

import attrs

from rolloutlog.core.config import ConfigError
from rolloutlog.core.digest import event_payload
from rolloutlog.core.errors import InconsistentLogError
from rolloutlog.core.loop import DISPATCHER, SINK, Decider, ReactionLoop
from rolloutlog.core.registry import DispatchRegistry, group_number
from rolloutlog.events.types import (
    WORLD_KINDS,
    EpisodeCompleted,
    EpisodeDispatched,
    EpisodeFailed,
    Event,
    RunStarted,
)
from rolloutlog.replay.fold import BAD_LOG_ERRORS, BadLog, fold_events
from rolloutlog.replay.source import LogSource
from rolloutlog.replay.state_view import relevant_state


@attrs.frozen
class Divergence:
    """The first seq where the log and today's deciders disagree."""

    seq: int
    expected: Event | None  # what the deciders append here; None: they had settled
    recorded: Event | None  # what the log holds here; None: the log ended
    state: dict[str, Any]  # the state just before `seq`, around the groups involved

    def describe(self) -> str:
        """One line for humans: the seq and both sides."""
        return (
            f"seq {self.seq}: expected {_shown(self.expected, 'nothing (the deciders settled)')}"
            f", recorded {_shown(self.recorded, 'nothing (the log ends)')}"
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "seq": self.seq,
            "expected": None if self.expected is None else event_payload(self.expected),
            "recorded": None if self.recorded is None else event_payload(self.recorded),
            "state": self.state,
        }


@attrs.frozen
class Verification:
    """The verdict on a log: every decided event matched, a divergence, or bad input."""

    events: int  # recorded events that matched before the verdict
    divergence: Divergence | None
    error: BadLog | None

    @property
    def ok(self) -> bool:
        return self.divergence is None and self.error is None


def _shown(event: Event | None, otherwise: str) -> str:
    return otherwise if event is None else repr(event)


class _Verifier:
    """The loop and the decided events it still owes the comparison."""

    def __init__(self, sink: Decider[Any], dispatcher: Decider[Any]) -> None:
        self.sink, self.dispatcher = sink, dispatcher
        self.loop: ReactionLoop | None = None
        self.owed: deque[Event] = deque()
        self.registry = DispatchRegistry()

    def check(self, recorded: Event) -> tuple[Event | None, bool]:
        """(the expected event at this seq, whether the recorded one matches it)."""
        if self.owed:
            expected = self.owed.popleft()
            return expected, expected == recorded
        if recorded.kind not in WORLD_KINDS:
            return None, False  # a decision the deciders did not make
        self.owed.extend(self._feed(recorded)[1:])
        return recorded, True

    def _feed(self, world: Event) -> list[Event]:
        loop = self.loop or self._start(world)
        if world.kind == "run_started" and world.seq != 0:
            raise InconsistentLogError(world.seq, world.kind, "a second run_started")
        if isinstance(world, EpisodeCompleted | EpisodeFailed):
            self._require_dispatched(world)
        appended = loop.feed(world)
        for event in appended:
            if event.kind == "group_opened":
                self.registry.opened()
            elif isinstance(event, EpisodeDispatched):
                self.registry.dispatched(group_number(event.group_id))
        return appended

    def _require_dispatched(self, arrival: EpisodeCompleted | EpisodeFailed) -> None:
        """The loop would take an unknown arrival for a late one; the log is inconsistent."""
        if not self.registry.knows(arrival.episode_id):
            raise InconsistentLogError(
                arrival.seq, arrival.kind, f"{arrival.episode_id} was never dispatched"
            )

    def _start(self, first: Event) -> ReactionLoop:
        if not isinstance(first, RunStarted) or first.seq != 0:
            raise InconsistentLogError(first.seq, first.kind, "a log must start with run_started")
        try:
            self.loop = ReactionLoop.from_run_started(
                first, sink=self.sink, dispatcher=self.dispatcher
            )
        except ConfigError as error:
            raise InconsistentLogError(first.seq, first.kind, str(error)) from error
        return self.loop


def verify_log(
    source: LogSource, *, sink: Decider[Any] = SINK, dispatcher: Decider[Any] = DISPATCHER
) -> Verification:
    """Re-decide `source` from its world events; the first mismatch is the divergence.

    `sink` and `dispatcher` default to today's deciders; pass others to check a log
    against a candidate implementation.
    """
    verifier = _Verifier(sink, dispatcher)
    matched = 0
    try:
        for recorded in source.events():
            if recorded.seq != matched:
                problem = f"seq gap: expected seq {matched}"
                raise InconsistentLogError(recorded.seq, recorded.kind, problem)
            expected, same = verifier.check(recorded)
            if not same:
                return _diverged(source, recorded.seq, expected, recorded, matched)
            matched += 1
    except BAD_LOG_ERRORS as error:
        return Verification(matched, None, error)
    if verifier.owed:
        return _diverged(source, matched, verifier.owed[0], None, matched)
    return Verification(matched, None, None)


def _diverged(
    source: LogSource, seq: int, expected: Event | None, recorded: Event | None, matched: int
) -> Verification:
    """Describe the state before `seq` from a second pass: the log agreed up to there."""
    before = fold_events(source.events(), check_invariants=False, stop_before=seq)
    events = [e for e in (expected, recorded) if e is not None]
    state = relevant_state(before.fold, events) if before.fold is not None else {}
    return Verification(matched, Divergence(seq, expected, recorded, state), None)
