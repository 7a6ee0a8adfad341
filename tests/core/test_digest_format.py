"""The digest's canonical bytes keep their documented form (docs/replay.md): digests are
recorded and compared across versions, so a change of form breaks every earlier log."""

from __future__ import annotations

import json

from hypothesis import given

from rolloutlog.core.digest import canonical
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
