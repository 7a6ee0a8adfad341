"""The log file: writing, appending, verified reading, torn tails, damage (other readers:
test_log_readers.py)."""

from __future__ import annotations

import functools
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import attrs
import pyarrow as pa
import pyarrow.ipc as ipc
import pytest
from hypothesis import given
from hypothesis import strategies as st

from rolloutlog.events import log_writer
from rolloutlog.events.errors import (
    EventError,
    LogCorruptError,
    LogError,
    LogSchemaError,
    LogSeqError,
    LogTornTailError,
    TornTailWarning,
)
from rolloutlog.events.log_reader import LogReader, read_log
from rolloutlog.events.log_writer import Compression, LogWriter, write_log
from rolloutlog.events.schema import (
    LOG_SCHEMA,
    SCHEMA_VERSION,
    SCHEMA_VERSION_KEY,
    BatchStamp,
    events_to_batch,
)
from rolloutlog.events.schema import batch_checksum as checksum_of
from rolloutlog.events.types import (
    EpisodeCompleted,
    Event,
    RunFinished,
    RunStarted,
    with_seq,
)
from tests.events.strategies_events import event_lists

STARTED = RunStarted(
    t=0.0, config={"group_size": 2}, seed=7, schema_version=SCHEMA_VERSION, code_version="t"
)


def run_events(count: int) -> list[Event]:
    """run_started, then `count - 1` completions: unsequenced, as a driver appends them."""
    completions = [
        EpisodeCompleted(
            t=float(i), episode_id=f"g{i}/0", reward=i / 3, prompt_tokens=i, completion_tokens=2 * i
        )
        for i in range(1, count)
    ]
    return [STARTED, *completions]


def sequenced(events: Sequence[Event]) -> list[Event]:
    return [with_seq(event, seq) for seq, event in enumerate(events)]


def write_batches(path: Path, events: list[Event], batch_events: int, **options: Any) -> list[int]:
    """Write and close a log, one commit per `batch_events`; returns where each commit starts."""
    starts = []
    with LogWriter(path, fsync=False, **options) as log:
        for index, event in enumerate(events):
            if index % batch_events == 0:
                log.commit()
                starts.append(path.stat().st_size)
            log.append(event)
    return starts


@given(event_lists(max_size=30))
def test_a_log_reads_back_exactly_what_was_written(events: list[Event]) -> None:
    with tempfile.TemporaryDirectory() as directory:
        path = Path(directory) / "run.arrow"
        write_log(path, events, batch_events=7)
        assert [repr(event) for event in read_log(path)] == [repr(event) for event in events]


def test_append_assigns_gap_free_seqs_and_returns_the_sequenced_event(tmp_path: Path) -> None:
    with LogWriter(tmp_path / "run.arrow", batch_events=2) as log:
        appended = [log.append(event) for event in run_events(5)]
    assert [event.seq for event in appended] == [0, 1, 2, 3, 4]
    assert read_log(tmp_path / "run.arrow") == appended


def test_extend_writes_the_same_log_and_commits_as_append(tmp_path: Path) -> None:
    """Sequenced runs of events take `extend`'s whole-list path; the bytes do not change."""
    events = sequenced(run_events(23))
    with LogWriter(tmp_path / "one.arrow", batch_events=4, check_events=False) as log:
        for event in events:
            log.append(event)
    with LogWriter(tmp_path / "all.arrow", batch_events=4, check_events=False) as log:
        for start, end in ((0, 1), (1, 2), (2, 9), (9, 10), (10, 23)):
            log.extend(events[start:end])
        assert log.next_seq == 23
    assert (tmp_path / "all.arrow").read_bytes() == (tmp_path / "one.arrow").read_bytes()


def test_extend_refuses_what_append_refuses(tmp_path: Path) -> None:
    events = sequenced(run_events(6))
    with LogWriter(tmp_path / "run.arrow", check_events=False) as log:
        log.extend(events[:2])
        with pytest.raises(LogSeqError, match="carries seq 3, the next seq is 2"):
            log.extend(events[3:])  # a gap
        with pytest.raises(EventError, match="a log opens with run_started"):
            log.extend([events[2], with_seq(STARTED, 3)])
        log.extend(events[3:])
    assert read_log(tmp_path / "run.arrow") == events


