"""`rolloutlog metrics`: a log's per-step table under prime-rl's metric names.

One row per shipped batch: step, time, episodes trained, the rollout age of the trained
episodes split into its in-flight and in-queue parts (`off_policy/*`), stale drops,
`dispatcher/off_policy/*` and the mean reward (`replay.step_metrics` defines each); where
the log interrupted an episode, its partial ratio and token ages (`replay.step_segments`).
The log is read as recorded, nothing is checked; `rolloutlog replay` checks it.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any, BinaryIO

import click
import pyarrow as pa
import pyarrow.csv as pa_csv
import pyarrow.parquet as pq

from rolloutlog.cli.bad_input import command, fail, reports_bad_input
from rolloutlog.cli.options import FILE, OUTPUT, output_format
from rolloutlog.cli.output import warn_torn_tail
from rolloutlog.cli.progress import phase
from rolloutlog.events.log_reader import LogReader
from rolloutlog.events.whole_file import written_whole
from rolloutlog.replay.explain import WAIT_COLUMNS
from rolloutlog.replay.step_metrics import STEP_COLUMNS, StepMetrics, with_waits
from rolloutlog.replay.step_segments import PARTIAL_RATIO, SEGMENT_COLUMNS

FORMATS = ("csv", "parquet", "jsonl")


@command("metrics")
@click.argument("log", type=FILE)
@click.option(
    "--format",
    "form",
    type=click.Choice(FORMATS),
    help="csv (stdout's default) and jsonl may go to stdout; parquet needs -o. With -o, "
    "the file's suffix names the format.",
)
@click.option("-o", "--output", type=OUTPUT, help="Write to this file (.csv, .parquet, .jsonl).")
@reports_bad_input
def metrics_command(log: Path, form: str | None, output: Path | None) -> None:
    """Write LOG's per-step table: step, time, trained, off_policy/* (the age split into
    in-flight and in-queue parts), dispatcher/off_policy/*, reward/mean, and the trainer's
    wait before the batch split into its causes (wait/*, as `rolloutlog explain`)."""
    form = output_format(form, output, {f".{name}": name for name in FORMATS}, "csv")
    if form == "parquet" and output is None:
        fail("--format parquet writes a binary file: name it with -o FILE")
    reader = LogReader(log, warn=False)
    with phase(f"reading {log}"):
        rows = with_waits(StepMetrics.from_batches(reader.batches()).rows, reader.batches())
    warn_torn_tail(reader.torn_tail, log)
    if output is None:
        _write(rows, form, sys.stdout.buffer)
        return
    with written_whole(output) as temporary, temporary.open("wb") as out:
        _write(rows, form, out)


def _write(rows: list[dict[str, Any]], form: str, out: BinaryIO) -> None:
    if form == "jsonl":
        out.write("".join(json.dumps(row) + "\n" for row in rows).encode())
        return
    table = pa.Table.from_pylist(rows, schema=_schema(bool(rows) and PARTIAL_RATIO in rows[0]))
    if form == "parquet":
        pq.write_table(table, out)
    else:
        pa_csv.write_csv(table, out)


def _schema(segments: bool) -> pa.Schema:
    """Integers for counts and steps, floats for the rest (null where a step had none);
    the token split's columns where the log interrupted episodes (`replay.step_segments`)."""
    counts = {
        "step",
        "trained",
        "off_policy/dropped",
        "off_policy/requeued",
        "off_policy/withheld",
        "off_policy/evicted",
        "off_policy/leftover",
        "cancelled/redundant",
        "wasted/episodes",
    }
    names = (*STEP_COLUMNS, *(SEGMENT_COLUMNS if segments else ()), *WAIT_COLUMNS)
    return pa.schema([(name, pa.int64() if name in counts else pa.float64()) for name in names])
