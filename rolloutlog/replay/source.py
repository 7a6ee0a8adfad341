"""Where a replay reads a log from: a log file, or events already in memory.

Replay reads a log more than once (the columnar fold hands over to the plain fold, a
divergence is described from a second pass, `diff` fetches the two events it names), so
a source is re-readable: each call to `events()` or `batches()` starts from seq 0.
`LogFile` (`open_log`) makes a log file one; `MemoryLog` makes a list of events one,
building the same record batches a `LogWriter` would write.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from typing import Protocol

import pyarrow as pa

from rolloutlog.events.log_reader import LogReader, TornTail
from rolloutlog.events.log_writer import DEFAULT_BATCH_EVENTS
from rolloutlog.events.output_lock import writer_of
from rolloutlog.events.schema import events_to_batch
from rolloutlog.events.types import Event


class LogSource(Protocol):
    """A log that can be read from the start any number of times."""

    def events(self) -> Iterator[Event]:
        """Every event in seq order."""
        ...

    def batches(self) -> Iterator[pa.RecordBatch]:
        """The log as record batches of `events.schema.LOG_SCHEMA`, in seq order."""
        ...


class MemoryLog:
    """A list of events as a log source (tests, the equivalence harness, a live loop)."""

    def __init__(self, events: Sequence[Event], *, batch_events: int = DEFAULT_BATCH_EVENTS):
        if batch_events < 1:
            raise ValueError(f"batch_events must be >= 1, got {batch_events}")
        self.log = events
        self.batch_events = batch_events

    def events(self) -> Iterator[Event]:
        return iter(self.log)

    def batches(self) -> Iterator[pa.RecordBatch]:
        size = self.batch_events
        for start in range(0, len(self.log), size):
            yield events_to_batch(self.log[start : start + size])


class LogFile:
    """A log file as a source, read by `LogReader`; a torn tail is kept out of the events.

    `torn_tail` is the tail found by the last pass that read to the end. `LogReader` forgets
    its tail when a pass starts, and replay's later passes often stop early (the one event
    `show` and `diff` print, the state `verify` describes a divergence from): they must not
    hide a tail that an earlier, whole pass found.

    A log that a process is still writing (it holds the log's lock, `events.output_lock`)
    is read up to what was committed when it was opened, by every pass alike, so that the
    passes agree: `writer` names that process and `prefix_events` counts the events read.
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.reader = LogReader(path, warn=False)
        self.torn_tail: TornTail | None = None
        self.writer = writer_of(path)
        self.prefix_events: int | None = None
        if self.writer is not None:
            info = self.reader.info()
            self.reader = LogReader(path, warn=False, upto=info.valid_bytes)
            self.prefix_events = info.events

    def events(self) -> Iterator[Event]:
        yield from self.reader.events()
        self.torn_tail = self.reader.torn_tail

    def batches(self) -> Iterator[pa.RecordBatch]:
        yield from self.reader.batches()
        self.torn_tail = self.reader.torn_tail


def open_log(path: str | os.PathLike[str]) -> LogFile:
    """A log file as a source; a torn tail is kept out and reported in `torn_tail`."""
    return LogFile(path)
