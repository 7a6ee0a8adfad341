"""Re-deciding a log: feed its world events to fresh deciders, line up what they decide.

Everything that checks a log against today's deciders (verify, a live run's resume, the
equivalence harness) walks the log the same way, so the walk is written once, here.
`redecide(events)` yields `(recorded, expected)` for every seq in order:

- a world event with nothing owed is its own expectation, `(event, event)`; it is yielded
  *before* the loop is fed it, so a caller can refuse it first (a second `run_started`, an
  arrival never dispatched) without the loop having moved;
- while the loop still owes decisions from the last world event, each recorded event is
  paired with the next one owed, whatever its kind (a world event recorded where a decision
  was owed is a divergence, not a reason to feed it);
- a decided event with nothing owed is expected to be `None`: the deciders did not make it;
- after the log ends, each decision still owed comes as `(None, expected)`.

A caller that stops at the first pair that differs has a verification; one that goes on
through matching pairs has a re-decided loop (`Redecision.loop`) at the end of the log.
With `recorded_decisions=False` the input holds world events only (a log stripped of its
decisions, or one under another config): every decision is yielded as `(None, expected)`
and each world event as `(event, appended)`, with the seq the loop gave it.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable, Iterator

from rolloutlog.core.errors import InconsistentLogError
from rolloutlog.core.loop import ReactionLoop
from rolloutlog.events.types import WORLD_KINDS, Event, RunStarted

Pairing = tuple[Event | None, Event | None]  # (recorded, expected)
StartLoop = Callable[[RunStarted], ReactionLoop]


class Redecision:
    """One walk over a log: iterate it for the pairs; `loop` is the loop being fed."""

    def __init__(
        self,
        events: Iterable[Event],
        *,
        start: StartLoop = ReactionLoop.from_run_started,
        recorded_decisions: bool = True,
    ) -> None:
        self.events, self.start = events, start
        self.recorded_decisions = recorded_decisions
        self.loop: ReactionLoop | None = None
        self.owed: deque[Event] = deque()

    def __iter__(self) -> Iterator[Pairing]:
        owed = self.owed
        for recorded in self.events:
            if not self.recorded_decisions:
                yield from self._world_only(recorded)
            elif owed:
                yield recorded, owed.popleft()
            elif recorded.kind not in WORLD_KINDS:
                yield recorded, None
            else:
                yield recorded, recorded
                owed.extend(self._feed(recorded)[1:])
        while owed:
            yield None, owed.popleft()

    def _world_only(self, world: Event) -> Iterator[Pairing]:
        appended = self._feed(world)
        yield world, appended[0]
        for decided in appended[1:]:
            yield None, decided

    def _feed(self, world: Event) -> list[Event]:
        loop = self.loop
        if loop is None:
            if not isinstance(world, RunStarted):
                problem = "a log must start with run_started"
                raise InconsistentLogError(world.seq, world.kind, problem)
            loop = self.loop = self.start(world)
        elif world.kind == "run_started":
            raise InconsistentLogError(world.seq, world.kind, "a second run_started")
        return loop.feed(world)


def redecide(
    events: Iterable[Event],
    *,
    start: StartLoop = ReactionLoop.from_run_started,
    recorded_decisions: bool = True,
) -> Redecision:
    """The `(recorded, expected)` pairs of `events`, re-decided (see the module docstring)."""
    return Redecision(events, start=start, recorded_decisions=recorded_decisions)
