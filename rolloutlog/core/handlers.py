"""Handler tables keyed by the exact event class, typed per entry.

A decider reacts to a few kinds of events each; its handlers are named functions, each
taking the one event class it is for. `Handlers.on(kind, handler)` is where mypy checks
that pairing (a handler for `GroupOpened` must take a `GroupOpened`); `by_kind` is the plain
dict the decider looks its handler up in by `type(event)`: one lookup per event, where a
`match` on class patterns tries them in turn (`benchmarks/handlers.py` measures both;
benchmarks/RESULTS.md). Event classes are final, so the exact class is the kind.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Generic, TypeVar, cast

from rolloutlog.events.types import Event

P = TypeVar("P")
S = TypeVar("S")
R = TypeVar("R")
E = TypeVar("E", bound=Event)


class Handlers(Generic[S, R]):
    """The handlers of one decider step (check, apply or decide), by event class."""

    def __init__(self) -> None:
        self.by_kind: dict[type[object], Callable[[S, Event], R]] = {}

    def on(self, kind: type[E], handler: Callable[[S, E], R]) -> Handlers[S, R]:
        """Register `handler` for events of exactly class `kind`."""
        # The one place the table forgets the pairing: a decider passes a handler only
        # events of the class it was registered for, which is the class its signature names.
        self.by_kind[kind] = cast(Callable[[S, Event], R], handler)
        return self


class RuleHandlers(Generic[P, S, R]):
    """The handlers of a step that follows the run's rules (apply, decide): each takes the
    rule table (`core.rules.table.Rules`) beside the state and the event."""

    def __init__(self) -> None:
        self.by_kind: dict[type[object], Callable[[P, S, Event], R]] = {}

    def on(self, kind: type[E], handler: Callable[[P, S, E], R]) -> RuleHandlers[P, S, R]:
        """Register `handler` for events of exactly class `kind`."""
        self.by_kind[kind] = cast(Callable[[P, S, Event], R], handler)  # as `Handlers.on`
        return self
