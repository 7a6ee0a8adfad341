"""Helpers the simulator tests share: run and collect, compare logs, read them from disk."""

from __future__ import annotations

from pathlib import Path

import attrs

from rolloutlog.core.account import Account
from rolloutlog.events.log_reader import read_log
from rolloutlog.events.log_writer import LogWriter
from rolloutlog.events.types import Event
from rolloutlog.runtime.sim.scenario import Scenario, load_scenario
from rolloutlog.runtime.sim.simulation import SimResult, simulate


def run_collect(
    scenario: Scenario, *, check: bool = True, digest: bool = False
) -> tuple[list[Event], SimResult]:
    """Simulate with a raising invariant checker on every event; all events and the result
    (with the loop's digest chain where `digest`: a seventh of a run's cost, so only the
    tests that read it pay it)."""
    events: list[Event] = []
    observers = (Account(scenario.run),) if check else ()
    result = simulate(scenario, observers=observers, on_events=events.extend, digest=digest)
    return events, result


def first_divergence(recorded: list[Event], decided: list[Event]) -> str | None:
    """Where two logs first differ, for a readable failure."""
    for seq, (left, right) in enumerate(zip(recorded, decided, strict=False)):
        if left != right:
            return f"seq {seq}: recorded {left!r}, re-decided {right!r}"
    if len(recorded) != len(decided):
        return f"recorded {len(recorded)} events, re-decided {len(decided)}"
    return None


def write_and_read(events: list[Event], path: Path) -> list[Event]:
    """Write a log with the project's writer and read it back."""
    with LogWriter(path, mode="overwrite", fsync=False) as writer:
        for event in events:
            writer.append(event)
    return read_log(path)


def straddles(events: list[Event]) -> bool:
    """Whether a version bump fell between two dispatches of one group, judged from a log.

    A group straddles when its dispatched members carry different versions, or when a
    `version_pending` arrives while it still owes undispatched members (they would be
    dispatched at the new version, or cancelled for it). Judge a `per-episode` log: per-group
    stamps hide the versions members were really dispatched at.
    """
    owed: dict[str, int] = {}
    versions: dict[str, int] = {}
    for event in events:
        kind = event.kind
        if kind == "group_opened":
            owed[event.group_id] = event.group_size  # type: ignore[union-attr]
        elif kind == "episode_dispatched":
            group_id = event.group_id  # type: ignore[union-attr]
            version = versions.setdefault(group_id, event.policy_version)  # type: ignore[union-attr]
            if version != event.policy_version:  # type: ignore[union-attr]
                return True
            owed[group_id] -= 1
        elif kind == "episodes_cancelled":
            owed[event.group_id] -= event.unscheduled  # type: ignore[union-attr]
        elif kind == "version_pending" and any(count > 0 for count in owed.values()):
            return True
    return False


def decided_payloads(events: list[Event]) -> list[Event]:
    """A log without its `run_started` (whose config names the policy), for comparing runs."""
    return events[1:]


SLOW_UPDATES = {"world.weight_update_s": 4.0, "world.task_length_tokens": 512}


def slow_update_run(seed: int, **keys: object) -> tuple[list[Event], float]:
    """Eight steps of the smoke scenario with slow weight updates and long generations, so
    that updates find work generating: its events and virtual seconds."""
    scenario = load_scenario("smoke", {**SLOW_UPDATES, **keys})
    events, result = run_collect(attrs.evolve(scenario, steps=8).with_seed(seed))
    return events, result.virtual_seconds
