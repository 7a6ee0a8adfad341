"""Virtual time: a priority queue of future world happenings.

Entries are ordered by (time, insertion counter), so two happenings at the same virtual
time come out in the order they were scheduled: the order is a function of the run, never
of hashing or memory addresses. Cancelled entries are marked dead and skipped when they
surface (the heapq documentation's lazy deletion); the heap is rebuilt when dead entries
outnumber the others, so its size stays bounded by what is scheduled.
"""

from __future__ import annotations

import heapq
import math
from typing import Any

COMPACT_MIN_ENTRIES = 256


class Entry:
    """A scheduled happening; `alive` turns false when it is cancelled. Made by
    `EventQueue.push` only, field by field: no `__init__` call for each of the run's many."""

    __slots__ = ("alive", "counter", "item", "t")
    t: float
    counter: int
    item: Any
    alive: bool


_new_entry = object.__new__


class EventQueue:
    """Future happenings in virtual time; `pop` gives the earliest one not cancelled."""

    def __init__(self) -> None:
        # (t, counter, entry): tuples compare in C, and the unique counter settles every tie
        self._heap: list[tuple[float, int, Entry]] = []
        self._counter = 0
        self._live = 0

    def push(self, t: float, item: Any) -> Entry:
        """Schedule `item` at virtual time `t`; keep the entry to cancel it later."""
        if t != t or t == math.inf:
            raise ValueError(f"cannot schedule at t={t}")
        entry = _new_entry(Entry)
        entry.t, entry.counter, entry.item, entry.alive = t, self._counter, item, True
        self._counter += 1
        self._live += 1
        heapq.heappush(self._heap, (t, entry.counter, entry))
        return entry

    def cancel(self, entry: Entry) -> None:
        """Unschedule `entry`; it is skipped when it surfaces."""
        if not entry.alive:
            raise ValueError(f"entry {entry.item!r} at t={entry.t} is already cancelled or done")
        entry.alive = False
        self._live -= 1
        if len(self._heap) > COMPACT_MIN_ENTRIES and len(self._heap) > 2 * self._live:
            self._heap = [e for e in self._heap if e[2].alive]
            heapq.heapify(self._heap)

    def pop(self) -> Entry | None:
        """The earliest entry not cancelled, removed; None when nothing is scheduled."""
        while self._heap:
            entry = heapq.heappop(self._heap)[2]
            if entry.alive:
                entry.alive = False
                self._live -= 1
                return entry
        return None

    def __len__(self) -> int:
        """Live entries."""
        return self._live

    def entries(self) -> int:
        """Entries held, dead ones included (for the memory bound)."""
        return len(self._heap)
