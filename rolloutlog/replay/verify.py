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

import json
from collections.abc import Iterable, Iterator
from typing import Any

import attrs

from rolloutlog.core.config import ConfigError, RunConfig
from rolloutlog.core.digest import event_payload
from rolloutlog.core.errors import InconsistentLogError
from rolloutlog.core.loop import DISPATCHER, SINK, Decider, ReactionLoop
from rolloutlog.core.redecide import redecide
from rolloutlog.core.registry import DispatchRegistry, group_number
from rolloutlog.core.sink import SinkState
from rolloutlog.core.state import DispatcherState
from rolloutlog.events.errors import EventError, LogError
from rolloutlog.events.types import (
    BatchShipped,
    EpisodeCompleted,
    EpisodeDispatched,
    EpisodeDropped,
    EpisodeFailed,
    EpisodesCancelled,
    Event,
    GroupOpened,
    RunFinished,
    RunStarted,
    VersionPending,
)
from rolloutlog.events.validate import t_order_problem
from rolloutlog.replay.fold import BAD_LOG_ERRORS, BadLog, fold_events
from rolloutlog.replay.source import LogFile, LogSource
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


class Verifier:
    """Refuses what the loop cannot tell from a late arrival, and starts the loop."""

    def __init__(self, sink: Decider[SinkState], dispatcher: Decider[DispatcherState]) -> None:
        self.sink, self.dispatcher = sink, dispatcher
        self.registry = DispatchRegistry()

    def start(self, first: RunStarted) -> ReactionLoop:
        try:
            return ReactionLoop.from_run_started(first, sink=self.sink, dispatcher=self.dispatcher)
        except ConfigError as error:
            raise InconsistentLogError(first.seq, first.kind, str(error)) from error

    def matched(self, event: Event, started: bool) -> None:
        """Keep the registry from the events that matched; refuse a bogus arrival before
        the loop is fed it (it would take one never dispatched for a late one)."""
        if isinstance(event, EpisodeCompleted | EpisodeFailed) and started:
            if not self.registry.knows(event.episode_id):
                raise InconsistentLogError(
                    event.seq, event.kind, f"{event.episode_id} was never dispatched"
                )
        elif event.kind == "group_opened":
            self.registry.opened()
        elif isinstance(event, EpisodeDispatched):
            self.registry.dispatched(group_number(event.group_id))


def verify_log(
    source: LogSource,
    *,
    sink: Decider[SinkState] = SINK,
    dispatcher: Decider[DispatcherState] = DISPATCHER,
) -> Verification:
    """Re-decide `source` from its world events; the first mismatch is the divergence.

    `sink` and `dispatcher` default to today's deciders; pass others to check a log
    against a candidate implementation.
    """
    verifier = Verifier(sink, dispatcher)
    matched = 0
    redecision = redecide(without_gaps(source.events()), start=verifier.start)
    try:
        for recorded, expected in redecision:
            if recorded is None or expected != recorded:
                seq = matched if recorded is None else recorded.seq
                return _diverged(source, seq, expected, recorded, matched)
            verifier.matched(recorded, redecision.loop is not None)
            matched += 1
    except BAD_LOG_ERRORS as error:
        return Verification(matched, None, error)
    return Verification(matched, None, None)


def without_gaps(events: Iterable[Event]) -> Iterator[Event]:
    """The events in order, refusing the first whose seq is not the next one, or whose `t`
    is before the previous event's (the deciders never read `t`, so re-deciding alone would
    pass a log whose world events and decisions went back in time together)."""
    previous_t = 0.0
    for expected_seq, event in enumerate(events):
        if event.seq != expected_seq:
            problem = f"seq gap: expected seq {expected_seq}"
            raise InconsistentLogError(event.seq, event.kind, problem)
        went_back = t_order_problem(previous_t, event.t)
        if went_back is not None:
            raise InconsistentLogError(event.seq, event.kind, f"t {went_back}")
        previous_t = event.t
        yield event