def test_info_summarizes_without_building_events(tmp_path: Path) -> None:
    write_log(tmp_path / "run.arrow", run_events(10), batch_events=4)
    info = LogReader(tmp_path / "run.arrow").info()
    assert (info.schema_version, info.events, info.first_seq, info.last_seq) == (
        SCHEMA_VERSION,
        10,
        0,
        9,
    )
    assert (info.batches, info.closed, info.torn_tail) == (3, True, None)
    assert info.counts == {"run_started": 1, "episode_completed": 9}
    assert info.config == {"group_size": 2}


def test_columns_yield_plain_lists_per_batch(tmp_path: Path) -> None:
    write_log(tmp_path / "run.arrow", run_events(10), batch_events=4)
    batches = list(LogReader(tmp_path / "run.arrow").columns())
    assert [len(columns["seq"]) for columns in batches] == [4, 4, 2]
    assert batches[0]["kind"][:2] == ["run_started", "episode_completed"]
    assert batches[2]["reward"] == [8 / 3, 9 / 3]


def test_reopening_in_append_mode_continues_the_seqs(tmp_path: Path) -> None:
    path = tmp_path / "run.arrow"
    events = run_events(9)
    write_log(path, events[:5], batch_events=2)
    with LogWriter(path, mode="append", batch_events=2) as log:
        assert log.next_seq == 5
        for event in events[5:]:
            log.append(event)
    assert read_log(path) == sequenced(events)
    assert LogReader(path).info().closed


def test_append_after_a_torn_tail_cuts_it_and_says_so(tmp_path: Path) -> None:
    path = tmp_path / "run.arrow"
    events = run_events(9)
    starts = write_batches(path, events[:6], batch_events=2)
    path.write_bytes(path.read_bytes()[: starts[-1] + 20])  # died inside the last commit
    with pytest.warns(TornTailWarning, match="appending after torn tail"):
        log = LogWriter(path, mode="append")
    with log:
        assert log.recovered_tail is not None and log.recovered_tail.last_seq == 3
        for event in events[4:]:
            log.append(event)
    assert read_log(path) == sequenced(events)


def test_a_closed_empty_log_is_a_valid_log(tmp_path: Path) -> None:
    LogWriter(tmp_path / "run.arrow").close()
    info = LogReader(tmp_path / "run.arrow").info()
    assert (info.events, info.closed, info.config, info.first_seq) == (0, True, None, None)
    with LogWriter(tmp_path / "run.arrow", mode="append") as log:
        log.append(STARTED)
    assert read_log(tmp_path / "run.arrow") == [with_seq(STARTED, 0)]


def test_create_refuses_an_existing_file_and_a_second_writer_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "run.arrow"
    with LogWriter(path), pytest.raises(LogError, match="another writer holds this log"):
        LogWriter(path, mode="append")
    with pytest.raises(LogError, match="already exists"):
        LogWriter(path)
    with pytest.raises(LogError, match="already exists"):
        write_log(path, [])


def test_the_writer_refuses_a_wrong_seq_or_opening_and_stays_usable(tmp_path: Path) -> None:
    with LogWriter(tmp_path / "run.arrow") as log:
        with pytest.raises(EventError, match="a log opens with run_started"):
            log.append(run_events(2)[1])
        with pytest.raises(EventError, match="schema_version"):
            log.append(attrs.evolve(STARTED, schema_version=SCHEMA_VERSION + 1))
        log.append(STARTED)
        with pytest.raises(LogSeqError, match="carries seq 5, the next seq is 1"):
            log.append(with_seq(run_events(2)[1], 5))
        with pytest.raises(EventError, match=r"episode_completed.reward \(seq 1\)"):
            log.append(attrs.evolve(run_events(2)[1], reward=float("inf")))
        log.append(with_seq(run_events(2)[1], 1))
    assert len(read_log(tmp_path / "run.arrow")) == 2


def test_a_failed_write_leaves_the_writer_failed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = LogWriter(tmp_path / "run.arrow")
    log.append(STARTED)

    def full_disk(fd: int, data: bytes) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(log_writer, "_write_all", full_disk)
    with pytest.raises(OSError, match="No space left"):
        log.commit()
    with pytest.raises(LogError, match="writer is failed; reopen it with mode='append'"):
        log.append(RunFinished(t=1.0, reason="steps"))
    log.close()


