"""Read a rolloutlog log back, one verified record batch at a time.

Memory stays bounded by one record batch: the file is read message by message, never
loaded whole. Every batch is checked before anything is built from it: its CRC32C, its
dictionaries, and that seqs run gap-free from 0. Events are checked again with
`validate_event` after they are built (the pair of the writer's check).

A writer that dies mid-commit leaves an incomplete record batch at the end: a torn tail.
The reader keeps every complete batch before it and reports the cut in `torn_tail` and a
`TornTailWarning` (or raises `LogTornTailError` with `strict=True`); it never drops data
silently. Damage anywhere else is a `LogCorruptError` naming the seq range.

    reader = LogReader("run.arrow")
    for event in reader:          # or reader.columns() for plain lists per batch
        ...
    print(reader.info().counts)
"""

from __future__ import annotations

import os
import struct
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, Final

import attrs
import numpy as np
import pyarrow as pa
import pyarrow.ipc as ipc

from rolloutlog.events.errors import (
    EventError,
    LogCorruptError,
    LogError,
    LogSchemaError,
    LogSeqError,
    LogTornTailError,
    TornTailWarning,
)
from rolloutlog.events.log_rules import LogRules
from rolloutlog.events.schema import (
    KIND_NAMES,
    NOTE_PREFIX,
    WORK_DICTIONARY,
    BatchStamp,
    batch_checksum,
    check_schema,
    columns_to_events,
    iter_batch_columns,
    json_column,
    known_kinds,
    upgrade_batch,
)
from rolloutlog.events.types import Event
from rolloutlog.events.validate import FIELD_RULES, validate_event

_CONTINUATION: Final = b"\xff\xff\xff\xff"
_END_OF_STREAM: Final = _CONTINUATION + b"\x00\x00\x00\x00"
_BODY_LENGTH_SLOT: Final = 4 + 2 * 3  # vtable slot of Message.bodyLength (field 3, Message.fbs)


@attrs.frozen
class TornTail:
    """Bytes at the end of a log that hold no complete record batch, and were not used."""

    valid_bytes: int  # the log's complete messages end here
    cut_bytes: int
    last_seq: int | None  # the last seq kept; None when no batch was complete
    detail: str

    def describe(self) -> str:
        kept = "no event" if self.last_seq is None else f"seq 0..{self.last_seq}"
        cut = f"{self.cut_bytes} bytes cut at byte {self.valid_bytes}"
        return f"torn tail: {cut} ({self.detail}); kept {kept}"


@attrs.frozen
class LogInfo:
    """What `rolloutlog info` says about a log, built from its columns without building events."""

    path: str
    schema_version: int
    events: int
    first_seq: int | None
    last_seq: int | None
    batches: int
    counts: dict[str, int]
    config: dict[str, Any] | None
    closed: bool  # ends with the end-of-stream marker: its writer closed it
    valid_bytes: int
    torn_tail: TornTail | None

    def to_json(self) -> dict[str, Any]:
        """Plain data for `rolloutlog info --json`; `torn_tail` is the number of bytes cut."""
        data = attrs.asdict(self, recurse=False)
        data["torn_tail"] = 0 if self.torn_tail is None else self.torn_tail.cut_bytes
        data["torn_tail_detail"] = None if self.torn_tail is None else self.torn_tail.describe()
        return data


