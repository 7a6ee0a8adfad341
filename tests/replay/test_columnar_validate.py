"""The columnar event rules read nulls from the validity bitmaps: sliced batches included."""

from __future__ import annotations

import pyarrow as pa
import pytest

from rolloutlog.events.schema import events_to_batch
from rolloutlog.replay.columnar_validate import batch_is_valid
from tests.replay.replay_helpers import small_log


def _with_null(batch: pa.RecordBatch, name: str, row: int) -> pa.RecordBatch:
    values = batch.column(name).to_pylist()
    values[row] = None
    column = pa.array(values, batch.schema.field(name).type)
    return batch.set_column(batch.schema.get_field_index(name), name, column)


@pytest.mark.parametrize("start", [0, 1, 3, 9])  # slices start inside a bitmap byte
def test_a_null_where_the_kind_carries_the_field_is_found_at_any_offset(start: int) -> None:
    log = small_log()
    batch = events_to_batch(log)
    row = next(i for i, event in enumerate(log) if event.kind == "group_opened" and i > start)
    assert batch_is_valid(batch.slice(start))
    for name in ("group_id", "work", "group_size"):  # a string, a dictionary, an int
        assert not batch_is_valid(_with_null(batch, name, row).slice(start)), name
    # A null in a row the slice leaves out is no problem.
    before = [i for i, event in enumerate(log) if event.kind == "group_opened" and i < start]
    for out in before:
        assert batch_is_valid(_with_null(batch, "group_id", out).slice(start))


def _with_value(batch: pa.RecordBatch, name: str, row: int, value: object) -> pa.RecordBatch:
    values = batch.column(name).to_pylist()
    values[row] = value
    column = pa.array(values, batch.schema.field(name).type)
    return batch.set_column(batch.schema.get_field_index(name), name, column)


@pytest.mark.parametrize(
    ("name", "value", "valid"),
    [
        ("episode_id", "", False),  # ids must not be empty: the column-wise test misses it
        ("episode_id", "g1/é", True),  # not ASCII, still UTF-8 text: checked per value
        ("episode_ids", ["g1/0", ""], False),
        ("episode_ids", ["g1/0", "g1/ü"], True),
    ],
)
def test_texts_the_column_wise_check_does_not_vouch_for_are_checked_per_value(
    name: str, value: object, valid: bool
) -> None:
    log = small_log()
    batch = events_to_batch(log)
    row = next(i for i, event in enumerate(log) if hasattr(event, name))
    assert batch_is_valid(batch)
    assert batch_is_valid(_with_value(batch, name, row, value)) is valid
