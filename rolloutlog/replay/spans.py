"""What each episode and the trainer did over time, read from a log's columns in one pass.

The timeline page and the Chrome trace both draw the same facts: an episode is a span
from its dispatch to its arrival (or its cancellation), with a fate (trained at some age,
pruned, dropped stale, cancelled for a reason, failed, rejected by the curriculum, eval,
or unfinished when the log ends); the moments that discarded work are markers; versions
and batch ships are instants; and the trainer's time is split into busy, weight-update
and idle spans (`trainer_spans` says how they are derived). An episode interrupted and
resumed (`weight_update = interrupt`, `recycle`) has pauses: from each `episode_interrupted`
to its `episode_resumed` (to the episode's end if it never resumed), each with the version
the next segment was generated under, so that it is drawn as its segments, one per
version, with the gaps between them. Everything is kept in numpy
columns so that a log of millions of events costs a few arrays, not objects.
"""

from __future__ import annotations

import heapq
import math
from array import array
from collections.abc import Iterable, Iterator, Sequence
from typing import Any, Final

import attrs
import numpy as np

from rolloutlog.core.staleness import rollout_age
from rolloutlog.events.schema import KIND_NAMES, iter_batch_columns
from rolloutlog.events.types import CANCEL_REASONS
from rolloutlog.replay.source import LogSource

# An episode's fate, in the order the page's legend lists them.
OUTCOMES: Final = (
    "in_flight",  # neither arrived nor cancelled when the log ends
    "waiting",  # arrived; not yet shipped, dropped or scored away when the log ends
    "trained",
    "pruned",  # shipped in a batch, cut for zero advantage
    "dropped",  # dropped stale by the sink
    "cancelled",
    "failed",
    "rejected",  # its group was scored but not admitted by the curriculum
    "eval",  # scored eval work: never trained
)
DISCARDED: Final = frozenset({"pruned", "dropped", "cancelled", "failed", "rejected"})
# Markers: one per cancellation reason, then the sink's drops, failures, late arrivals.
MARKERS: Final = (
    *(f"cancelled_{reason}" for reason in CANCEL_REASONS),
    "dropped",
    "failed",
    "late",
)
TRAINER_SPANS: Final = ("busy", "weight_update", "idle")

_OUTCOME: Final = {name: code for code, name in enumerate(OUTCOMES)}
_MARKER: Final = {name: code for code, name in enumerate(MARKERS)}
_CANCEL: Final = {reason: code for code, reason in enumerate(CANCEL_REASONS)}


class Rows:
    """A table of a few number columns kept as numpy arrays, read row by row as tuples of
    Python numbers: a long run has a few rows per step (versions, ships, the trainer's
    spans, its waits), and 25,000 steps of them as tuples took about 20 MB."""

    def __init__(self, *columns: np.ndarray[Any, Any]) -> None:
        self.columns = columns

    @classmethod
    def of(cls, rows: Rows | Iterable[Sequence[Any]], types: Sequence[type]) -> Rows:
        """`rows` as a table whose k-th column holds `types[k]` (float or int)."""
        if isinstance(rows, Rows):
            return rows
        listed = list(rows)
        return cls(
            *(
                np.fromiter((row[k] for row in listed), dtype=kind, count=len(listed))
                for k, kind in enumerate(types)
            )
        )

    def __len__(self) -> int:
        return len(self.columns[0])

    def __iter__(self) -> Iterator[tuple[Any, ...]]:
        return zip(*(column.tolist() for column in self.columns), strict=True)

    def tolist(self) -> list[list[Any]]:
        """The rows as lists, as the timeline page's JSON writes them."""
        return [list(row) for row in self]

    def __eq__(self, other: object) -> bool:
        """Equal to the same rows, as `Rows` or as a list of tuples or lists."""
        if not isinstance(other, (Rows, list, tuple)):
            return NotImplemented
        return list(self) == [tuple(row) for row in other]

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"Rows({list(self)!r})"  # what a failed comparison shows


# each table's column types: (t, version); (t, step, cut, trained); (start, end, kind)
VERSION_ROW: Final = (float, int)
SHIP_ROW: Final = (float, int, int, int)
SPAN_ROW: Final = (float, float, int)


