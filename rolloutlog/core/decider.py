"""The two deciders as values, and their combination: the one place their order is written.

A `Decider` is one decider as pure functions (fmodel's shape), so that an implementation can
be swapped for a candidate and compared; its states are plain data, and `apply` and
`decide` take the run's rule table beside the state (`core.rules.table.Rules`, which
`core.presets.rules_for` builds from the config once per run). `Combined` is the pair of
them over the pair of states (fmodel's `combine`): one `check`, `apply`, `settle` and
`fingerprint`. The loop,
replay's fold and everything that re-decides a log go through it, so that "the sink, then
the dispatcher" is written here and nowhere else:

- `check` asks the sink, then the dispatcher, and writes nothing: a refused event leaves
  both states exactly as they were;
- `apply` applies to the sink, then the dispatcher (`evolve`: `check`, then `apply`);
- `settle` asks the sink, has its whole answer appended, then asks the dispatcher, which
  so sees the sink's answer (its own events included in the state it decides on); under
  `step_order = "submit-first"` (verl's v1 step) a weight update's event is answered by
  the dispatcher first, then the sink (`Rules.dispatcher_first`); and so on for every
  event appended, depth first.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Generic, TypeVar

import attrs

from rolloutlog.core import dispatcher as dispatcher_module
from rolloutlog.core import sink as sink_module
from rolloutlog.core.config import RunConfig
from rolloutlog.core.digest import fingerprint
from rolloutlog.core.errors import LoopBoundError
from rolloutlog.core.presets import rules_for
from rolloutlog.core.rules.table import Rules
from rolloutlog.core.state import DispatcherState, SinkState
from rolloutlog.events.types import Event

S = TypeVar("S")


def _never_stops(state: object) -> str | None:
    return None


@attrs.frozen
class Decider(Generic[S]):
    """One decider as pure functions, so implementations can be swapped and compared.

    `check` refuses an event without writing (the log's consistency, which no policy
    changes); `apply` writes an event `check` accepted, as the run's rules say. Kept apart
    so that an event is checked against both deciders before either applies it: a refused
    event leaves both states exactly as they were.
    """

    name: str
    initial_state: Callable[[RunConfig], S]
    check: Callable[[S, Event], None]
    apply: Callable[[Rules, S, Event], S]
    decide: Callable[[Rules, S, Event], list[Event]]
    stop_reason: Callable[[S], str | None] = _never_stops

    def evolve(self, rules: Rules, state: S, event: Event) -> S:
        """All of `event`, or (raising `InconsistentLogError`) none of it."""
        self.check(state, event)
        return self.apply(rules, state, event)


DISPATCHER: Decider[DispatcherState] = Decider(
    "dispatcher",
    dispatcher_module.initial_state,
    dispatcher_module.check,
    dispatcher_module.apply,
    dispatcher_module.decide,
)
SINK: Decider[SinkState] = Decider(
    "sink",
    sink_module.initial_state,
    sink_module.check,
    sink_module.apply,
    sink_module.decide,
    sink_module.zero_output_reason,
)


@attrs.define(slots=True)
class Pair:
    """The states of both deciders, and beside them the rule table the run's policy chose."""

    sink: SinkState
    dispatcher: DispatcherState
    rules: Rules


class HoldsPair:
    """Anything that holds the pair of states (the loop, replay's fold): each by name."""

    state: Pair

    @property
    def sink_state(self) -> SinkState:
        """The sink's state after the last event."""
        return self.state.sink

    @property
    def dispatcher_state(self) -> DispatcherState:
        """The dispatcher's state after the last event."""
        return self.state.dispatcher

    @property
    def rules(self) -> Rules:
        """The rule table the run's policy chose (`core.presets.rules_for`)."""
        return self.state.rules


Append = Callable[[list[Event]], None]


