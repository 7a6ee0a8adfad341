"""The first event where two logs diverge, found through their digest chains.

Each log is replayed once into its digest chain (the columnar fold when it can); the first
seq where the chains differ is then found by bisection, in O(log n) digest comparisons,
and only the two events at that seq are read back. Two runs of the same deciders on the
same world events give identical chains, so this names the first event where two runs,
or a run and its re-recording, parted ways.

Two runs started with different configs (two policies on one world) differ at seq 0, and
so does every digest after it: with `ignore_config` the logs are compared event by event,
`run_started.config` left out, so the answer is the first decision that differs.
"""

from __future__ import annotations

from typing import Any

import attrs
import pyarrow as pa

from rolloutlog.core.digest import event_payload
from rolloutlog.events.errors import EventError, LogError
from rolloutlog.events.schema import batch_to_events
from rolloutlog.events.types import Event
from rolloutlog.replay.chain import DigestChain, first_difference
from rolloutlog.replay.fold import BadLog
from rolloutlog.replay.log_replay import Replay, replay_log
from rolloutlog.replay.source import LogSource


@attrs.frozen
class LogDiff:
    """Where logs `a` and `b` first differ; `seq` is None when they are identical."""

    seq: int | None
    a: Event | None  # the event of `a` at `seq` (None: `a` ends before it)
    b: Event | None
    a_events: int
    b_events: int
    error: tuple[str, BadLog] | None  # ("a" or "b", why) when a log stopped early

    def to_json(self) -> dict[str, Any]:
        return {
            "identical": self.seq is None and self.error is None,
            "seq": self.seq,
            "a": None if self.a is None else event_payload(self.a),
            "b": None if self.b is None else event_payload(self.b),
            "a_events": self.a_events,
            "b_events": self.b_events,
            "error": None if self.error is None else f"{self.error[0]}: {self.error[1]}",
        }


def diff_logs(a: LogSource, b: LogSource, *, ignore_config: bool = False) -> LogDiff:
    """Replay both logs into digest chains and bisect them for the first difference.

    A log that stops early (inconsistent, or unreadable past some batch) is compared as far
    as it was folded, and its error is reported beside the answer. When the two agree up to
    where one stopped, the events at that seq are compared: where the event there is the
    same in both or cannot be read from the log that stopped (not a log at all, a damaged
    batch), the error is the answer; else that seq is (one log may end there).
    """
    replay_a = replay_log(a, keep_digests=True, check_invariants=False)
    replay_b = replay_log(b, keep_digests=True, check_invariants=False)
    if ignore_config:
        seq = _first_unequal(a, b, min(replay_a.events, replay_b.events))
        if seq is None and replay_a.events != replay_b.events:
            seq = min(replay_a.events, replay_b.events)  # one log ends there
    else:
        seq = first_difference(_chain(replay_a), _chain(replay_b))
    if seq is None and (replay_a.error is not None or replay_b.error is not None):
        # Equal as far as both were folded, and one stopped there: the logs may still part
        # at that seq (one goes on with an event the fold refused, the other ends).
        seq = replay_a.events
    error = _stopping_error(replay_a, replay_b, seq)
    if seq is None:
        return LogDiff(None, None, None, replay_a.events, replay_b.events, error)
    event_a, event_b = _readable_event(a, seq), _readable_event(b, seq)
    if error is not None and _only_the_error(error[0], event_a, event_b):
        return LogDiff(None, None, None, replay_a.events, replay_b.events, error)
    return LogDiff(seq, event_a, event_b, replay_a.events, replay_b.events, error)


def _first_unequal(a: LogSource, b: LogSource, events: int) -> int | None:
    """The first of the first `events` seqs (both logs folded that far) where the two
    events differ, `run_started.config` left out."""
    for seq, event_a, event_b in zip(range(events), a.events(), b.events(), strict=False):
        if _without_config(event_a) != _without_config(event_b):
            return seq
    return None


def _without_config(event: Event) -> dict[str, Any]:
    payload = event_payload(event)
    payload.pop("config", None)
    return payload


def _chain(replay: Replay) -> DigestChain:
    if replay.digests is None:
        raise RuntimeError("replay_log(keep_digests=True) returned no digest chain")
    return replay.digests


def _stopping_error(a: Replay, b: Replay, seq: int | None) -> tuple[str, BadLog] | None:
    """The error of a log that stopped at or before the first difference, if one did."""
    for name, replay in (("a", a), ("b", b)):
        if replay.error is not None and (seq is None or seq >= replay.events):
            return name, replay.error
    return None


def _only_the_error(stopped: str, event_a: Event | None, event_b: Event | None) -> bool:
    """Whether nothing differs but where log `stopped` ("a" or "b") stopped: its event there
    is the other log's, or unreadable (the "(nothing)" of a log that ends would be a lie)."""
    own = event_a if stopped == "a" else event_b
    return own is None or event_a == event_b


def _readable_event(source: LogSource, seq: int) -> Event | None:
    try:
        return event_at(source, seq)
    except (EventError, LogError):
        return None


def event_at(source: LogSource, seq: int) -> Event | None:
    """The event at `seq`, decoding only the record batch that holds it."""
    first = 0
    for batch in source.batches():
        if seq < first + batch.num_rows:
            return _row(batch, seq - first)
        first += batch.num_rows
    return None


def _row(batch: pa.RecordBatch, row: int) -> Event:
    return batch_to_events(batch.slice(row, 1))[0]