@attrs.frozen
class Spans:
    """A run's episodes, markers, instants and trainer spans as columns (times in seconds)."""

    t_start: float
    t_end: float
    group_ids: list[str]
    group_work: list[str]
    episode_ids: list[str]
    group: np.ndarray[Any, np.dtype[np.int32]]  # index into group_ids
    member: np.ndarray[Any, np.dtype[np.int32]]
    version: np.ndarray[Any, np.dtype[np.int32]]  # dispatch version
    start: np.ndarray[Any, np.dtype[np.float64]]  # dispatch
    end: np.ndarray[Any, np.dtype[np.float64]]  # arrival or cancellation; t_end if neither
    outcome: np.ndarray[Any, np.dtype[np.uint8]]  # index into OUTCOMES
    reason: np.ndarray[Any, np.dtype[np.int8]]  # index into CANCEL_REASONS; -1 if not cancelled
    age: np.ndarray[Any, np.dtype[np.int16]]  # rollout age when shipped or dropped; -1 if neither
    step: np.ndarray[Any, np.dtype[np.int32]]  # the batch that shipped it; -1 if none
    late: np.ndarray[Any, np.dtype[np.bool_]]  # an arrival came after its cancellation
    marker_t: np.ndarray[Any, np.dtype[np.float64]]
    marker_kind: np.ndarray[Any, np.dtype[np.uint8]]  # index into MARKERS
    marker_episode: np.ndarray[Any, np.dtype[np.int32]]
    pending: Rows  # (t, version) of each version_pending
    live: Rows
    ships: Rows  # (t, step, episodes cut, episodes trained)
    trainer: Rows  # (start, end, index into TRAINER_SPANS)
    # (episode index, interrupted at, resumed at, version resumed under; -1 if never), in
    # the order they were interrupted
    pauses: list[tuple[int, float, float, int]] = attrs.Factory(list)

    def segments(self) -> dict[int, list[tuple[float, float, int]]]:
        """Each paused episode as (start, end, version) per segment, the gaps left out."""
        bounds: dict[int, list[float]] = {}
        versions: dict[int, list[int]] = {}
        for i, stopped, resumed, version in self.pauses:
            if i not in bounds:
                bounds[i], versions[i] = [float(self.start[i])], [int(self.version[i])]
            bounds[i] += [stopped, resumed]
            versions[i].append(version)
        return {
            i: [
                (cuts[2 * k], cuts[2 * k + 1], version)
                for k, version in enumerate(versions[i])
                if version >= 0
            ]
            for i, cuts in ((i, [*b, float(self.end[i])]) for i, b in bounds.items())
        }

    @property
    def episodes(self) -> int:
        return len(self.episode_ids)


@attrs.frozen
class Sample:
    """Which episodes to read: those of every `every`-th group opened (in opening order),
    or of `group` alone, dispatched by `until` (log seconds). What is left out costs no
    memory, so a page of a log of millions of events can be drawn from a bounded part."""

    every: int = 1
    group: str | None = None
    until: float | None = None

    @property
    def partial(self) -> bool:
        """Whether some groups are left out: then only the episodes of groups it read are."""
        return self.every > 1 or self.group is not None

    def keeps(self, ordinal: int, group_id: str) -> bool:
        """Whether the `ordinal`-th group opened (from 0), `group_id`, is read."""
        return group_id == self.group if self.group is not None else ordinal % self.every == 0


def episodes_dispatched(source: LogSource, until: float | None = None) -> int:
    """How many episodes the log dispatches (by `until`), from its kind and t columns."""
    code, count = KIND_NAMES.index("episode_dispatched"), 0
    for batch in source.batches():
        hits = batch.column("kind").indices.to_numpy(zero_copy_only=False) == code
        if until is not None:
            hits &= batch.column("t").to_numpy(zero_copy_only=False) <= until
        count += int(hits.sum())
    return count


