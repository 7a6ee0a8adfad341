"""Conformance: does a log another orchestrator wrote decide as a named preset would?

`verify` asks whether today's deciders, under the log's own config, append exactly the
recorded events in exactly their order. A foreign orchestrator (one that wrote its log
through `rolloutlog.record.Recorder`) cannot pass that: its task source is its own, it
reacts in its own order and its clock moves while it decides. Conformance asks what can
be asked of it, under a preset that it claims to follow:

- its world events (times and outcomes) are facts, fed as recorded; so is what its task
  source chose: each recorded `group_opened` gives its group's env, task and source
  (`LogTasks`). Whether a group opens at that moment, and every other decision, is
  re-decided under the preset;
- the decisions recorded after a world event, up to the next one, are its reaction; they
  conform when they are the preset's reaction to it, in any order across groups but in
  the preset's order within each group (a batch within each of its episodes' groups,
  batches in step order, groups opened in their number order: `streams`);
- a decision may carry a later `t` than its world event, by at most `t_tolerance`.

The first recorded event that breaks one of these rules is named with its seq and the
rule (`RULES`). As in `verify`, recorded decisions are never applied, only compared.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Sequence
from typing import Any, Final

import attrs

from rolloutlog.core.config import RunConfig
from rolloutlog.core.decider import DISPATCHER, SINK, Decider
from rolloutlog.core.digest import event_payload
from rolloutlog.core.errors import InconsistentLogError
from rolloutlog.core.loop import ReactionLoop
from rolloutlog.core.presets import preset_overrides
from rolloutlog.core.state import DispatcherState, initial_dispatcher_state
from rolloutlog.core.tasks import Task, task_for_group
from rolloutlog.events.types import (
    WORLD_KINDS,
    BatchShipped,
    EpisodeDispatched,
    EpisodeDropped,
    Event,
    GroupOpened,
    RunStarted,
    Work,
)
from rolloutlog.replay.fold import BAD_LOG_ERRORS, BadLog
from rolloutlog.replay.source import LogSource
from rolloutlog.replay.verify import Verifier, without_gaps

# The contract's rules, by the name a nonconformity gives.
RULES: Final = {
    "unexpected-decision": "the preset makes no decision of this kind in this reaction",
    "missing-decision": "the preset makes this decision in this reaction; the log does not",
    "different-fields": "the preset makes a decision of this kind here, with other fields",
    "group-order": "within one group (or the batches) the preset decides these in the other order",
    "t-tolerance": "a decision's t is before its world event's, or later than the tolerance allows",
}


@attrs.frozen
class Nonconformity:
    """The first recorded event that breaks a rule of the contract, and the rule."""

    seq: int  # the recorded event; for a missing decision, the one recorded instead
    rule: str  # a key of RULES
    cause: int  # the seq of the world event whose reaction it belongs to
    expected: Event | None  # what the preset decides there; None: nothing more
    recorded: Event | None  # what the log holds there; None: the log ended

    def describe(self) -> str:
        """One line for humans: the seq, the rule, and both sides."""
        expected = "nothing" if self.expected is None else _plain(self.expected)
        recorded = "nothing (the log ends)" if self.recorded is None else _plain(self.recorded)
        differing = self.differing()
        differs = f" (they differ in {', '.join(differing)})" if differing else ""
        return (
            f"seq {self.seq}: {self.rule} ({RULES[self.rule]}), in the reaction to seq "
            f"{self.cause}: expected {expected}, recorded {recorded}{differs}"
        )

    def differing(self) -> list[str]:
        """The fields in which two decisions of one kind differ (seq and t aside)."""
        if self.expected is None or self.recorded is None:
            return []
        if self.expected.kind != self.recorded.kind:
            return []
        ours, theirs = event_payload(self.expected), event_payload(self.recorded)
        return [k for k in ours if k not in ("seq", "t") and ours[k] != theirs[k]]

    def to_json(self) -> dict[str, Any]:
        return {
            "seq": self.seq,
            "rule": self.rule,
            "cause": self.cause,
            "expected": None if self.expected is None else event_payload(self.expected),
            "recorded": None if self.recorded is None else event_payload(self.recorded),
        }


@attrs.frozen
class Conformance:
    """The verdict: every reaction conformed, a nonconformity, or bad input."""

    policy: str
    events: int  # recorded events that conformed before the verdict
    nonconformity: Nonconformity | None
    error: BadLog | None

    @property
    def ok(self) -> bool:
        return self.nonconformity is None and self.error is None


def _plain(event: Event) -> str:
    """An event without its seq (a foreign reaction's seqs are not the preset's)."""
    fields = {k: v for k, v in event_payload(event).items() if k not in ("kind", "seq")}
    return f"{event.kind}({', '.join(f'{k}={v!r}' for k, v in fields.items())})"


class LogTasks:
    """The task source taken from a log: group `g<n>` works on the env and task that its
    recorded `group_opened` names; a group the log never opened keeps the seeded task.
    (Groups are numbered in opening order, which the openings' own order checks.)"""

    def __init__(self, events: Iterable[Event]) -> None:
        self.tasks: dict[str, Task] = {}
        try:
            for event in events:
                if isinstance(event, GroupOpened):
                    self.tasks[event.group_id] = Task(event.task_id, event.env, event.frozen)
        except BAD_LOG_ERRORS:
            pass  # the checking pass reports what stops the log, at its seq

    def dispatcher(self, base: Decider[DispatcherState] = DISPATCHER) -> Decider[DispatcherState]:
        """`base`, its new groups (fresh or requeued) opened on the log's tasks."""
        return attrs.evolve(
            base, initial_state=lambda config: initial_dispatcher_state(config, self.task)
        )

    def task(self, config: RunConfig, number: int, work: Work) -> Task:
        """The task source of the log: the task its `group_opened` of `g<number>` names."""
        task = self.tasks.get(f"g{number}")
        return task_for_group(config, number, work) if task is None else task


def streams(event: Event) -> tuple[str, ...]:
    """What a decision is ordered within: its group; a batch, its groups and the batches;
    an opening, the openings too (groups are numbered in opening order)."""
    if isinstance(event, GroupOpened):
        return ("openings", event.group_id)
    if isinstance(event, BatchShipped):
        groups = dict.fromkeys(_group_of(e) for e in event.episode_ids)
        return ("batches", *groups)
    if isinstance(event, EpisodeDropped):
        return (_group_of(event.episode_id),)
    return (event.group_id,)  # type: ignore[union-attr]  # every other decided kind has one


def _group_of(episode_id: str) -> str:
    return episode_id.rpartition("/")[0]


def _subject(event: Event) -> object:
    """What a decision is about, to pair it with the preset's of the same kind."""
    if isinstance(event, EpisodeDispatched | EpisodeDropped):
        return event.episode_id
    if isinstance(event, BatchShipped):
        return event.step
    return getattr(event, "group_id", None)


def _same(recorded: Event, expected: Event) -> bool:
    """The same decision, whatever its seq and t."""
    return (
        type(recorded) is type(expected)
        and attrs.evolve(recorded, seq=expected.seq, t=expected.t) == expected
    )


class Reaction:
    """The preset's reaction to one world event, consumed by the recorded decisions."""

    def __init__(self, cause: Event, expected: Sequence[Event], t_tolerance: float) -> None:
        self.cause, self.expected, self.t_tolerance = cause, expected, t_tolerance
        self.left: dict[int, Event] = dict(enumerate(expected))  # unconsumed, in order
        self.queues: dict[str, deque[int]] = {}
        for index, event in enumerate(expected):
            for stream in streams(event):
                self.queues.setdefault(stream, deque()).append(index)

    def take(self, recorded: Event) -> Nonconformity | None:
        """Consume `recorded`, or the rule it breaks."""
        heads = [self._head(stream) for stream in streams(recorded)]
        index = heads[0] if len(set(heads)) == 1 else None  # first in each of its streams
        if index is not None and _same(recorded, self.left[index]):
            self._consume(index)
            return self._timing(recorded, self.expected[index])
        match = next((i for i, e in self.left.items() if _same(recorded, e)), None)
        if match is not None:  # owed, but not first in one of its groups: what is
            first = next(h for h in heads if h != match and h is not None)
            return self._broken(recorded, "group-order", self.left[first])
        kin = [e for e in self.left.values() if type(e) is type(recorded)]
        if kin:
            near = [e for e in kin if _subject(e) == _subject(recorded)]
            return self._broken(recorded, "different-fields", (near or kin)[0])
        return self._broken(recorded, "unexpected-decision", None)

    def missing(self, instead: Event | None, seq: int) -> Nonconformity | None:
        """The first decision owed when the reaction ends (at `instead`, or the log's end)."""
        if not self.left:
            return None
        first = next(iter(self.left.values()))
        return Nonconformity(seq, "missing-decision", self.cause.seq, first, instead)

    def _head(self, stream: str) -> int | None:
        queue = self.queues.get(stream)
        return queue[0] if queue else None

    def _consume(self, index: int) -> None:
        for stream in streams(self.left.pop(index)):
            self.queues[stream].popleft()

    def _timing(self, recorded: Event, expected: Event) -> Nonconformity | None:
        if self.cause.t <= recorded.t <= self.cause.t + self.t_tolerance:
            return None
        return self._broken(recorded, "t-tolerance", expected)

    def _broken(self, recorded: Event, rule: str, expected: Event | None) -> Nonconformity:
        return Nonconformity(recorded.seq, rule, self.cause.seq, expected, recorded)


def check_conformance(source: LogSource, policy: str, *, t_tolerance: float = 0.0) -> Conformance:
    """Re-decide `source` under preset `policy` with the log's task source; the first
    recorded event that breaks the contract is the nonconformity (module docstring)."""
    if t_tolerance < 0:
        raise ValueError(f"t_tolerance must be >= 0, got {t_tolerance!r}")
    overrides = preset_overrides(policy)  # ConfigError for an unknown preset
    verifier = Verifier(SINK, LogTasks(source.events()).dispatcher())
    walk = _Walk(verifier, overrides)
    conformed = 0
    reaction: Reaction | None = None
    try:
        for recorded in without_gaps(source.events()):
            if recorded.kind in WORLD_KINDS:
                owed = None if reaction is None else reaction.missing(recorded, recorded.seq)
                if owed is not None:
                    return Conformance(policy, conformed, owed, None)
                reaction = Reaction(recorded, walk.feed(recorded), t_tolerance)
            elif reaction is None:
                problem = "a log must start with run_started"
                raise InconsistentLogError(recorded.seq, recorded.kind, problem)
            else:
                broken = reaction.take(recorded)
                if broken is not None:
                    return Conformance(policy, conformed, broken, None)
            conformed += 1
    except BAD_LOG_ERRORS as error:
        return Conformance(policy, conformed, None, error)
    owed = None if reaction is None else reaction.missing(None, conformed)
    return Conformance(policy, conformed, owed, None)


class _Walk:
    """Feeds the recorded world events to a loop under the preset, as `verify` does."""

    def __init__(self, verifier: Verifier, overrides: dict[str, Any]) -> None:
        self.verifier, self.overrides = verifier, overrides
        self.loop: ReactionLoop | None = None

    def feed(self, world: Event) -> list[Event]:
        """The preset's decisions in reaction to `world`."""
        if self.loop is None:
            if not isinstance(world, RunStarted):
                problem = "a log must start with run_started"
                raise InconsistentLogError(world.seq, world.kind, problem)
            config = {**world.config, **self.overrides}
            self.loop = self.verifier.start(attrs.evolve(world, config=config))
        elif world.kind == "run_started":
            raise InconsistentLogError(world.seq, world.kind, "a second run_started")
        else:
            self.verifier.matched(world, started=True)
        decided = self.loop.feed(world)[1:]
        for event in decided:
            self.verifier.matched(event, started=True)
        return decided
