"""The log file: writing, appending and verified reading (torn tails:
test_log_torn_tails.py; damage: test_log_damage.py; other readers: test_log_readers.py)."""

from __future__ import annotations

import tempfile
from pathlib import Path

import attrs
import pytest
from hypothesis import given

from rolloutlog.events import log_writer
from rolloutlog.events.errors import (
    EventError,
    LogError,
    LogSeqError,
    TornTailWarning,
)
from rolloutlog.events.log_reader import LogReader, read_log
from rolloutlog.events.log_writer import LogWriter, write_log
from rolloutlog.events.schema import (
    SCHEMA_VERSION,
)
from rolloutlog.events.types import (
    Event,
    RunFinished,
    with_seq,
)
from tests.events.log_files import STARTED, run_events, sequenced, write_batches
from tests.events.strategies_events import event_lists


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
