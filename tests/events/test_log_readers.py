"""Other readers of a rolloutlog log: plain pyarrow (without rolloutlog), polars, duckdb."""

from __future__ import annotations

import json
import subprocess
import sys
import warnings
from pathlib import Path

import pyarrow.ipc as ipc
import pytest

from rolloutlog.events.log_reader import read_log
from rolloutlog.events.log_writer import write_log
from rolloutlog.events.schema import SCHEMA_VERSION
from rolloutlog.events.types import EpisodeDispatched, Event, RunFinished
from tests.events.log_files import STARTED, run_events, sequenced

PLAIN_PYARROW = """
import json, sys
import pyarrow.ipc
table = pyarrow.ipc.open_stream(sys.argv[1]).read_all()
rows = table.to_pylist()
print(json.dumps({
    "rolloutlog_imported": any(name.startswith("rolloutlog") for name in sys.modules),
    "schema_version": table.schema.metadata[b"rolloutlog.schema_version"].decode(),
    "seq": [row["seq"] for row in rows],
    "kind": [row["kind"] for row in rows],
    "episode_id": [row["episode_id"] for row in rows],
    "reward": [row["reward"] for row in rows],
    "config": rows[0]["config"],
}))
"""


@pytest.fixture
def mixed_log(tmp_path: Path) -> tuple[Path, list[Event]]:
    events = [
        *run_events(4),
        EpisodeDispatched(t=5.0, episode_id="g9/0", group_id="g9", member=0, policy_version=2),
        RunFinished(t=6.0, reason="steps"),
    ]
    path = tmp_path / "run.arrow"
    write_log(path, events, batch_events=3)
    return path, sequenced(events)


def test_plain_pyarrow_reads_a_log_without_rolloutlog(mixed_log: tuple[Path, list[Event]]) -> None:
    path, events = mixed_log
    result = subprocess.run(
        [sys.executable, "-I", "-c", PLAIN_PYARROW, str(path)],
        capture_output=True,
        text=True,
        check=True,
        cwd=path.parent,
    )
    seen = json.loads(result.stdout)
    assert not seen["rolloutlog_imported"]
    assert seen["schema_version"] == str(SCHEMA_VERSION)
    assert seen["seq"] == list(range(len(events)))
    assert seen["kind"] == [event.kind for event in events]
    assert seen["episode_id"] == [getattr(event, "episode_id", None) for event in events]
    assert seen["reward"] == [getattr(event, "reward", None) for event in events]
    assert json.loads(seen["config"]) == STARTED.config


def test_polars_reads_a_log(mixed_log: tuple[Path, list[Event]]) -> None:
    polars = pytest.importorskip("polars")
    path, events = mixed_log
    frame = polars.read_ipc_stream(path)
    assert frame["seq"].to_list() == list(range(len(events)))
    assert frame["kind"].cast(polars.String).to_list() == [event.kind for event in events]
    assert frame["reward"].to_list() == [getattr(event, "reward", None) for event in events]


def test_duckdb_reads_a_log(mixed_log: tuple[Path, list[Event]]) -> None:
    duckdb = pytest.importorskip("duckdb")
    path, events = mixed_log
    connection = duckdb.connect()
    connection.register("log", ipc.open_stream(path))  # scanned batch by batch, as a stream
    rows = connection.sql("SELECT kind, count(*) FROM log GROUP BY kind ORDER BY kind").fetchall()
    assert rows == [
        ("episode_completed", 3),
        ("episode_dispatched", 1),
        ("run_finished", 1),
        ("run_started", 1),
    ]
    assert len(events) == sum(n for _, n in rows)


def test_warnings_are_not_raised_for_a_clean_log(mixed_log: tuple[Path, list[Event]]) -> None:
    path, events = mixed_log
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert read_log(path, strict=True) == events
