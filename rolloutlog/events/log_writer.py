"""Write a rolloutlog log: the public recording API, for our drivers and for your orchestrator.

A log is one Arrow IPC *stream* file (docs/log-format.md). `LogWriter.append` gives each
event the next seq (gap-free from 0), checks it with `validate_event` and buffers it. A
commit turns the buffer into one record batch stamped with its seq range and a CRC32C,
writes it with a single `write` and fsyncs: a group commit, so durability costs one fsync
per batch, not per event. A batch is committed when `batch_events` events are buffered,
on `commit()` and on `close()`. Events not yet committed are lost if the process dies;
call `commit()` where your orchestrator needs a durable point.

    from rolloutlog.events.log_writer import LogWriter
    from rolloutlog.events.schema import SCHEMA_VERSION
    from rolloutlog.events.types import RunStarted, VersionPending, RunFinished

    with LogWriter("run.arrow") as log:
        log.append(RunStarted(t=0.0, config={"group_size": 8}, seed=0,
                              schema_version=SCHEMA_VERSION, code_version="my-orch 2.1"))
        log.append(VersionPending(t=12.5, version=1))
        log.commit()                   # durable from here on
        log.append(RunFinished(t=60.0, reason="steps"))

A recorder that has more to say about a batch than its events (the orchestrator's own ids,
what an import reconstructed) passes `notes`: called with each batch's events at its
commit, it returns text stored in that batch's custom metadata under `rolloutlog.note.KEY`
(`LogReader.notes(KEY)` reads them back, in batch order).

Appending to an existing log (`mode="append"`): the stream format has an end-of-stream
marker, after which nothing may follow. Reopening verifies the whole log, truncates the
marker (and a torn tail, with a `TornTailWarning`), continues at the next seq and writes
the marker again on close. Only the writer that holds the file's lock may write it: the
output's lock (`events.output_lock`, which names the holder's pid to a second process) and
an exclusive `flock` on the file (which refuses a second writer in the same process).
A failed write (a full disk) raises the `OSError` with the log's path as its filename.
"""

from __future__ import annotations

import fcntl
import os
import warnings
from collections.abc import Callable, Iterable, Sequence
from contextlib import ExitStack
from operator import attrgetter
from pathlib import Path
from types import TracebackType
from typing import Any, Final, Literal, TypeAlias

import pyarrow as pa
import pyarrow.ipc as ipc

from rolloutlog.events.errors import EventError, LogError, LogSeqError, TornTailWarning
from rolloutlog.events.log_reader import LogReader, TornTail
from rolloutlog.events.log_rules import LogRules
from rolloutlog.events.output_lock import holding
from rolloutlog.events.schema import (
    KIND_NAMES,
    LOG_SCHEMA,
    NOTE_PREFIX,
    SCHEMA_VERSION,
    BatchStamp,
    batch_checksum,
    events_to_batch,
)
from rolloutlog.events.types import UNSEQUENCED, Event, RunStarted, with_seq
from rolloutlog.events.validate import validate_event
from rolloutlog.events.whole_file import naming, written_whole

WriteMode = Literal["create", "append", "overwrite"]
Compression = Literal["zstd", "lz4"] | None
DEFAULT_BATCH_EVENTS: Final = 4096
BATCH_EVENTS_MAX: Final = 1 << 20  # one buffered batch must stay small beside the run
_SEQ_OF: Final = attrgetter("seq")
Notes: TypeAlias = Callable[[Sequence[Event]], dict[str, str]]


