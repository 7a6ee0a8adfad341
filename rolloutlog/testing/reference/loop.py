"""The reference's reaction loop: append a world event, then let the sink and then the
dispatcher answer it, each answer appended whole, and answer those answers depth first."""

from __future__ import annotations

from collections.abc import Iterable

import attrs

from rolloutlog.events.types import WORLD_KINDS, Event
from rolloutlog.testing.reference.dispatcher import decide as decide_dispatcher
from rolloutlog.testing.reference.record import Record
from rolloutlog.testing.reference.sink import decide as decide_sink


def reference_log(events: Iterable[Event]) -> list[Event]:
    """The whole log the reference makes of the world events among `events`."""
    record = Record()

    def append(event: Event) -> Event:
        event = attrs.evolve(event, seq=len(record.history))
        record.apply(event)
        return event

    def settle(event: Event) -> None:
        answered = [append(e) for e in decide_sink(record, event)]
        answered += [append(e) for e in decide_dispatcher(record, event)]
        for answer in answered:
            settle(answer)

    for event in events:
        if event.kind in WORLD_KINDS:
            settle(append(event))
    return record.history