class _Builder:
    """Folds the rows of a log into growing Python lists; `finish` turns them into columns."""

    def __init__(self, sample: Sample) -> None:
        self.sample = sample
        self.opened_count = 0  # the groups it leaves out are counted, never kept
        self.t_start: float | None = None
        self.t_end = 0.0
        self.groups: dict[str, int] = {}
        self.group_work: list[str] = []
        self.index: dict[str, int] = {}
        self.ids: list[str] = []
        # typed arrays, not lists: a list of a million floats holds a million objects
        self.cols: dict[str, array[Any]] = {
            name: array(code) for name, code in _COLUMN_CODES.items()
        }
        self.markers = (array("d"), array("B"), array("i"))
        self.pending = _table_columns(VERSION_ROW)
        self.live = _table_columns(VERSION_ROW)
        self.ships = _table_columns(SHIP_ROW)
        self.pauses: list[list[Any]] = []  # [episode, interrupted at, resumed at, version]
        self.paused: dict[int, int] = {}  # episode -> its open pause

    def row(self, kind: str, t: float, c: dict[str, list[Any]], r: int) -> None:
        if self.t_start is None:
            self.t_start = t
        self.t_end = t
        handler = _HANDLERS.get(kind)
        if handler is not None:
            handler(self, t, c, r)

    def opened(self, t: float, c: dict[str, list[Any]], r: int) -> None:
        group_id, self.opened_count = c["group_id"][r], self.opened_count + 1
        if self.sample.keeps(self.opened_count - 1, group_id):
            self.groups[group_id] = len(self.group_work)
            self.group_work.append(c["work"][r])

    def dispatched(self, t: float, c: dict[str, list[Any]], r: int) -> None:
        until, group = self.sample.until, self.groups.get(c["group_id"][r], -1)
        if (group < 0 and self.sample.partial) or (until is not None and t > until):
            return
        episode_id = c["episode_id"][r]
        self.index[episode_id] = len(self.ids)
        self.ids.append(episode_id)
        cols = self.cols
        cols["group"].append(group)
        cols["member"].append(c["member"][r])
        cols["version"].append(c["policy_version"][r])
        cols["start"].append(t)
        for name, value in (("end", math.nan), ("outcome", 0), ("reason", -1), ("age", -1)):
            cols[name].append(value)
        cols["step"].append(-1)
        cols["late"].append(False)

    def arrived(self, t: float, c: dict[str, list[Any]], r: int, failed: bool) -> None:
        i = self.index.get(c["episode_id"][r])
        if i is None:
            return  # never dispatched: replay refuses such a log; the picture leaves it out
        cols = self.cols
        if cols["outcome"][i] == _OUTCOME["cancelled"]:
            cols["late"][i] = True
            self._mark(t, "late", i)
            return
        cols["end"][i] = t
        cols["outcome"][i] = _OUTCOME["failed" if failed else "waiting"]
        if failed:
            self._mark(t, "failed", i)

    def cancelled(self, t: float, c: dict[str, list[Any]], r: int) -> None:
        reason = c["reason"][r]
        for i in self._known(c["episode_ids"][r]):
            if math.isnan(self.cols["end"][i]):
                self.cols["end"][i] = t
            self.cols["outcome"][i] = _OUTCOME["cancelled"]
            self.cols["reason"][i] = _CANCEL[reason]
            self._mark(t, f"cancelled_{reason}", i)

    def dropped(self, t: float, c: dict[str, list[Any]], r: int) -> None:
        for i in self._known([c["episode_id"][r]]):
            self.cols["outcome"][i] = _OUTCOME["dropped"]
            self.cols["age"][i] = c["age"][r]
            self._mark(t, "dropped", i)

    def scored(self, t: float, c: dict[str, list[Any]], r: int) -> None:
        group = self.groups.get(c["group_id"][r])
        work = None if group is None else self.group_work[group]
        fate = "eval" if work == "eval" else None if c["admitted"][r] else "rejected"
        if fate is not None:
            for i in self._known(c["episode_ids"][r]):
                self.cols["outcome"][i] = _OUTCOME[fate]

    def shipped(self, t: float, c: dict[str, list[Any]], r: int) -> None:
        step, cut, trained = c["step"][r], c["episode_ids"][r], set(c["trained_ids"][r])
        cols = self.cols
        for i in self._known(cut):
            cols["outcome"][i] = _OUTCOME["trained" if self.ids[i] in trained else "pruned"]
            cols["age"][i] = rollout_age(cols["version"][i], step)
            cols["step"][i] = step
        _append(self.ships, (t, step, len(cut), len(trained)))

    def interrupted(self, t: float, c: dict[str, list[Any]], r: int) -> None:
        for i in self._known([c["episode_id"][r]]):
            self.paused[i] = len(self.pauses)
            self.pauses.append([i, t, math.nan, -1])

    def resumed(self, t: float, c: dict[str, list[Any]], r: int) -> None:
        for i in self._known([c["episode_id"][r]]):
            k = self.paused.pop(i, None)
            if k is not None:
                self.pauses[k][2:] = [t, c["policy_version"][r]]

    def _known(self, episode_ids: Iterable[str]) -> Iterable[int]:
        for episode_id in episode_ids:
            i = self.index.get(episode_id)
            if i is not None:
                yield i

    def _mark(self, t: float, kind: str, i: int) -> None:
        self.markers[0].append(t)
        self.markers[1].append(_MARKER[kind])
        self.markers[2].append(i)

    def finish(self, group_ids: list[str]) -> Spans:
        t_start = 0.0 if self.t_start is None else self.t_start
        cols = self.cols
        end = np.array(cols["end"], dtype=np.float64)
        end[np.isnan(end)] = self.t_end
        pauses = [
            (i, stopped, float(end[i]) if math.isnan(resumed) else resumed, version)
            for i, stopped, resumed, version in self.pauses
        ]
        pending, live, ships = (
            Rows(*map(np.array, c)) for c in (self.pending, self.live, self.ships)
        )
        return Spans(
            t_start=t_start,
            t_end=self.t_end,
            group_ids=group_ids,
            group_work=self.group_work,
            episode_ids=self.ids,
            group=np.array(cols["group"], dtype=np.int32),
            member=np.array(cols["member"], dtype=np.int32),
            version=np.array(cols["version"], dtype=np.int32),
            start=np.array(cols["start"], dtype=np.float64),
            end=end,
            outcome=np.array(cols["outcome"], dtype=np.uint8),
            reason=np.array(cols["reason"], dtype=np.int8),
            age=np.array(cols["age"], dtype=np.int16),
            step=np.array(cols["step"], dtype=np.int32),
            late=np.array(cols["late"], dtype=np.bool_),
            marker_t=np.array(self.markers[0], dtype=np.float64),
            marker_kind=np.array(self.markers[1], dtype=np.uint8),
            marker_episode=np.array(self.markers[2], dtype=np.int32),
            pending=pending,
            live=live,
            ships=ships,
            trainer=trainer_spans(t_start, self.t_end, ships, pending, live),
            pauses=pauses,
        )


