"""The dispatch registry on generated logs: fed a log's openings and dispatches, it knows
exactly the episodes the log dispatched, and a group's number is its place in the opening
order (what replay's verify and the state view read from an id)."""

from __future__ import annotations

from hypothesis import given

from rolloutlog.core.registry import DispatchRegistry, group_number
from rolloutlog.events.types import EpisodeDispatched, Event, GroupOpened
from rolloutlog.testing.strategies import world_logs


@given(world_logs(max_steps=40))
def test_the_registry_knows_exactly_what_the_log_dispatched(log: list[Event]) -> None:
    registry = DispatchRegistry()
    opened: list[str] = []
    dispatched: set[str] = set()
    for event in log:
        if isinstance(event, GroupOpened):
            registry.opened()
            opened.append(event.group_id)
            assert group_number(event.group_id) == len(opened)
        elif isinstance(event, EpisodeDispatched):
            registry.dispatched(group_number(event.group_id))
            dispatched.add(event.episode_id)
    for number, group_id in enumerate(opened, start=1):
        members = registry.members[number]
        assert all(registry.knows(f"{group_id}/{m}") for m in range(members))
        assert not registry.knows(f"{group_id}/{members}")
        assert {f"{group_id}/{m}" for m in range(members)} <= dispatched
    assert sum(registry.members) == len(dispatched)
    assert not registry.knows(f"g{len(opened) + 1}/0")
    assert not registry.knows("g0/0")
