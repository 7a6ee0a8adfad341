"""Kinds are appended to the fixed kind dictionary: a log written before a kind existed
(a shorter dictionary) still reads, and appending to it is refused by name."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.ipc as ipc
import pytest

from rolloutlog.events.errors import LogCorruptError, LogError
from rolloutlog.events.log_reader import LogReader
from rolloutlog.events.log_writer import LogWriter
from rolloutlog.events.schema import (
    FIRST_KIND_COUNT,
    KIND_DICTIONARY,
    LOG_SCHEMA,
    SCHEMA_VERSION,
    BatchStamp,
    batch_checksum,
    events_to_batch,
)
from rolloutlog.events.types import RunFinished, RunStarted, VersionPending, with_seq

EVENTS = [
    with_seq(event, seq)
    for seq, event in enumerate(
        [
            RunStarted(t=0.0, config={}, seed=0, schema_version=SCHEMA_VERSION, code_version="old"),
            VersionPending(t=1.0, version=1),
            RunFinished(t=2.0, reason="steps"),
        ]
    )
]


def _write_with_kinds(path: Path, kinds: pa.Array) -> None:
    """The log as a writer whose kind dictionary was `kinds` would have written it."""
    batch = events_to_batch(EVENTS)
    index = batch.schema.get_field_index("kind")
    codes = batch.column("kind").indices
    batch = batch.set_column(
        index, batch.schema.field(index), pa.DictionaryArray.from_arrays(codes, kinds)
    )
    stamp = BatchStamp(0, len(EVENTS) - 1, batch_checksum(batch))
    with ipc.new_stream(str(path), LOG_SCHEMA) as stream:
        stream.write_batch(batch, custom_metadata=stamp.to_metadata())


def test_a_log_from_before_run_resumed_reads_and_is_not_appended_to(tmp_path: Path) -> None:
    path = tmp_path / "old.arrow"
    _write_with_kinds(path, KIND_DICTIONARY[:FIRST_KIND_COUNT])
    reader = LogReader(path)
    assert list(reader) == EVENTS
    assert reader.kinds_known == FIRST_KIND_COUNT
    with pytest.raises(LogError, match="older rolloutlog that knew 14 event kinds"):
        LogWriter(path, mode="append")
    assert list(LogReader(path)) == EVENTS  # the refusal left the file as it was


def test_a_kind_dictionary_that_is_not_a_prefix_is_damage(tmp_path: Path) -> None:
    path = tmp_path / "bad.arrow"
    names = KIND_DICTIONARY.to_pylist()
    _write_with_kinds(path, pa.array([names[1], names[0], *names[2:]], pa.string()))
    with pytest.raises(LogCorruptError, match="kind dictionary is damaged"):
        list(LogReader(path))