class LogReader:
    """Verified, streaming access to one log file. Each iteration reads the file afresh.

    `strict=True` raises `LogTornTailError` on a torn tail instead of keeping what is
    complete. `warn=False` leaves reporting a torn tail to the caller, through `torn_tail`.
    `torn_tail`, `closed` and `valid_bytes` are set once an iteration has reached the end.
    `upto`: read only the file's first `upto` bytes, each iteration the same ones (a log
    that its writer is still appending to: the committed prefix, `valid_bytes` of a pass).
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        strict: bool = False,
        warn: bool = True,
        upto: int | None = None,
    ):
        self.path = Path(path)
        if not self.path.is_file():
            raise LogError(f"{self.path}: no such log file")
        self.strict = strict
        self.warn = warn
        self.upto = upto
        self.schema_version: int | None = None
        self.kinds_known: int | None = None  # kinds in the log's dictionary (older: fewer)
        self.torn_tail: TornTail | None = None
        self.closed: bool | None = None
        self.valid_bytes: int | None = None
        self._batch_notes: list[dict[str, str]] = []  # per batch of the latest iteration
        self.rules = LogRules()  # the rules between events, after the latest iteration

    def __iter__(self) -> Iterator[Event]:
        return self.events()

    def events(self) -> Iterator[Event]:
        """Every event in seq order, each checked by `validate_event`."""
        for columns in self.columns():
            for event in columns_to_events(columns):
                validate_event(event)
                yield event

    def columns(self) -> Iterator[dict[str, list[Any]]]:
        """Per verified record batch, its columns as Python lists (see `schema.batch_columns`)."""
        yield from iter_batch_columns(self.batches())

    def batches(self) -> Iterator[pa.RecordBatch]:
        """Every complete record batch, verified (checksum, dictionaries, gap-free seqs).

        A batch of an older schema version is verified as written, then upgraded to
        `LOG_SCHEMA` (`schema.upgrade_batch`), so readers see one schema.
        """
        self.torn_tail, self.closed, self._batch_notes = None, None, []
        self.rules = LogRules()
        with self._source() as source:
            stream = self._open_stream(source)
            try:
                self.schema_version = version = check_schema(stream.schema)
            except LogSchemaError as error:
                raise LogSchemaError(f"{self.path}: {error}") from error
            self.valid_bytes = source.tell()
            last_seq = -1
            while True:
                try:
                    batch, metadata = stream.read_next_batch_with_custom_metadata()
                except StopIteration:
                    self._finish_at_end(source, last_seq)
                    return
                except (pa.ArrowException, OSError) as error:
                    self._finish_unreadable(source, last_seq, error)
                    return
                stamp = BatchStamp.from_metadata(metadata)
                if stamp is None:
                    raise LogCorruptError(
                        f"{self.path}: the record batch where seq {last_seq + 1} should start "
                        "has no readable rolloutlog stamp (seq range and checksum)",
                        first_seq=last_seq + 1,
                    )
                self._verify(batch, stamp, last_seq)
                try:
                    self.rules.batch(stamp.first_seq, batch)
                except EventError as error:  # what comes before the event is read
                    if error.seq is not None and error.seq > stamp.first_seq:
                        head = batch.slice(0, error.seq - stamp.first_seq)
                        yield upgrade_batch(head, version)
                    raise
                self._batch_notes.append(_notes_of(metadata))
                last_seq = stamp.last_seq
                self.valid_bytes = source.tell()
                yield upgrade_batch(batch, version)

    def notes(self, key: str) -> list[str]:
        """The text each verified batch carries under note `key` (`LogWriter`'s `notes`), in
        batch order; batches without it are left out."""
        for _ in self.batches():
            pass
        return [notes[key] for notes in self._batch_notes if key in notes]

    def info(self) -> LogInfo:
        """Schema version, seq range, config of run_started and counts by kind, in one scan."""
        counts = np.zeros(len(KIND_NAMES), dtype=np.int64)
        events, batches, config = 0, 0, None
        for batch in self.batches():
            if batches == 0:
                config = _run_config(batch)
            kinds = batch.column("kind").indices.to_numpy()
            counts += np.bincount(kinds, minlength=len(KIND_NAMES))
            batches += 1
            events += batch.num_rows
        return LogInfo(
            path=str(self.path),
            schema_version=_known(self.schema_version),
            events=events,
            first_seq=0 if events else None,
            last_seq=events - 1 if events else None,
            batches=batches,
            counts={kind: int(n) for kind, n in zip(KIND_NAMES, counts, strict=True) if n},
            config=config,
            closed=bool(self.closed),
            valid_bytes=_known(self.valid_bytes),
            torn_tail=self.torn_tail,
        )

    def _source(self) -> pa.NativeFile:
        """The file to read: all of it, or its first `upto` bytes (mapped, not copied)."""
        if self.upto is None:
            return pa.OSFile(str(self.path))
        with pa.memory_map(str(self.path)) as mapped:
            return pa.BufferReader(mapped.read_buffer(min(self.upto, mapped.size())))

    def _open_stream(self, source: pa.NativeFile) -> ipc.RecordBatchStreamReader:
        """The stream reader, past the schema; a file without a readable schema is no log."""
        if source.size() == 0:
            raise LogCorruptError(f"{self.path}: empty file, not a rolloutlog log")
        try:
            return ipc.open_stream(source)
        except (pa.ArrowException, OSError) as error:
            if self._holds_json_lines():
                raise LogCorruptError(
                    f"{self.path}: not a rolloutlog log but JSON Lines "
                    f"(rolloutlog import {self.path} -o LOG makes a log of it)"
                ) from error
            raise LogCorruptError(
                f"{self.path}: not a rolloutlog log (no readable Arrow IPC stream schema: {error})"
            ) from error

    def _holds_json_lines(self) -> bool:
        """Whether the file opens like an export (`{"kind": ...`): the user gave the JSONL
        where the log goes."""
        with self.path.open("rb") as file:
            return file.read(1) == b"{"

    def _verify(self, batch: pa.RecordBatch, stamp: BatchStamp, last_seq: int) -> None:
        """Refuse a damaged batch, or one whose seqs do not continue the log gap-free."""
        where = f"{self.path}: record batch of seq {stamp.first_seq}..{stamp.last_seq}"

        def corrupt(problem: str) -> LogCorruptError:
            return LogCorruptError(f"{where}: {problem}", stamp.first_seq, stamp.last_seq)

        try:
            batch.validate(full=True)  # before re-serializing: damaged offsets must not be followed
            checksum = batch_checksum(batch)
        except pa.ArrowException as error:
            raise corrupt(f"unreadable ({error})") from error
        if checksum != stamp.checksum:
            raise corrupt(f"checksum mismatch (stored {stamp.checksum:08x}, read {checksum:08x})")
        kinds = known_kinds(batch.column("kind").dictionary)
        if kinds is None or kinds != (self.kinds_known or kinds):
            raise corrupt("the kind dictionary is damaged")
        self.kinds_known = kinds
        if not batch.column("work").dictionary.equals(WORK_DICTIONARY):
            raise corrupt("the work dictionary is damaged")
        if batch.num_rows == 0 or batch.num_rows != stamp.last_seq - stamp.first_seq + 1:
            raise corrupt(f"holds {batch.num_rows} rows")
        _check_seqs(batch, stamp, last_seq + 1, self.path)
        if stamp.first_seq == 0:
            self._check_opening(batch, corrupt)

    def _check_opening(
        self, batch: pa.RecordBatch, corrupt: Callable[[str], LogCorruptError]
    ) -> None:
        """A log opens with run_started at seq 0, recording the schema version of the file
        and its config as a JSON object (what `info` shows, and every fold starts from)."""
        kind = batch.column("kind")[0].as_py()
        if kind != "run_started":
            raise corrupt(f"seq 0 is {kind}; a log opens with run_started")
        recorded = batch.column("schema_version")[0].as_py()
        if recorded != self.schema_version:
            raise corrupt(
                f"run_started.schema_version is {recorded}, the file's is {self.schema_version}"
            )
        try:
            problem = FIELD_RULES["config"].check(_run_config(batch))
        except EventError as error:
            problem = error.problem
        if problem is not None:
            raise corrupt(f"run_started.config: {problem}")

    def _finish_at_end(self, source: pa.NativeFile, last_seq: int) -> None:
        """The stream ended: with the end-of-stream marker (closed) or at end of file.

        The first commit writes the dictionaries and the first batch together, and a crash
        can cut it between them, or leave zeros that pyarrow takes for an old end marker:
        anything read past the last batch that is not the end marker is a torn commit.
        """
        valid_bytes, end, size = _known(self.valid_bytes), source.tell(), source.size()
        self.closed = end - len(_END_OF_STREAM) >= valid_bytes and _ends_closed(source, end)
        if self.closed and end < size:
            detail = "bytes after the end-of-stream marker"
        elif not self.closed and end > valid_bytes:
            detail = "an incomplete commit: the writer stopped mid-commit"
        else:
            return
        self._report(TornTail(valid_bytes, size - valid_bytes, _seq(last_seq), detail))

    def _finish_unreadable(self, source: pa.NativeFile, last_seq: int, error: Exception) -> None:
        """A message could not be read: a torn tail if it is the last commit, cut; damage if not.

        A file that ends with the end-of-stream marker was closed by its writer after its
        last commit, so nothing in it is torn: a message there that seems to run past the
        end has a damaged length (one flipped bit must not turn the batches after it into a
        tail that appending would cut off).
        """
        valid_bytes, size = _known(self.valid_bytes), source.size()
        self.closed = False
        walked = _walk(source, valid_bytes, size)
        first_commit = last_seq < 0  # its dictionaries can be whole and its batch missing
        torn = walked is not None and (walked > size or (walked == size and first_commit))
        if not torn or _ends_closed(source, size):
            raise LogCorruptError(
                f"{self.path}: unreadable message at byte {valid_bytes}, "
                f"where seq {last_seq + 1} should start: {error}",
                first_seq=last_seq + 1,
            ) from error
        detail = "an incomplete record batch: the writer stopped mid-commit"
        self._report(TornTail(valid_bytes, size - valid_bytes, _seq(last_seq), detail))

    def _report(self, tail: TornTail) -> None:
        self.torn_tail = tail
        if self.strict:
            raise LogTornTailError(f"{self.path}: {tail.describe()}", first_seq=_next(tail))
        if self.warn:
            warnings.warn(TornTailWarning(f"{self.path}: {tail.describe()}"), stacklevel=3)


def _check_seqs(batch: pa.RecordBatch, stamp: BatchStamp, expected: int, path: Path) -> None:
    """Seqs continue the log: the batch starts at `expected` and counts up by one."""
    if stamp.first_seq != expected:
        raise LogSeqError(
            f"{path}: seq gap: expected seq {expected}, next record batch starts at seq "
            f"{stamp.first_seq}",
            expected,
        )
    seqs = batch.column("seq").to_numpy()
    wrong = np.flatnonzero(seqs != np.arange(expected, expected + len(seqs)))
    if wrong.size:
        row = int(wrong[0])
        raise LogSeqError(
            f"{path}: seq gap: expected seq {expected + row}, found seq {int(seqs[row])}",
            expected + row,
        )


def _walk(source: pa.NativeFile, offset: int, size: int) -> int | None:
    """Where the messages from `offset` end: past `size` when the end of file cuts the last
    one, None when something there is no message.

    This tells a torn write (the last message declares more bytes than exist) from damage
    (a message that is complete but unreadable, or bytes that are not a message at all).
    """
    while offset < size:
        end = _message_end(source, offset, size)
        if end is None or end > size:
            return end
        offset = end
    return offset


def _ends_closed(source: pa.NativeFile, end: int) -> bool:
    """Whether the bytes before `end` are the end-of-stream marker that `close()` writes."""
    if end < len(_END_OF_STREAM):
        return False
    source.seek(end - len(_END_OF_STREAM))
    return bytes(source.read(len(_END_OF_STREAM))) == _END_OF_STREAM


def _message_end(source: pa.NativeFile, offset: int, size: int) -> int | None:
    """Where the IPC message at `offset` declares that it ends; None if it is no message."""
    source.seek(offset)
    prefix = source.read(8)
    if not _CONTINUATION.startswith(prefix[:4]):
        return None
    if len(prefix) < 8:
        return offset + 8
    length = int.from_bytes(prefix[4:], "little", signed=True)
    if length < 0:
        return None
    if offset + 8 + length > size:
        return offset + 8 + length  # the header itself is cut; no need to read it
    body = _body_length(source.read(length)) if length else 0
    return None if body is None else offset + 8 + length + body


def _notes_of(metadata: Any) -> dict[str, str]:
    """A batch's notes: its custom metadata under `rolloutlog.note.`, prefix taken off."""
    prefix = NOTE_PREFIX.encode()
    return {
        key[len(prefix) :].decode(): value.decode(errors="replace")
        for key, value in (metadata or {}).items()
        if key.startswith(prefix)
    }


def _body_length(metadata: bytes) -> int | None:
    """`Message.bodyLength` from the flatbuffer of an IPC message header; None if unreadable."""
    try:
        (root,) = struct.unpack_from("<I", metadata, 0)
        (back,) = struct.unpack_from("<i", metadata, root)
        vtable = root - back
        (vtable_size,) = struct.unpack_from("<H", metadata, vtable) if vtable >= 0 else (-1,)
        if vtable_size < 0:
            return None
        if vtable_size < _BODY_LENGTH_SLOT + 2:
            return 0
        (slot,) = struct.unpack_from("<H", metadata, vtable + _BODY_LENGTH_SLOT)
        (length,) = struct.unpack_from("<q", metadata, root + slot) if slot else (0,)
    except struct.error:
        return None
    return int(length) if length >= 0 else None


def _run_config(batch: pa.RecordBatch) -> Any:
    """The config of the batch's first row: run_started's, in a log's first batch."""
    return json_column(batch.slice(0, 1), "config")[0]


def _known(value: int | None) -> int:
    """A value that a finished scan has set; its absence is a bug of this module."""
    if value is None:
        raise RuntimeError("log scan finished without setting its position")
    return value


def _seq(last_seq: int) -> int | None:
    return last_seq if last_seq >= 0 else None


def _next(tail: TornTail) -> int:
    return 0 if tail.last_seq is None else tail.last_seq + 1


def read_log(path: str | os.PathLike[str], *, strict: bool = False) -> list[Event]:
    """Every event of the log at `path`, verified; see `LogReader` for torn tails."""
    return list(LogReader(path, strict=strict))