def test_write_log_leaves_nothing_behind_on_a_bad_event(tmp_path: Path) -> None:
    bad = attrs.evolve(run_events(2)[1], prompt_tokens=-1)
    with pytest.raises(EventError, match="prompt_tokens"):
        write_log(tmp_path / "run.arrow", [STARTED, bad])
    assert list(tmp_path.iterdir()) == []


# --- torn tails --------------------------------------------------------------------------


@pytest.mark.parametrize("compression", [None, "zstd"])
def test_a_cut_at_every_byte_of_the_last_batch_keeps_the_batches_before_it(
    tmp_path: Path, compression: Compression
) -> None:
    whole = tmp_path / "whole.arrow"
    events = run_events(6)
    starts = write_batches(whole, events, batch_events=4, compression=compression)
    data = whole.read_bytes()
    last_start, last_end = starts[-1], len(data) - 8  # the end-of-stream marker follows
    torn = tmp_path / "torn.arrow"
    for cut in range(last_start + 1, last_end):
        torn.write_bytes(data[:cut])
        reader = LogReader(torn)
        with pytest.warns(TornTailWarning, match="torn tail"):
            kept = list(reader)
        assert kept == sequenced(events[:4]), cut
        assert reader.torn_tail is not None
        assert reader.torn_tail.valid_bytes == last_start
        assert (reader.torn_tail.cut_bytes, reader.torn_tail.last_seq) == (cut - last_start, 3)
        if cut % 16 == 0:  # strict reading refuses the same cut; sampled, the path is one
            with pytest.raises(LogTornTailError, match="incomplete record batch"):
                read_log(torn, strict=True)


def test_a_cut_at_a_batch_boundary_or_in_the_end_marker(tmp_path: Path) -> None:
    whole = tmp_path / "whole.arrow"
    events = run_events(10)
    write_batches(whole, events, batch_events=4)
    data = whole.read_bytes()
    torn = tmp_path / "torn.arrow"
    torn.write_bytes(data[:-8])  # the writer died after its last commit: complete, not closed
    reader = LogReader(torn)
    assert list(reader) == sequenced(events)
    assert (reader.torn_tail, reader.closed) == (None, False)
    for cut in range(1, 8):
        torn.write_bytes(data[:-cut])
        with pytest.warns(TornTailWarning):
            assert read_log(torn) == sequenced(events)


def test_a_cut_anywhere_in_the_first_commit_is_a_torn_tail_that_keeps_no_event(
    tmp_path: Path,
) -> None:
    """The first commit is the dictionaries and the first batch in one write: a cut between
    its messages is torn too, never a closed log, never damage."""
    whole = tmp_path / "whole.arrow"
    starts = write_batches(whole, run_events(6), batch_events=4)
    data = whole.read_bytes()
    schema_end, first_end = starts[0], starts[1]
    torn = tmp_path / "torn.arrow"
    for cut in range(schema_end + 1, first_end):
        torn.write_bytes(data[:cut])
        reader = LogReader(torn, warn=False)
        assert list(reader) == [], cut
        assert reader.closed is False, cut
        assert reader.torn_tail is not None, cut
        assert (reader.torn_tail.valid_bytes, reader.torn_tail.last_seq) == (schema_end, None)


def test_zeros_after_the_last_commit_are_a_torn_tail_not_an_end_marker(tmp_path: Path) -> None:
    whole = tmp_path / "whole.arrow"
    events = run_events(6)
    write_batches(whole, events, batch_events=4)
    zeroed = tmp_path / "zeroed.arrow"
    zeroed.write_bytes(whole.read_bytes()[:-8] + bytes(100))  # a crash left zeroed blocks
    reader = LogReader(zeroed, warn=False)
    assert list(reader) == sequenced(events)
    assert reader.closed is False
    assert reader.torn_tail is not None and reader.torn_tail.cut_bytes == 100