class LogWriter:
    """An open log, held exclusively (an advisory `flock`) until `close()`; one thread appends.

    `mode`: `create` refuses an existing file, `overwrite` replaces it, `append` continues
    it (or creates it). `fsync=False` lets commits stay in the OS cache (tests, bulk
    conversion); `close()` always fsyncs. `compression` compresses each Arrow buffer; zstd
    makes a log about 20 times smaller for under a microsecond per event, and every Arrow
    reader decompresses it transparently. `check_events=False` skips `validate_event` on
    append, for a producer whose events are built by the deciders themselves (the
    simulator); `verify` still checks every value of the written log. `notes`: the text
    each committed batch carries besides its events (see the module docstring).
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        mode: WriteMode = "create",
        batch_events: int = DEFAULT_BATCH_EVENTS,
        fsync: bool = True,
        compression: Compression = "zstd",
        check_events: bool = True,
        notes: Notes | None = None,
    ) -> None:
        if not 1 <= batch_events <= BATCH_EVENTS_MAX:
            raise ValueError(f"batch_events must be in [1, {BATCH_EVENTS_MAX}], got {batch_events}")
        self.path = Path(path)
        self.batch_events = batch_events
        self._fsync = fsync
        self._check_events = check_events
        self._notes = notes
        self._buffer: list[Event] = []
        self._state: Literal["open", "failed", "closed"] = "open"
        self._held = ExitStack()  # the output's lock, released by `close()`
        with ExitStack() as opening:
            opening.enter_context(holding(self.path))
            self._fd = _open_locked(self.path, mode)
            self._held = opening.pop_all()
        try:
            with naming(self.path):
                self.recovered_tail, self._next_seq = self._prepare(mode)
        except BaseException:
            self._release()
            raise
        self._outbox = _Outbox(keep_dictionaries=self._next_seq == 0)
        options = ipc.IpcWriteOptions(compression=compression)
        self._stream = ipc.new_stream(self._outbox, LOG_SCHEMA, options=options)

    @property
    def next_seq(self) -> int:
        """The seq that the next appended event gets; also the number of events appended."""
        return self._next_seq

    def append(self, event: Event) -> Event:
        """Sequence, check and buffer `event`; returns it with its seq.

        An event that already carries a seq must carry exactly the next one (a re-recorded
        or imported log); otherwise `LogSeqError`. A bad event raises `EventError` and is
        not written; the writer stays usable.
        """
        self._require_open()
        seq = self._next_seq
        if event.seq != seq:
            if event.seq != UNSEQUENCED:
                raise LogSeqError(
                    f"{self.path}: {event.kind} carries seq {event.seq}, the next seq is {seq}",
                    event.seq,
                )
            event = with_seq(event, seq)
        if self._check_events:
            validate_event(event)
        _check_place(event)
        if self._check_events:
            self._rules.event(seq, event.kind, getattr(event, "version", None))
        self._buffer.append(event)
        self._next_seq = seq + 1
        if len(self._buffer) >= self.batch_events:
            self.commit()
        return event

    def extend(self, events: Sequence[Event]) -> None:
        """`append` each of `events` in order, with the same checks and the same commits.

        Events that already carry the next seqs, none of them `run_started`, with event
        checks off (a reaction loop's answer, numbered by the loop) are buffered as a whole:
        per-event work is what bounds a simulated run's logging.
        """
        self._require_open()
        seq, count = self._next_seq, len(events)
        if (
            self._check_events
            or seq == 0
            or list(map(_SEQ_OF, events)) != list(range(seq, seq + count))
            or RunStarted in map(type, events)
        ):
            for event in events:
                self.append(event)
            return
        self._next_seq = seq + count
        buffer = self._buffer
        if len(buffer) + count < self.batch_events:  # the common case: no commit due
            buffer.extend(events)
            return
        while events:
            room = self.batch_events - len(self._buffer)
            self._buffer.extend(events[:room])
            events = events[room:]
            if len(self._buffer) >= self.batch_events:
                self.commit()

    def commit(self) -> None:
        """Write the buffered events as one record batch and fsync: they are durable now."""
        self._require_open()
        if not self._buffer:
            return
        events, self._buffer = self._buffer, []
        batch = events_to_batch(events)
        stamp = BatchStamp(events[0].seq, events[-1].seq, batch_checksum(batch))
        metadata = stamp.to_metadata()
        if self._notes is not None:
            notes = self._notes(events).items()
            metadata |= {f"{NOTE_PREFIX}{key}".encode(): text.encode() for key, text in notes}
        self._guarded(
            lambda: self._stream.write_batch(batch, custom_metadata=metadata), self._fsync
        )

    def close(self) -> None:
        """Commit, write the end-of-stream marker, fsync and release the file. Idempotent."""
        if self._state == "closed":
            return
        try:
            if self._state == "open":
                self.commit()
                self._guarded(self._stream.close, sync=True)
        finally:
            self._state = "closed"
            self._release()

    def __enter__(self) -> LogWriter:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()  # appended events are facts, even when the caller then failed

    def _release(self) -> None:
        os.close(self._fd)
        self._held.close()

    def _prepare(self, mode: WriteMode) -> tuple[TornTail | None, int]:
        """Place the file at its append point; returns the tail cut and the next seq."""
        self._rules = LogRules()
        if mode != "append" or os.fstat(self._fd).st_size == 0:
            os.ftruncate(self._fd, 0)
            _write_all(self._fd, LOG_SCHEMA.serialize().to_pybytes())
            os.fsync(self._fd)
            _sync_directory(self.path)
            return None, 0
        reader = LogReader(self.path, warn=False)
        info = reader.info()
        if reader.schema_version != SCHEMA_VERSION:  # one file, one schema
            raise LogError(
                f"{self.path}: written with schema_version {reader.schema_version}; this "
                f"rolloutlog appends only to schema_version {SCHEMA_VERSION} logs"
            )
        if reader.kinds_known not in (None, len(KIND_NAMES)):  # new kinds have no code there
            raise LogError(
                f"{self.path}: written by an older rolloutlog that knew {reader.kinds_known} "
                f"event kinds; appending may write kinds its dictionary lacks"
            )
        if info.torn_tail is not None:
            warnings.warn(
                TornTailWarning(f"{self.path}: appending after {info.torn_tail.describe()}"),
                stacklevel=3,
            )
        self._rules = reader.rules
        os.ftruncate(self._fd, info.valid_bytes)  # drops the end-of-stream marker and the tail
        os.lseek(self._fd, 0, os.SEEK_END)
        return info.torn_tail, info.events

    def _guarded(self, write: Callable[[], object], sync: bool) -> None:
        """Run a stream write and put its bytes in the file; any failure leaves the writer failed.

        After a failed write the file may end in a torn commit and the stream writer's state
        is unknown: refuse further writes, so that reopening in append mode recovers cleanly.
        """
        try:
            with naming(self.path):
                write()
                _write_all(self._fd, self._outbox.take())
                if sync:
                    os.fsync(self._fd)
        except BaseException:
            self._state = "failed"
            raise

    def _require_open(self) -> None:
        if self._state != "open":
            raise LogError(
                f"{self.path}: writer is {self._state}"
                + ("; reopen it with mode='append' to recover" if self._state == "failed" else "")
            )


def _check_place(event: Event) -> None:
    """Log-level rules: seq 0 is run_started, which records this writer's schema version."""
    if (event.seq == 0) != isinstance(event, RunStarted):
        raise EventError(event.kind, event.seq, "seq", "a log opens with run_started, at seq 0")
    if isinstance(event, RunStarted) and event.schema_version != SCHEMA_VERSION:
        raise EventError(
            event.kind,
            event.seq,
            "schema_version",
            f"this writer writes schema_version {SCHEMA_VERSION}, got {event.schema_version}",
        )


class _Outbox:
    """A file-like buffer for pyarrow's stream writer: holds its bytes until the commit writes them.

    pyarrow starts every stream with the schema message, and its first batch with the
    dictionaries. The file already holds the schema (written at creation, so that every
    log names its version) and, when appending after events, the dictionaries: the first
    bytes taken skip them.
    """

    def __init__(self, *, keep_dictionaries: bool) -> None:
        self.closed = False
        self._data = bytearray()
        self._started = False
        self._keep_dictionaries = keep_dictionaries

    def write(self, data: Any) -> int:
        self._data += data
        return len(data)

    def flush(self) -> None:
        """Nothing to do: bytes reach the file at commit."""

    def close(self) -> None:
        self.closed = True

    def take(self) -> bytes:
        data, self._data = bytes(self._data), bytearray()
        if not self._started:
            self._started = True
            data = data[_leading_bytes(data, self._keep_dictionaries) :]
        return data


def _leading_bytes(data: bytes, keep_dictionaries: bool) -> int:
    """How many bytes of a fresh stream precede what the file still needs."""
    source = pa.BufferReader(data)
    messages = ipc.MessageReader.open_stream(source)
    while True:
        start = source.tell()
        try:
            message = messages.read_next_message()
        except StopIteration:
            return int(start)
        if message.type == "record batch" or (message.type == "dictionary" and keep_dictionaries):
            return int(start)


def _open_locked(path: Path, mode: WriteMode) -> int:
    """Open `path` for writing and take its exclusive lock, or refuse with a clear error."""
    flags = os.O_RDWR | os.O_CREAT | (os.O_EXCL if mode == "create" else 0)
    try:
        fd = os.open(path, flags, 0o644)
    except FileExistsError as error:
        raise LogError(f"{path}: already exists (use mode='append' or 'overwrite')") from error
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError as error:
        os.close(fd)
        raise LogError(f"{path}: another writer holds this log") from error
    return fd


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def _sync_directory(path: Path) -> None:
    """fsync the directory of `path`, so that a new or renamed file's name is durable too."""
    directory = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(directory)
    finally:
        os.close(directory)


def write_log(
    path: str | os.PathLike[str],
    events: Iterable[Event],
    *,
    overwrite: bool = False,
    batch_events: int = DEFAULT_BATCH_EVENTS,
) -> int:
    """Write `events` as a new, closed log; returns how many. All or nothing.

    The log is written beside `path` under a temporary name and renamed into place when
    complete, so a reader never sees half of it and a bad event leaves no file behind.
    """
    target = Path(path)
    if target.exists() and not overwrite:
        raise LogError(f"{target}: already exists (pass overwrite=True to replace it)")
    with (
        written_whole(target) as temporary,
        LogWriter(temporary, mode="overwrite", batch_events=batch_events, fsync=False) as log,
    ):
        for event in events:
            log.append(event)
    _sync_directory(target)
    return log.next_seq
