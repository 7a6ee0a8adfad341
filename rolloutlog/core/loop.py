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

A world event is taken whole or not at all. One that either decider refuses changes
nothing: the states, `next_seq` and the event itself (its `seq` is restored) stay as they
were, and the loop goes on. A reaction that fails after its world event was applied (a
bound, an observer's `InvariantViolation`) leaves part of a reaction in the states, which no
log can hold: the loop then refuses every later `feed` with `LoopFailedError`.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Protocol

import attrs

from rolloutlog.core import dispatcher as dispatcher_module
from rolloutlog.core.config import RunConfig
from rolloutlog.core.decider import DISPATCHER, SINK, Combined, Decider, HoldsPair, Pair
from rolloutlog.core.digest import GENESIS, canonical, chain
from rolloutlog.core.errors import LoopBoundError, LoopFailedError
from rolloutlog.core.stall import starving_rule
from rolloutlog.core.state import DispatcherState, SinkState
from rolloutlog.events.types import UNSEQUENCED, WORLD_KINDS, Event, LimitSet, RunStarted

__all__ = ["DISPATCHER", "SINK", "Decider", "Observer", "ReactionLoop"]


class Observer(Protocol):
    """Sees every appended event with the states after it (invariant checks, metrics)."""

    def observe(self, event: Event, loop: ReactionLoop) -> None: ...

    def settled(self, world_event: Event, loop: ReactionLoop) -> None: ...


MAX_REACTIONS = 1_000_000
MAX_DEPTH = 64


class ReactionLoop(HoldsPair):
    """Both deciders over one growing log; `feed` a world event, get back what was appended."""

    def __init__(
        self,
        config: RunConfig,
        *,
        sink: Decider[SinkState] = SINK,
        dispatcher: Decider[DispatcherState] = DISPATCHER,
        observers: tuple[Observer, ...] = (),
        max_reactions: int = MAX_REACTIONS,
        max_depth: int = MAX_DEPTH,
        digest: bool = True,
    ) -> None:
        self.config = config
        self.decider = Combined(sink, dispatcher)
        self.state: Pair = self.decider.initial_state(config)
        self.observers = observers  # sets `_observes` and `_settles` too
        self.max_reactions, self.max_depth = max_reactions, max_depth
        self.next_seq = 0
        # Why the loop stopped taking events: set when a reaction fails after its world
        # event was applied (a bound, an observer's violation), since the states then hold
        # part of a reaction, which no log can hold.
        self.failure: str | None = None
        # The chain costs a `repr` and a hash per event; a driver whose log is digested
        # where it is read (replay, verify) may leave it off: then `digest` is None.
        self.digest: bytes | None = GENESIS if digest else None

    @property
    def observers(self) -> tuple[Observer, ...]:
        """Who sees each appended event; their methods are looked up once, when set (the
        loop calls them once per event)."""
        return self._observers

    @observers.setter
    def observers(self, observers: tuple[Observer, ...]) -> None:
        self._observers = observers
        self._observes = tuple(observer.observe for observer in observers)
        self._settles = tuple(observer.settled for observer in observers)

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
        if self.failure is not None:
            raise LoopFailedError(f"the loop takes no more events: {self.failure}")
        appended: list[Event] = []
        start = self.next_seq
        try:
            self._append((event,), appended, fresh)
            # everything it sets off, depth first, each answer appended as a decided batch
            self.decider.settle(self.state, appended, self._append, self.max_depth)
            for settled in self._settles:
                settled(appended[0], self)
        except BaseException as error:
            if self.next_seq != start:  # refused before it was applied: nothing moved
                self.failure = (
                    f"the reaction to seq {start} ({event.kind}) failed half-way "
                    f"({type(error).__name__}: {error})"
                )
            raise
        return appended

    def _append(self, events: Iterable[Event], appended: list[Event], fresh: bool = True) -> None:
        """Append `events` to `appended` in order, each checked by both deciders, applied,
        observed; `fresh` as for `feed` (a decided answer is: `Combined.settle` hands each
        here as it is).

        Takes a decider's whole answer at once: the per-event work is the loop body, not a
        call per event (the loop runs once per event of a simulated run).
        """
        evolve, state, observes = self.decider.evolve, self.state, self._observes
        for event in events:
            seq = self.next_seq
            placed = False
            if event.seq != seq:
                if fresh and event.seq == UNSEQUENCED:
                    # A decided event (or a driver's fresh world event) is a new object that
                    # nothing else holds yet: it gets its seq in place rather than a copy (a
                    # copy per event costs a tenth of the loop). One that carries another seq
                    # (a decider handing back an event twice) is copied: appended events
                    # never change.
                    object.__setattr__(event, "seq", seq)
                    placed = True
                else:
                    event = attrs.evolve(event, seq=seq)
            try:
                evolve(state, event)  # both deciders check before either writes
            except BaseException:
                if placed:  # refused: the caller gets its event back as it handed it over
                    object.__setattr__(event, "seq", UNSEQUENCED)
                raise
            self.next_seq = seq + 1
            if self.digest is not None:
                self.digest = chain(self.digest, canonical(event), self.fingerprint())
            appended.append(event)
            for observe in observes:
                observe(event, self)
            if len(appended) > self.max_reactions:
                raise LoopBoundError(
                    f"world event seq {appended[0].seq} ({appended[0].kind}) set off more "
                    f"than {self.max_reactions} events: the deciders do not settle"
                )

    def fingerprint(self) -> tuple[int, ...]:
        """The few counts of both states that each digest covers."""
        return self.decider.fingerprint(self.state)

    def zero_output_reason(self) -> str | None:
        """Why the run should stop for lack of admitted work, or None (see `core.sink`);
        a driver that sees a reason stops the run with `run_finished(reason="zero_output")`.
        The sink's rule, asked directly: a simulated run asks after every world event."""
        return self.decider.sink.stop_reason(self.state.sink)

    def stall_reason(self) -> str:
        """The rule that holds a run which makes no progress (`core.stall`), for the
        driver's one-line error."""
        state = self.state
        return starving_rule(state.rules, state.dispatcher, state.sink)

    def next_tick(self, now: float) -> float | None:
        """When the driver's timer should `tick` (admission smoothing), or None."""
        return dispatcher_module.next_tick(self.state.rules, self.state.dispatcher, now)

    def tick(self, t: float) -> LimitSet:
        """The world event a driver feeds when its timer fires at `next_tick`: the limit,
        restated (see `core.dispatcher.next_tick`)."""
        return dispatcher_module.tick(self.state.dispatcher, t)
