"""Logs as another orchestrator would write them under a preset, for the conformance tests.

`foreign(log, rng)` takes a log our deciders wrote and changes what a conforming foreign
orchestrator may do differently: its own task source (every group's env and task
renamed), its own order within each reaction (decisions interleaved at random, each
group's and the batches' own order kept) and its clock (each decision up to `delay`
seconds after its world event, `t` never going back).
"""

from __future__ import annotations

import random
from collections.abc import Iterator, Sequence

import attrs

from rolloutlog.events.types import WORLD_KINDS, Event, GroupOpened
from rolloutlog.replay.conformance import streams


def reactions(log: Sequence[Event]) -> Iterator[list[Event]]:
    """Each world event with the decisions recorded after it, up to the next one."""
    reaction: list[Event] = []
    for event in log:
        if event.kind in WORLD_KINDS and reaction:
            yield reaction
            reaction = []
        reaction.append(event)
    if reaction:
        yield reaction


def foreign(log: Sequence[Event], rng: random.Random, *, delay: float = 0.0) -> list[Event]:
    """`log` with a foreign task source, reaction order and clock (module docstring)."""
    groups = list(reactions(log))
    out: list[Event] = []
    for n, (world, *decided) in enumerate(groups):
        following = groups[n + 1][0].t if n + 1 < len(groups) else world.t + delay
        latest = min(world.t + delay, following)
        offsets = sorted(rng.uniform(world.t, latest) for _ in decided)
        out.append(world)
        for event, t in zip(_interleaved(decided, rng), offsets, strict=True):
            out.append(attrs.evolve(_renamed(event), t=t))
    return [attrs.evolve(event, seq=seq) for seq, event in enumerate(out)]


def _interleaved(decided: list[Event], rng: random.Random) -> list[Event]:
    """A random order of `decided` that keeps the order within each stream."""
    left = list(decided)
    out: list[Event] = []
    while left:
        ready = [
            e
            for i, e in enumerate(left)
            if not any(set(streams(e)) & set(streams(before)) for before in left[:i])
        ]
        chosen = ready[rng.randrange(len(ready))]
        left.remove(chosen)
        out.append(chosen)
    return out


def _renamed(event: Event) -> Event:
    if not isinstance(event, GroupOpened):
        return event
    return attrs.evolve(event, env=f"{event.env}-bench", task_id=f"bench/{event.task_id}")
