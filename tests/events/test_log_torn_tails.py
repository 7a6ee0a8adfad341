"""A log cut short: a torn tail keeps exactly the whole batches before it."""

from __future__ import annotations

import functools
import tempfile
from pathlib import Path

import pyarrow as pa
import pyarrow.ipc as ipc
import pytest
from hypothesis import given
from hypothesis import strategies as st

from rolloutlog.events.errors import (
    EventError,
    LogCorruptError,
    LogError,
    LogTornTailError,
    TornTailWarning,
)
from rolloutlog.events.log_reader import LogReader, read_log
from rolloutlog.events.log_writer import Compression, LogWriter
from rolloutlog.events.types import (
    Event,
)
from tests.events.log_files import run_events, sequenced, write_batches


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
