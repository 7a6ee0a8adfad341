"""Log files for the log tests: a run's events and a log written in commits of a size."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.ipc as ipc

from rolloutlog.events.log_writer import LogWriter
from rolloutlog.events.schema import LOG_SCHEMA, SCHEMA_VERSION, BatchStamp, events_to_batch
from rolloutlog.events.schema import batch_checksum as checksum_of
from rolloutlog.events.types import (
    EpisodeCompleted,
    Event,
    RunStarted,
    with_seq,
)

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