_ARRAY_CODES: Final = {float: "d", int: "q"}


def _table_columns(types: Sequence[type]) -> tuple[array[Any], ...]:
    """Empty typed arrays for a table's columns while it is read."""
    return tuple(array(_ARRAY_CODES[kind]) for kind in types)


def _append(columns: Sequence[array[Any]], row: Sequence[Any]) -> None:
    for column, value in zip(columns, row, strict=True):
        column.append(value)


# each episode column's type while it is read (`array` codes), then its numpy dtype
_COLUMN_CODES: Final = {
    "group": "i",
    "member": "i",
    "version": "i",
    "start": "d",
    "end": "d",
    "outcome": "B",
    "reason": "b",
    "age": "h",
    "step": "i",
    "late": "B",
}

_HANDLERS: Final[dict[str, Any]] = {
    "group_opened": _Builder.opened,
    "episode_dispatched": _Builder.dispatched,
    "episode_completed": lambda b, t, c, r: b.arrived(t, c, r, failed=False),
    "episode_failed": lambda b, t, c, r: b.arrived(t, c, r, failed=True),
    "episodes_cancelled": _Builder.cancelled,
    "episode_dropped": _Builder.dropped,
    "group_scored": _Builder.scored,
    "batch_shipped": _Builder.shipped,
    "version_pending": lambda b, t, c, r: _append(b.pending, (t, c["version"][r])),
    "version_live": lambda b, t, c, r: _append(b.live, (t, c["version"][r])),
    "episode_interrupted": _Builder.interrupted,
    "episode_resumed": _Builder.resumed,
}


def read_spans(source: LogSource, sample: Sample = Sample()) -> Spans:
    """The spans of every episode in `source` that `sample` reads (all by default), from
    one columnar pass over its batches; versions, ships and the trainer's spans whole."""
    builder = _Builder(sample)
    for columns in iter_batch_columns(source.batches()):
        kinds, times = columns["kind"], columns["t"]
        for r, kind in enumerate(kinds):
            builder.row(kind, times[r], columns, r)
    return builder.finish(list(builder.groups))


