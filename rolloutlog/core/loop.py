"""The reaction loop that every driver shares: world event → sink → dispatcher, recursively.

A driver feeds one world event at a time. The loop appends it (assigning `seq` and
evolving both states), then settles it: the sink decides on it and its events are
appended, then the dispatcher decides (seeing the sink's events) and its events are
appended; then each of those events is settled in the same way, depth first, before
`feed` returns. Each decider's whole answer is appended before anyone decides again, so a
decision is never computed on a state that misses an earlier decision.

The loop is pure: no clock, no randomness, no I/O. Decided events carry the `t` of the
world event that caused them. Every bound is explicit: a world event that sets off more
than `max_reactions` events, or nests deeper than `max_depth`, raises `LoopBoundError`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import Any, Generic, Protocol, TypeVar

import attrs

from rolloutlog.core import dispatcher as dispatcher_module
from rolloutlog.core import sink as sink_module
from rolloutlog.core.config import RunConfig
from rolloutlog.core.digest import GENESIS, canonical, chain
from rolloutlog.core.errors import LoopBoundError
from rolloutlog.events.types import UNSEQUENCED, WORLD_KINDS, Event, LimitSet, RunStarted

S = TypeVar("S")


@attrs.frozen
class Decider(Generic[S]):
    """One decider as pure functions, so implementations can be swapped and compared.

    `check` refuses an event without writing; `apply` writes an event `check` accepted.
    Kept apart so that the loop can check an event against both deciders before either
    applies it: a refused event leaves both states exactly as they were.
    """

    name: str
    initial_state: Callable[[RunConfig], S]
    check: Callable[[S, Event], None]
    apply: Callable[[S, Event], S]
    decide: Callable[[S, Event], list[Event]]
    fingerprint: Callable[[S], tuple[int, ...]]  # the few counts each digest covers
    stop_reason: Callable[[S], str | None] = lambda state: None

    def evolve(self, state: S, event: Event) -> S:
        """All of `event`, or (raising `InconsistentLogError`) none of it."""
        self.check(state, event)
        return self.apply(state, event)


def _dispatcher_fingerprint(state: dispatcher_module.DispatcherState) -> tuple[int, ...]:
    return (state.step, state.version, state.limit, len(state.inflight), len(state.groups))


def _sink_fingerprint(state: sink_module.SinkState) -> tuple[int, ...]:
    return (state.step, state.version, len(state.queue), len(state.groups), len(state.inflight))


DISPATCHER: Decider[dispatcher_module.DispatcherState] = Decider(
    "dispatcher",
    dispatcher_module.initial_state,
    dispatcher_module.check,
    dispatcher_module.apply,
    dispatcher_module.decide,
    _dispatcher_fingerprint,
)
SINK: Decider[sink_module.SinkState] = Decider(
    "sink",
    sink_module.initial_state,
    sink_module.check,
    sink_module.apply,
    sink_module.decide,
    _sink_fingerprint,
    sink_module.zero_output_reason,
)


class Observer(Protocol):
    """Sees every appended event with the states after it (invariant checks, metrics)."""

    def observe(self, event: Event, loop: ReactionLoop) -> None: ...

    def settled(self, world_event: Event, loop: ReactionLoop) -> None: ...


MAX_REACTIONS = 1_000_000
MAX_DEPTH = 64


class ReactionLoop:
    """Both deciders over one growing log; `feed` a world event, get back what was appended."""

    def __init__(
        self,
        config: RunConfig,
        *,
        sink: Decider[Any] = SINK,
        dispatcher: Decider[Any] = DISPATCHER,
        observers: tuple[Observer, ...] = (),
        max_reactions: int = MAX_REACTIONS,
        max_depth: int = MAX_DEPTH,
        digest: bool = True,
    ) -> None:
        self.config = config
        self.sink, self.dispatcher = sink, dispatcher
        self.sink_state = sink.initial_state(config)
        self.dispatcher_state = dispatcher.initial_state(config)
        self.observers = observers
        self.max_reactions, self.max_depth = max_reactions, max_depth
        self.next_seq = 0
        # The chain costs a `repr` and a hash per event; a driver whose log is digested
        # where it is read (replay, verify) may leave it off: then `digest` is None.
        self.digest: bytes | None = GENESIS if digest else None

    @classmethod
    def from_run_started(cls, event: RunStarted, **options: Any) -> ReactionLoop:
        """A loop configured by a recorded `run_started` (replay, verify), as recorded: a
        config rolloutlog would not start (`RunConfig.startup_problems`) is re-decided too."""
        config = RunConfig.from_mapping(event.config, where="run_started.config", startable=False)
        return cls(config, **options)

    def feed(self, event: Event, *, fresh: bool = False) -> list[Event]:
        """Append world `event` and settle everything it sets off; returns all appended events.

        `fresh`: the event is a new object that only the caller holds (a driver that built
        it to feed it), so an unsequenced one gets its seq in place instead of a copy.
        """
        if event.kind not in WORLD_KINDS:
            raise ValueError(f"feed takes world events; {event.kind} is decided by the deciders")
        if (event.kind == "run_started") != (self.next_seq == 0):
            raise ValueError("run_started must be the first event of a log, and only the first")
        appended: list[Event] = []
        self._append((event,), appended, fresh=fresh)
        self._settle(appended)
        for observer in self.observers:
            observer.settled(appended[0], self)
        return appended

    def _append(self, events: Iterable[Event], appended: list[Event], *, fresh: bool) -> None:
        """Append `events` in order, each checked by both deciders, applied, observed.

        Takes a decider's whole answer at once: the per-event work is the loop body, not a
        call per event (the loop runs once per event of a simulated run).
        """
        sink_check, sink_apply = self.sink.check, self.sink.apply
        dispatcher_check, dispatcher_apply = self.dispatcher.check, self.dispatcher.apply
        observers = self.observers
        for event in events:
            seq = self.next_seq
            if event.seq != seq:
                if fresh and event.seq == UNSEQUENCED:
                    # A decided event (or a driver's fresh world event) is a new object that
                    # nothing else holds yet: it gets its seq in place rather than a copy (a
                    # copy per event costs a tenth of the loop). One that carries another seq
                    # (a decider handing back an event twice) is copied: appended events
                    # never change.
                    object.__setattr__(event, "seq", seq)
                else:
                    event = attrs.evolve(event, seq=seq)
            sink_check(self.sink_state, event)  # both check before either writes
            dispatcher_check(self.dispatcher_state, event)
            self.next_seq = seq + 1
            self.sink_state = sink_apply(self.sink_state, event)
            self.dispatcher_state = dispatcher_apply(self.dispatcher_state, event)
            if self.digest is not None:
                self.digest = chain(self.digest, canonical(event), self.fingerprint())
            appended.append(event)
            for observer in observers:
                observer.observe(event, self)
            if len(appended) > self.max_reactions:
                raise LoopBoundError(
                    f"world event seq {appended[0].seq} ({appended[0].kind}) set off more "
                    f"than {self.max_reactions} events: the deciders do not settle"
                )

    def _settle(self, appended: list[Event]) -> None:
        """Depth-first over decision rounds, with an explicit stack instead of recursion."""
        append, sink_decide, dispatcher_decide = (
            self._append,
            self.sink.decide,
            self.dispatcher.decide,
        )
        owed: list[Iterator[Event]] = [iter(appended[:1])]
        while owed:
            event = next(owed[-1], None)
            if event is None:
                owed.pop()
                continue
            start = len(appended)
            decided = sink_decide(self.sink_state, event)
            if decided:  # most events set off nothing: no call for an empty answer
                append(decided, appended, fresh=True)
            decided = dispatcher_decide(self.dispatcher_state, event)
            if decided:
                append(decided, appended, fresh=True)
            if len(appended) > start:
                if len(owed) >= self.max_depth:
                    raise LoopBoundError(
                        f"reactions to seq {appended[0].seq} nest deeper than {self.max_depth}"
                    )
                owed.append(iter(appended[start:]))

    def fingerprint(self) -> tuple[int, ...]:
        """The few counts of both states that each digest covers."""
        return self.dispatcher.fingerprint(self.dispatcher_state) + self.sink.fingerprint(
            self.sink_state
        )

    def zero_output_reason(self) -> str | None:
        """Why the run should stop for lack of admitted work, or None (see `core.sink`);
        a driver that sees a reason stops the run with `run_finished(reason="zero_output")`."""
        return self.sink.stop_reason(self.sink_state)

    def next_tick(self, now: float) -> float | None:
        """When the driver's timer should `tick` (admission smoothing), or None."""
        return dispatcher_module.next_tick(self.dispatcher_state, now)

    def tick(self, t: float) -> LimitSet:
        """The world event a driver feeds when its timer fires at `next_tick`: the limit,
        restated (see `core.dispatcher.next_tick`)."""
        return dispatcher_module.tick(self.dispatcher_state, t)
