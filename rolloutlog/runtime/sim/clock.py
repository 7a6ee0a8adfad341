"""Virtual time: a priority queue of future world happenings.

Entries are ordered by (time, insertion counter), so two happenings at the same virtual
time come out in the order they were scheduled: the order is a function of the run, never
of hashing or memory addresses. Cancelled entries are marked dead and skipped when they
surface (the heapq documentation's lazy deletion). An entry moved to another time
(`move`) takes the counter a new entry would, so it comes out where that one would; moved
later, it keeps its earlier place in the heap, and when that place surfaces first the
entry is put back at its time (a server's next happening moves later with each
admission: one place, not one per move). Places no entry holds any more are skipped; the
heap is rebuilt when they outnumber the others, so its size stays bounded by what is
scheduled.
"""

from __future__ import annotations

import math
from heapq import heapify, heappop, heappush
from typing import Any

COMPACT_MIN_ENTRIES = 256
_INF = math.inf


class Entry:
    """A scheduled happening; `alive` turns false when it is cancelled or comes due. Made
    by `EventQueue.push` only, field by field: no `__init__` call for each of the run's many."""

    __slots__ = ("alive", "at", "counter", "item", "placed", "t")
    t: float
    counter: int
    item: Any
    alive: bool
    at: float  # its earliest place in the heap: time and counter (<= its own)
    placed: int


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
        if t != t or t == _INF:
            raise ValueError(f"cannot schedule at t={t}")
        counter = self._counter
        self._counter = counter + 1
        self._live += 1
        entry = _new_entry(Entry)
        entry.t, entry.counter, entry.item, entry.alive = t, counter, item, True
        entry.at, entry.placed = t, counter
        heappush(self._heap, (t, counter, entry))
        return entry

    def move(self, entry: Entry, t: float) -> None:
        """Schedule a live `entry` at `t` instead: as `cancel` and a `push` of its item (the
        same place among the happenings at `t`), without a new entry; a place is taken
        only when it moves before its earliest one."""
        if not entry.alive:
            raise ValueError(f"entry {entry.item!r} at t={entry.t} is cancelled or done")
        if t != t or t == _INF:
            raise ValueError(f"cannot schedule at t={t}")
        counter = self._counter
        self._counter = counter + 1
        entry.t = t
        entry.counter = counter
        if t < entry.at:
            entry.at = t
            entry.placed = counter
            heappush(self._heap, (t, counter, entry))
            self._compact()

    def cancel(self, entry: Entry) -> None:
        """Unschedule `entry`; it is skipped when it surfaces."""
        if not entry.alive:
            raise ValueError(f"entry {entry.item!r} at t={entry.t} is already cancelled or done")
        entry.alive = False
        self._live -= 1
        self._compact()

    def _compact(self) -> None:
        """Rebuild the heap without its dead places once they outnumber the live ones."""
        heap = self._heap
        if len(heap) > COMPACT_MIN_ENTRIES and len(heap) > 2 * self._live:
            self._heap = [e for e in heap if e[2].alive and e[2].placed == e[1]]
            heapify(self._heap)

    def pop(self) -> Entry | None:
        """The earliest entry not cancelled, removed; None when nothing is scheduled."""
        heap = self._heap
        while heap:
            _, counter, entry = heappop(heap)
            if not entry.alive or counter != entry.placed:  # cancelled, or moved before
                continue
            if counter == entry.counter:
                entry.alive = False
                self._live -= 1
                return entry
            entry.at = entry.t  # its earliest place, before it was moved later
            entry.placed = entry.counter
            heappush(heap, (entry.t, entry.counter, entry))
        return None

    def __len__(self) -> int:
        """Live entries."""
        return self._live

    def entries(self) -> int:
        """Entries held, dead ones included (for the memory bound)."""
        return len(self._heap)
