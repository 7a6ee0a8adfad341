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
# An event class -> what writes it into a decider's state in place (None: nothing).
Applies = Callable[[type[Event]], Callable[[Rules, S, Event], None] | None]


def _never_stops(state: object) -> str | None:
    return None


@attrs.frozen
class Decider(Generic[S]):
    """One decider as pure functions, so implementations can be swapped and compared.

    `check` refuses an event without writing (the log's consistency, which no policy
    changes), by the check `check_of` finds for the event's class (None: it has none);
    `apply` writes an event `check` accepted in place, as the run's rules say, by what
    `apply_for(rules)` finds for its class (None: nothing to write; the lookup is chosen
    once per run, `Pair`). Kept apart so that an event is checked against both deciders
    before either applies it: a refused event leaves both states exactly as they were.
    Looked up by class, so that the combined decider calls each step itself, one call less
    per event and decider.
    """

    name: str
    initial_state: Callable[[RunConfig], S]
    check_of: Callable[[type[Event]], Callable[[S, Event], None] | None]
    apply_for: Callable[[Rules], Applies[S]]
    decide: Callable[[Rules, S, Event], list[Event]]
    stop_reason: Callable[[S], str | None] = _never_stops

    def check(self, state: S, event: Event) -> None:
        """Refuse `event` (`InconsistentLogError`) unless `apply` can take all of it."""
        found = self.check_of(type(event))
        if found is not None:
            found(state, event)

    def apply(self, rules: Rules, state: S, event: Event) -> S:
        """Write an event `check` accepted, in place; the state."""
        found = self.apply_for(rules)(type(event))
        if found is not None:
            found(rules, state, event)
        return state

    def evolve(self, rules: Rules, state: S, event: Event) -> S:
        """All of `event`, or (raising `InconsistentLogError`) none of it."""
        self.check(state, event)
        return self.apply(rules, state, event)


DISPATCHER: Decider[DispatcherState] = Decider(
    "dispatcher",
    dispatcher_module.initial_state,
    dispatcher_module.check_of,
    dispatcher_module.apply_for,
    dispatcher_module.decide,
)
SINK: Decider[SinkState] = Decider(
    "sink",
    sink_module.initial_state,
    sink_module.check_of,
    sink_module.apply_for,
    sink_module.decide,
    sink_module.zero_output_reason,
)


@attrs.define(slots=True)
class Pair:
    """The states of both deciders, and beside them the rule table the run's policy chose
    and each decider's apply lookup under it (`Decider.apply_for`, chosen once)."""

    sink: SinkState
    dispatcher: DispatcherState
    rules: Rules
    sink_applies: Applies[SinkState]
    dispatcher_applies: Applies[DispatcherState]


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


Append = Callable[[list[Event], list[Event]], None]  # (a decided answer, the appended)


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
        sink_check_of, dispatcher_check_of = sink.check_of, dispatcher.check_of

        def check(state: Pair, event: Event) -> None:
            """Refuse `event` (InconsistentLogError naming its seq) unless both can apply it."""
            sink.check(state.sink, event)
            dispatcher.check(state.dispatcher, event)

        def apply(state: Pair, event: Event) -> None:
            """Apply an event both deciders accepted (`check`), in place."""
            kind, rules = type(event), state.rules
            found_sink, found_dispatcher = state.sink_applies(kind), state.dispatcher_applies(kind)
            if found_sink is not None:
                found_sink(rules, state.sink, event)
            if found_dispatcher is not None:
                found_dispatcher(rules, state.dispatcher, event)

        def evolve(state: Pair, event: Event) -> None:
            """`check`, then `apply`: all of `event` in both states, or (raising) none. Each
            decider's steps are looked up here (`Decider.check_of`, `Pair`'s applies): the
            loop calls this once per event, where a call per step shows."""
            kind = type(event)
            sink_check = sink_check_of(kind)
            if sink_check is not None:
                sink_check(state.sink, event)
            dispatcher_check = dispatcher_check_of(kind)
            if dispatcher_check is not None:
                dispatcher_check(state.dispatcher, event)
            rules = state.rules
            sink_apply = state.sink_applies(kind)
            if sink_apply is not None:
                sink_apply(rules, state.sink, event)
            dispatcher_apply = state.dispatcher_applies(kind)
            if dispatcher_apply is not None:
                dispatcher_apply(rules, state.dispatcher, event)

        self.check: Callable[[Pair, Event], None] = check
        self.apply: Callable[[Pair, Event], None] = apply
        self.evolve: Callable[[Pair, Event], None] = evolve
        self.settle: Settle = _settle(sink.decide, dispatcher.decide)

    def initial_state(self, config: RunConfig) -> Pair:
        """Both deciders before `run_started`, and the rules `config`'s policy chooses."""
        rules = rules_for(config)
        return Pair(
            self.sink.initial_state(config),
            self.dispatcher.initial_state(config),
            rules,
            self.sink.apply_for(rules),
            self.dispatcher.apply_for(rules),
        )

    def fingerprint(self, state: Pair) -> tuple[int, ...]:
        """The counts of both states that each digest covers (`core.digest.fingerprint`)."""
        return fingerprint(state.dispatcher, state.sink)


Settle = Callable[[Pair, list[Event], Append, int], None]


def _settle(
    sink_decide: Callable[[Rules, SinkState, Event], list[Event]],
    dispatcher_decide: Callable[[Rules, DispatcherState, Event], list[Event]],
) -> Settle:
    """`Combined.settle` over the two deciders' `decide`."""

    def settle(state: Pair, appended: list[Event], append: Append, max_depth: int) -> None:
        """Both deciders' reactions to `appended[0]` and to all they set off, depth first.

        Each event is asked the sink, then the dispatcher (`Rules.dispatcher_first`: the
        other way round), and each answer is handed whole to `append` with `appended`; it
        must check, apply and add the answer there (as the loop's does) before it returns: the
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
                    append(decided, appended)
            decided = sink_decide(rules, state.sink, event)
            if decided:
                append(decided, appended)
            if not dispatcher_first:
                decided = dispatcher_decide(rules, state.dispatcher, event)
                if decided:
                    append(decided, appended)
            if len(appended) > start:
                if len(owed) >= max_depth:
                    raise LoopBoundError(
                        f"reactions to seq {appended[0].seq} nest deeper than {max_depth}"
                    )
                owed.append(iter(appended[start:]))

    return settle


PAIR = Combined()
