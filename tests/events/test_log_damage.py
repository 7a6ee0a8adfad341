"""A damaged log, and files that are not logs: refused naming the place."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.ipc as ipc
import pytest

from rolloutlog.events.errors import (
    EventError,
    LogCorruptError,
    LogError,
    LogSchemaError,
    LogSeqError,
)
from rolloutlog.events.log_reader import LogReader, read_log
from rolloutlog.events.log_writer import Compression, LogWriter
from rolloutlog.events.schema import (
    LOG_SCHEMA,
    SCHEMA_VERSION,
    SCHEMA_VERSION_KEY,
    BatchStamp,
    events_to_batch,
)
from rolloutlog.events.schema import batch_checksum as checksum_of
from rolloutlog.events.types import (
    Event,
    with_seq,
)
from tests.events.log_files import config_cell_log, run_events, sequenced, write_batches


def body_range(data: bytes, start: int) -> range:
    """The bytes of the body of the IPC message at `start`, found with plain pyarrow."""
    message = ipc.read_message(pa.BufferReader(data[start:]))
    body_start = start + 8 + message.metadata.size
    return range(body_start, body_start + message.body.size)


@pytest.mark.parametrize("compression", [None, "zstd"])
def test_a_flipped_byte_in_a_batch_body_is_detected(
    tmp_path: Path, compression: Compression
) -> None:
    whole = tmp_path / "whole.arrow"
    events = run_events(8)
    starts = write_batches(whole, events, batch_events=4, compression=compression)
    data = whole.read_bytes()
    damaged, detected = tmp_path / "damaged.arrow", 0
    for offset in body_range(data, starts[1]):  # the batch of seq 4..7
        flipped = bytearray(data)
        flipped[offset] ^= 0xFF
        damaged.write_bytes(flipped)
        try:
            assert read_log(damaged) == sequenced(events), offset  # padding: nothing changed
        except LogCorruptError as error:
            detected += 1
            assert error.first_seq == 4
            assert error.last_seq in (7, None)  # None: the batch could not even be decoded
    assert detected > 0
    if compression is None:  # uncompressed, every changed value is a checksum mismatch
        flipped = bytearray(data)
        flipped[data.index(b"g6/0", starts[1])] ^= 0x01
        damaged.write_bytes(flipped)
        with pytest.raises(LogCorruptError, match=r"seq 4\.\.7: checksum mismatch"):
            read_log(damaged)


def write_raw(
    path: Path, batches: list[tuple[list[Event], int, int]], schema: pa.Schema = LOG_SCHEMA
) -> None:
    """A stream written by plain pyarrow, with stamps as given: for logs our writer refuses."""
    with ipc.new_stream(str(path), schema) as stream:
        for events, first, last in batches:
            batch = events_to_batch(events)
            stamp = BatchStamp(first, last, checksum_of(batch))
            stream.write_batch(batch, custom_metadata=stamp.to_metadata())


def test_a_seq_gap_between_batches_is_refused_naming_the_seq(tmp_path: Path) -> None:
    events = sequenced(run_events(6))
    later = [with_seq(event, event.seq + 2) for event in events[3:]]
    write_raw(tmp_path / "gap.arrow", [(events[:3], 0, 2), (later, 5, 7)])
    with pytest.raises(
        LogSeqError, match=r"gap\.arrow: seq gap: expected seq 3, next record batch starts at seq 5"
    ) as caught:
        read_log(tmp_path / "gap.arrow")
    assert caught.value.seq == 3


def test_a_seq_gap_inside_a_batch_is_refused_naming_the_seq(tmp_path: Path) -> None:
    events = sequenced(run_events(4))
    events[2] = with_seq(events[2], 9)
    write_raw(tmp_path / "gap.arrow", [(events, 0, 3)])
    with pytest.raises(
        LogSeqError, match=r"gap\.arrow: seq gap: expected seq 2, found seq 9"
    ) as caught:
        read_log(tmp_path / "gap.arrow")
    assert caught.value.seq == 2


def test_a_batch_without_a_stamp_is_refused(tmp_path: Path) -> None:
    with ipc.new_stream(str(tmp_path / "plain.arrow"), LOG_SCHEMA) as stream:
        stream.write_batch(events_to_batch(sequenced(run_events(2))))  # no custom metadata
    with pytest.raises(LogCorruptError, match="where seq 0 should start has no readable"):
        read_log(tmp_path / "plain.arrow")


def test_a_newer_schema_version_is_refused(tmp_path: Path) -> None:
    newer = LOG_SCHEMA.with_metadata({SCHEMA_VERSION_KEY: str(SCHEMA_VERSION + 1).encode()})
    write_raw(tmp_path / "newer.arrow", [(sequenced(run_events(2)), 0, 1)], newer)
    with pytest.raises(
        LogSchemaError, match=f"schema_version {SCHEMA_VERSION + 1} is newer than this rolloutlog"
    ):
        read_log(tmp_path / "newer.arrow")
    with pytest.raises(LogSchemaError, match="newer"):
        LogWriter(tmp_path / "newer.arrow", mode="append")


def test_files_that_are_not_logs_are_refused_clearly(tmp_path: Path) -> None:
    foreign = tmp_path / "foreign.arrow"
    with ipc.new_stream(str(foreign), pa.schema([("x", pa.int64())])) as stream:
        stream.write_batch(pa.record_batch([pa.array([1])], names=["x"]))
    with pytest.raises(LogSchemaError, match=r"foreign\.arrow: not a rolloutlog log"):
        read_log(foreign)
    (tmp_path / "text.arrow").write_text('{"kind": "run_started"}\n')
    with pytest.raises(LogCorruptError, match="not a rolloutlog log"):
        read_log(tmp_path / "text.arrow")
    (tmp_path / "empty.arrow").write_bytes(b"")
    with pytest.raises(LogCorruptError, match="empty file"):
        read_log(tmp_path / "empty.arrow")
    with pytest.raises(LogError, match="no such log file"):
        LogReader(tmp_path / "missing.arrow")


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("{bad json", "not JSON text (Expecting property name enclosed in double quotes"),
        ("[" * 100_000 + "]" * 100_000, "not JSON text (nested too deeply)"),
        ("[1,2]", "expected an object, got [1, 2]"),
        ("null", "expected an object, got null"),
        (None, "expected an object, got null"),
    ],
)
def test_a_run_started_config_that_is_no_json_object_is_damage(
    tmp_path: Path, text: str | None, problem: str
) -> None:
    path = tmp_path / "config.arrow"
    config_cell_log(path, text)
    where = f"{path}: record batch of seq 0..3: run_started.config: {problem}"
    with pytest.raises(LogCorruptError) as caught:
        read_log(path)
    assert str(caught.value).startswith(where) and caught.value.first_seq == 0
    with pytest.raises(LogCorruptError) as caught:
        LogReader(path).info()  # info shows the config: it must be an object
    assert str(caught.value).startswith(where)


def test_a_json_cell_that_is_not_json_names_its_kind_and_seq(tmp_path: Path) -> None:
    config_cell_log(tmp_path / "cell.arrow", "{", row=2)  # a cell no event of ours fills
    with pytest.raises(EventError, match=r"episode_completed.config \(seq 2\): not JSON text"):
        read_log(tmp_path / "cell.arrow")