def _diverged(
    source: LogSource, seq: int, expected: Event | None, recorded: Event | None, matched: int
) -> Verification:
    """Describe the state before `seq` from a second pass: the log agreed up to there."""
    before = fold_events(source.events(), check_invariants=False, stop_before=seq)
    events = [e for e in (expected, recorded) if e is not None]
    state = relevant_state(before.fold, events) if before.fold is not None else {}
    return Verification(matched, Divergence(seq, expected, recorded, state), None)


# --- a log another stack's run was imported into -----------------------------------------

IMPORT_NOTE = "import"  # the note an importer leaves (rolloutlog.importers)
IMPORT_UNCHECKED = (
    "not checked: when and in which order it dispatched, scored and cut (the import "
    "reconstructed them: the run's files do not say), so no preset's decisions can be "
    "compared one by one"
)


@attrs.frozen
class ImportCheck:
    """What `check_import` found: the facts it checked, and each that does not hold."""

    checked: int  # stale cancellations, drops and batches checked
    problems: list[str]  # "seq N (kind): what does not hold"
    error: BadLog | None

    @property
    def ok(self) -> bool:
        return not self.problems and self.error is None


def is_import(source: LogFile) -> bool:
    """The log carries an importer's note (a log that cannot be read is left to the
    ordinary paths, which say why)."""
    try:
        return bool(source.reader.notes(IMPORT_NOTE))
    except (LogError, EventError):
        return False


def import_unchecked(source: LogFile) -> str:
    """What the importer says it could not check (its note's `unchecked`), or the generic
    line where its note says nothing."""
    for text in source.reader.notes(IMPORT_NOTE):
        try:
            said = json.loads(text).get("unchecked")
        except (ValueError, AttributeError):
            continue
        if isinstance(said, str) and said:
            return said
    return IMPORT_UNCHECKED


def check_import(source: LogSource) -> ImportCheck:
    """Check what an import knows exactly: the log replays clean, every stale cancellation
    is of a group past `max_off_policy_steps` then, every stale drop is past it, every
    batch trains only what it cut, and ships only once the trainer is within `target_lag`.
    """
    folded = fold_events(source.events(), check_invariants=True, read_errors=True)
    if folded.error is not None or folded.fold is None:
        return ImportCheck(0, [], folded.error)
    problems = list(folded.fold.summary()["invariant_violations"])
    checked, found = _check_imported_decisions(source.events())
    return ImportCheck(checked, problems + found, None)


def _check_imported_decisions(events: Iterable[Event]) -> tuple[int, list[str]]:
    bound = lag = 0
    step, version, checked = 1, 0, 0
    group_version: dict[str, int] = {}
    problems: list[str] = []
    for event in events:
        if isinstance(event, RunStarted):
            config = RunConfig.from_mapping(event.config, where="config", startable=False)
            bound, lag = config.max_off_policy_steps, config.target_lag
        elif isinstance(event, GroupOpened):
            group_version[event.group_id] = event.policy_version
        elif isinstance(event, VersionPending):
            version = event.version
        elif isinstance(event, EpisodesCancelled) and event.reason == "stale":
            checked += 1
            if (step - 1) - group_version.get(event.group_id, 0) <= bound:
                problems.append(f"seq {event.seq} ({event.kind}): {event.group_id} is not stale")
        elif isinstance(event, EpisodeDropped) and event.reason == "stale":
            checked += 1
            if event.age <= bound:
                problems.append(f"seq {event.seq} ({event.kind}): age {event.age} is not stale")
        elif isinstance(event, BatchShipped):
            checked += 1
            if not set(event.trained_ids) <= set(event.episode_ids):
                problems.append(f"seq {event.seq} ({event.kind}): trains what it did not cut")
            if version < event.step - 1 - lag:
                problem = f"ships step {event.step} at v{version} (target_lag {lag})"
                problems.append(f"seq {event.seq} ({event.kind}): {problem}")
            step = event.step + 1
        elif isinstance(event, RunFinished):
            break  # the shutdown protocol's events are the recorder's own
    return checked, problems