def trainer_spans(
    t_start: float,
    t_end: float,
    ships: Rows | Sequence[tuple[float, int, int, int]],
    pending: Rows | Sequence[tuple[float, int]],
    live: Rows | Sequence[tuple[float, int]],
) -> Rows:
    """The trainer's busy, weight-update and idle spans, derived from ships and versions.

    The trainer takes batches one at a time. It is *busy* from a `batch_shipped` that
    finds it free (or from the `version_live` that frees it while a shipped batch waits)
    until the next `version_pending`; the *weight update* runs from `version_pending` to
    its `version_live` (inference waits for weights); the rest is *idle* (the trainer
    waits for data). A batch whose version is never published (a skipped version) extends
    the busy span to the next publication; a busy span still open at the end closes there.
    """
    spans = _table_columns(SPAN_ROW)
    busy_since: float | None = None
    update_since: float | None = None
    last_step, published = 0, 0
    for t, what, number in _moments(ships, pending, live):
        if what == 0:
            last_step = max(last_step, number)
            if busy_since is None and update_since is None:
                busy_since = t
        elif what == 1:
            published = max(published, number)
            if busy_since is not None:
                _append(spans, (busy_since, t, 0))
            busy_since, update_since = None, t
        else:
            if update_since is not None:
                _append(spans, (update_since, t, 1))
            update_since = None
            if last_step > published and busy_since is None:
                busy_since = t
    for since, code in ((busy_since, 0), (update_since, 1)):
        if since is not None and since < t_end:
            _append(spans, (since, t_end, code))
    return _with_idle(Rows(*map(np.array, spans)), t_start, t_end)


def _moments(
    ships: Rows | Sequence[tuple[float, int, int, int]],
    pending: Rows | Sequence[tuple[float, int]],
    live: Rows | Sequence[tuple[float, int]],
) -> Iterator[tuple[float, int, int]]:
    """(t, what, number) of each ship (0, its step), version pending (1) and live (2), in
    time order; at one instant the log's order is kept: batch s ships before v_s is
    announced, v_v is announced before it goes live, and goes live before v_(v+1) is
    announced (an update of no time, the next one at once: sorting by kind paired them
    wrong)."""
    tables = (Rows.of(ships, SHIP_ROW), Rows.of(pending, VERSION_ROW), Rows.of(live, VERSION_ROW))
    t = np.concatenate([table.columns[0] for table in tables])
    number = np.concatenate([table.columns[1] for table in tables]).astype(np.int64)
    what = np.repeat(np.arange(3), [len(table) for table in tables])
    rank = 2 * number + what - 1  # 2s-1, 2v, 2v+1 as above
    order = np.lexsort((number, what, rank, t))
    return zip(t[order].tolist(), what[order].tolist(), number[order].tolist(), strict=True)


def _with_idle(spans: Rows, t_start: float, t_end: float) -> Rows:
    """`spans` in order of (start, end, kind), with the gaps between them (and before and
    after) filled as idle."""
    start, end, kind = spans.columns
    order = np.lexsort((kind, end, start))
    start, end, kind = start[order], end[order], kind[order]
    # the end of all spans before each one (t_start before the first), then after the last
    reach = np.maximum.accumulate(np.concatenate(([t_start], end)))
    before = np.flatnonzero(start > reach[:-1])
    gap_start, gap_end = reach[before], start[before]
    if t_end > reach[-1]:
        before = np.append(before, len(start))
        gap_start, gap_end = np.append(gap_start, reach[-1]), np.append(gap_end, t_end)
    # each gap goes just before the span it precedes (a stable sort on that position)
    at = np.argsort(np.concatenate((before, np.arange(len(start)))), kind="stable")
    return Rows(
        np.concatenate((gap_start, start))[at],
        np.concatenate((gap_end, end))[at],
        np.concatenate((np.full(len(before), 2, dtype=np.int64), kind.astype(np.int64)))[at],
    )


def pack_lanes(starts: Sequence[float], ends: Sequence[float]) -> list[int]:
    """The lowest free lane for each interval, taken in order of start (ties: input order).

    A lane is free again once the interval holding it has ended (at or before the next
    start). Used for inference slots and for the page's rows.
    """
    lanes = [0] * len(starts)
    free: list[int] = []
    busy: list[tuple[float, int]] = []
    count = 0
    for i in sorted(range(len(starts)), key=starts.__getitem__):
        while busy and busy[0][0] <= starts[i]:
            heapq.heappush(free, heapq.heappop(busy)[1])
        if free:
            lane = heapq.heappop(free)
        else:
            lane, count = count, count + 1
        lanes[i] = lane
        heapq.heappush(busy, (ends[i], lane))
    return lanes