def test_a_flipped_bit_in_a_message_length_of_a_closed_log_is_damage_not_a_tail(
    tmp_path: Path,
) -> None:
    """A closed log has no torn tail: a length that runs past the end is damaged, and
    appending must refuse the file rather than cut the batches after it."""
    whole = tmp_path / "whole.arrow"
    write_batches(whole, run_events(12), batch_events=4)
    data = whole.read_bytes()
    damaged = tmp_path / "damaged.arrow"
    for start in _message_starts(data[:-8])[1:]:  # the dictionaries and batches, not the schema
        for bit in range(32):
            flipped = bytearray(data)
            flipped[start + 4 + bit // 8] ^= 1 << (bit % 8)
            damaged.write_bytes(flipped)
            with pytest.raises(LogCorruptError):
                read_log(damaged)
            if bit == 30:  # the length grows by 2**30: it runs past the end of the file
                with pytest.raises(LogCorruptError, match="unreadable message"):
                    LogWriter(damaged, mode="append")
                assert damaged.read_bytes() == bytes(flipped)


def _message_starts(data: bytes) -> list[int]:
    """Where each IPC message of a stream starts, found with plain pyarrow."""
    starts, offset = [], 0
    while offset < len(data):
        starts.append(offset)
        message = ipc.read_message(pa.BufferReader(data[offset:]))
        offset += 8 + message.metadata.size + message.body.size
    return starts


@functools.cache
def closed_log() -> tuple[bytes, tuple[int, ...], tuple[Event, ...]]:
    """A closed log of three record batches (12 events): its bytes, where each commit
    starts, and its events; written once, then cut or damaged in memory."""
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "closed.arrow"
        events = run_events(12)
        starts = write_batches(path, events, batch_events=4)
        return path.read_bytes(), tuple(starts), tuple(sequenced(events))


def read_bytes_as_log(data: bytes, folder: Path) -> LogReader:
    path = folder / "cut.arrow"
    path.write_bytes(data)
    return LogReader(path, warn=False)


@given(st.data())
def test_any_cut_keeps_exactly_the_whole_batches_before_it(data: st.DataObject) -> None:
    """A crash can stop the writer at any byte: the reader keeps every commit the cut
    spared, reports the rest as a torn tail unless the cut fell between commits, and
    never calls a cut log closed."""
    whole, starts, events = closed_log()
    cut = data.draw(st.integers(starts[0], len(whole)), label="cut")
    with tempfile.TemporaryDirectory() as folder:
        reader = read_bytes_as_log(whole[:cut], Path(folder))
        kept = list(reader)
    spared = sum(1 for start in starts[1:] if start <= cut)  # commits whole before the cut
    eos = len(whole) - 8
    whole_batches = 3 if cut >= eos else spared
    assert kept == list(events[: 4 * whole_batches])
    assert reader.closed is (cut == len(whole))
    between_commits = cut in (*starts, eos, len(whole))
    assert (reader.torn_tail is None) is between_commits


@given(st.data())
def test_one_flipped_bit_of_a_closed_log_is_refused_or_changes_no_event(
    data: st.DataObject,
) -> None:
    """Damage is refused or harmless (padding, the end marker): it never yields other
    events, and never turns events a closed log holds into a tail that append would cut.
    Half the flips hit the messages' framing (marker and length), where that can happen."""
    whole, starts, events = closed_log()
    framing = [start + i for start in _message_starts(whole[:-8])[1:] for i in range(8)]
    anywhere = st.integers(starts[0], len(whole) - 1)
    offset = data.draw(st.one_of(st.sampled_from(framing), anywhere), label="offset")
    bit = data.draw(st.integers(0, 7), label="bit")
    flipped = bytearray(whole)
    flipped[offset] ^= 1 << bit
    with tempfile.TemporaryDirectory() as folder:
        reader = read_bytes_as_log(bytes(flipped), Path(folder))
        try:
            kept = list(reader)
        except (LogError, EventError):
            return
        assert kept == list(events)
        cut = reader.torn_tail
        assert cut is None or cut.valid_bytes == len(whole) - 8  # only the end marker


# --- damage and refusals -----------------------------------------------------------------


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


def config_cell_log(path: Path, text: str | None, row: int = 0) -> None:
    """A log of 4 events whose `config` cell at `row` holds `text`, stamped with a valid
    checksum: what another tool could write (ours refuses such a config)."""
    batch = events_to_batch(sequenced(run_events(4)))
    index = batch.schema.get_field_index("config")
    cells = batch.column(index).to_pylist()
    cells[row] = text
    batch = batch.set_column(index, batch.schema.field(index), pa.array(cells, pa.string()))
    with ipc.new_stream(str(path), LOG_SCHEMA) as stream:
        stamp = BatchStamp(0, 3, checksum_of(batch))
        stream.write_batch(batch, custom_metadata=stamp.to_metadata())


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