class Combined:
    """Both deciders as one: the sink first, then the dispatcher, written once.

    Its steps are closures over the two deciders' functions, built once: the loop calls
    them once per event of a simulated run, where each attribute lookup shows.
    """

    __slots__ = ("apply", "check", "dispatcher", "evolve", "settle", "sink")

    def __init__(
        self, sink: Decider[SinkState] = SINK, dispatcher: Decider[DispatcherState] = DISPATCHER
    ) -> None:
        self.sink, self.dispatcher = sink, dispatcher
        sink_check, sink_apply, sink_decide = sink.check, sink.apply, sink.decide
        dispatcher_check, dispatcher_apply = dispatcher.check, dispatcher.apply
        dispatcher_decide = dispatcher.decide

        def check(state: Pair, event: Event) -> None:
            """Refuse `event` (InconsistentLogError naming its seq) unless both can apply it."""
            sink_check(state.sink, event)
            dispatcher_check(state.dispatcher, event)

        def apply(state: Pair, event: Event) -> None:
            """Apply an event both deciders accepted (`check`), in place."""
            rules = state.rules
            state.sink = sink_apply(rules, state.sink, event)
            state.dispatcher = dispatcher_apply(rules, state.dispatcher, event)

        def evolve(state: Pair, event: Event) -> None:
            """`check`, then `apply`: all of `event` in both states, or (raising) none."""
            sink_check(state.sink, event)
            dispatcher_check(state.dispatcher, event)
            rules = state.rules
            state.sink = sink_apply(rules, state.sink, event)
            state.dispatcher = dispatcher_apply(rules, state.dispatcher, event)

        def settle(state: Pair, appended: list[Event], append: Append, max_depth: int) -> None:
            """Both deciders' reactions to `appended[0]` and to all they set off, depth first.

            Each event is asked the sink, then the dispatcher (`Rules.dispatcher_first`: the
            other way round), and each answer is handed whole to `append`, which must check,
            apply and add it to `appended` (as the loop's does) before it returns: the
            dispatcher decides on the state that includes the sink's answer. An empty answer
            is not handed over (most events set off nothing). The rounds are an explicit
            stack, not recursion, at most `max_depth` deep (else `LoopBoundError`); the
            order and the rounds are one body, since the loop runs it once per event.
            """
            rules = state.rules
            first = rules.dispatcher_first  # the event classes the run's `step_order` turns
            owed: list[Iterator[Event]] = [iter(appended[:1])]
            while owed:
                event = next(owed[-1], None)
                if event is None:
                    owed.pop()
                    continue
                start = len(appended)
                dispatcher_first = type(event) in first
                if dispatcher_first:
                    decided = dispatcher_decide(rules, state.dispatcher, event)
                    if decided:
                        append(decided)
                decided = sink_decide(rules, state.sink, event)
                if decided:
                    append(decided)
                if not dispatcher_first:
                    decided = dispatcher_decide(rules, state.dispatcher, event)
                    if decided:
                        append(decided)
                if len(appended) > start:
                    if len(owed) >= max_depth:
                        raise LoopBoundError(
                            f"reactions to seq {appended[0].seq} nest deeper than {max_depth}"
                        )
                    owed.append(iter(appended[start:]))

        self.check: Callable[[Pair, Event], None] = check
        self.apply: Callable[[Pair, Event], None] = apply
        self.evolve: Callable[[Pair, Event], None] = evolve
        self.settle: Callable[[Pair, list[Event], Append, int], None] = settle

    def initial_state(self, config: RunConfig) -> Pair:
        """Both deciders before `run_started`, and the rules `config`'s policy chooses."""
        return Pair(
            self.sink.initial_state(config),
            self.dispatcher.initial_state(config),
            rules_for(config),
        )

    def fingerprint(self, state: Pair) -> tuple[int, ...]:
        """The counts of both states that each digest covers (`core.digest.fingerprint`)."""
        return fingerprint(state.dispatcher, state.sink)


PAIR = Combined()
