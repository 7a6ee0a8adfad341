"""`rolloutlog metrics` of a log that interrupted episodes: the token split's columns, in
every row and in every format; a log without interruptions keeps its columns."""

from __future__ import annotations

import csv
import io
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from rolloutlog.events.log_writer import write_log
from rolloutlog.replay.explain import WAIT_COLUMNS
from rolloutlog.replay.step_metrics import STEP_COLUMNS
from rolloutlog.replay.step_segments import SEGMENT_COLUMNS
from tests.invoke import run
from tests.runtime.sim.sim_helpers import slow_update_run


@pytest.mark.parametrize("rule", ["interrupt", "freeze"])
def test_the_columns_follow_the_log(tmp_path: Path, rule: str) -> None:
    events, _ = slow_update_run(3, **{"run.weight_update": rule})
    log = tmp_path / "run.arrow"
    write_log(log, events)
    expected = [*STEP_COLUMNS, *(SEGMENT_COLUMNS if rule == "interrupt" else ()), *WAIT_COLUMNS]
    result = run("metrics", str(log))
    assert result.exit_code == 0, result.output
    rows = list(csv.DictReader(io.StringIO(result.output)))
    assert list(rows[0]) == expected
    if rule == "interrupt":
        assert all(row["off_policy/token_age/mean"] != "" for row in rows if row["trained"] != "0")
    assert (
        run("metrics", str(log), "--format", "parquet", "-o", str(tmp_path / "m.parquet")).exit_code
        == 0
    )
    assert pq.read_table(tmp_path / "m.parquet").column_names == expected
