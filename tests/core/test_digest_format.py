"""The digest's canonical bytes keep their documented form (docs/replay.md): digests are
recorded and compared across versions, so a change of form breaks every earlier log."""

from __future__ import annotations

import json

from hypothesis import given

from rolloutlog.core.digest import canonical, event_payload
from rolloutlog.events.jsonl import event_from_json
from rolloutlog.events.types import Event, RunStarted
from rolloutlog.testing.strategies import world_logs


@given(world_logs(max_steps=10))
def test_the_config_is_hashed_as_compact_sorted_json(log: list[Event]) -> None:
    started = log[0]
    assert isinstance(started, RunStarted)
    compact = json.dumps(started.config, sort_keys=True, separators=(",", ":"))
    text = canonical(started).decode()
    assert text.startswith(f"('run_started', 0, {float(started.t)!r}, ")
    assert repr(compact) in text


@given(world_logs(max_steps=10, restarts=True))
def test_an_event_payload_reads_back_as_its_event(log: list[Event]) -> None:
    """Reports and divergence messages show `event_payload`: every field and the kind, so
    that what they print is the event itself, as a JSON line would be."""
    for event in log:
        assert event_from_json(json.loads(json.dumps(event_payload(event))), event.seq) == event
