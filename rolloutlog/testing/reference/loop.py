"""The reference's reaction loop: append a world event, then let the sink and then the
dispatcher answer it (under `step_order = "submit-first"` a weight update the dispatcher
first), each answer appended whole, and answer those answers depth first."""

from __future__ import annotations

from collections.abc import Iterable

import attrs

from rolloutlog.events.types import WORLD_KINDS, Event
from rolloutlog.testing.reference.dispatcher import decide as decide_dispatcher
from rolloutlog.testing.reference.record import Record
from rolloutlog.testing.reference.sink import decide as decide_sink

_UPDATES = ("version_pending", "version_live")


def reference_log(events: Iterable[Event]) -> list[Event]:
    """The whole log the reference makes of the world events among `events`."""
    record = Record()

    def append(event: Event) -> Event:
        event = attrs.evolve(event, seq=len(record.history))
        record.apply(event)
        return event

    def settle(event: Event) -> None:
        deciders = [decide_sink, decide_dispatcher]
        if record.config.step_order == "submit-first" and event.kind in _UPDATES:
            deciders.reverse()  # verl's step: its prompts go out, then it samples
        answered = [append(e) for e in deciders[0](record, event)]
        answered += [append(e) for e in deciders[1](record, event)]
        for answer in answered:
            settle(answer)

    for event in events:
        if event.kind in WORLD_KINDS:
            settle(append(event))
    return record.history
