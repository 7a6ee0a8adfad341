"""Logs of schema version 2 still read: nothing was masked then, so `masked_tokens` is 0.

`data/schema-v2.arrow` was written by rolloutlog before version 3, with
`rolloutlog simulate --scenario smoke --steps 3 --seed 7 --set eval_interval=2 --log
tests/data/schema-v2.arrow`, when the smoke scenario's world was the independent one (today:
`--set inference=independent`); `data/schema-v2.jsonl` is its version-2 export.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import attrs
import pyarrow.ipc as ipc
import pytest
from click.testing import CliRunner

from rolloutlog.cli import main
from rolloutlog.core.config import RunConfig
from rolloutlog.events.errors import LogError
from rolloutlog.events.jsonl import read_jsonl
from rolloutlog.events.log_reader import LogReader, read_log
from rolloutlog.events.log_writer import LogWriter
from rolloutlog.events.schema import SCHEMA_VERSION
from rolloutlog.events.types import BatchShipped

DATA = Path(__file__).resolve().parents[1] / "data"
V2_LOG = DATA / "schema-v2.arrow"
V2_EXPORT = DATA / "schema-v2.jsonl"
V2_COMMAND = (
    "simulate --scenario smoke --steps 3 --seed 7 --set eval_interval=2 --set inference=independent"
)


def test_the_fixture_is_a_version_2_log_that_ships_batches() -> None:
    table = ipc.open_stream(V2_LOG).read_all()
    assert table.schema.metadata[b"rolloutlog.schema_version"] == b"2"
    assert "masked_tokens" not in table.schema.names and "frozen" in table.schema.names
    assert table.column("kind").to_pylist().count("batch_shipped") >= 3


def test_a_version_2_log_reads_as_the_same_run_simulated_today(tmp_path: Path) -> None:
    reader = LogReader(V2_LOG)
    old = list(reader)
    assert reader.schema_version == 2 and SCHEMA_VERSION == 3
    fresh = tmp_path / "fresh.arrow"
    result = CliRunner().invoke(main, [*V2_COMMAND.split(), "--log", str(fresh)])
    assert result.exit_code == 0, result.output
    today = read_log(fresh)
    # Keys added since are recorded today at their defaults, which a log without them reads as.
    added = {k: v for k, v in today[0].config.items() if k not in old[0].config}  # type: ignore[attr-defined]
    assert all(RunConfig().to_dict()[k] == v for k, v in added.items()), added
    assert [attrs.evolve(old[0], config={**old[0].config, **added}), *old[1:]] == today  # type: ignore[attr-defined]
    assert old[0].schema_version == SCHEMA_VERSION


def test_every_batch_of_a_version_2_log_masks_nothing() -> None:
    shipped = [event for event in read_log(V2_LOG) if isinstance(event, BatchShipped)]
    assert shipped and {event.masked_tokens for event in shipped} == {0}


@pytest.mark.parametrize("command", ["verify", "replay"])
def test_a_version_2_log_verifies_and_replays(command: str) -> None:
    result = CliRunner().invoke(main, [command, str(V2_LOG)])
    assert result.exit_code == 0, result.output


def test_appending_to_a_version_2_log_is_refused_and_leaves_it(tmp_path: Path) -> None:
    path = tmp_path / "old.arrow"
    shutil.copy(V2_LOG, path)
    with pytest.raises(LogError, match="written with schema_version 2; this rolloutlog appends"):
        LogWriter(path, mode="append")
    assert read_log(path) == read_log(V2_LOG)


def test_its_export_changes_only_the_schema_version_and_adds_masked_tokens() -> None:
    """What the schema bump changes in `export` of an old log, and nothing else."""
    result = CliRunner().invoke(main, ["export", str(V2_LOG)])
    assert result.exit_code == 0, result.output
    today = result.output.splitlines()
    before = V2_EXPORT.read_text(encoding="utf-8").splitlines()
    assert len(today) == len(before)
    for now, then in zip(today, before, strict=True):
        old = json.loads(then)
        if old["kind"] == "run_started":
            old["schema_version"] = 3
        if old["kind"] == "batch_shipped":
            old["masked_tokens"] = 0
        assert now == json.dumps(old, ensure_ascii=False)


def test_a_version_2_export_imports_as_the_current_version(tmp_path: Path) -> None:
    with V2_EXPORT.open(encoding="utf-8") as lines:
        old = list(read_jsonl(lines))
    assert old == read_log(V2_LOG)
    converted = tmp_path / "run.arrow"
    result = CliRunner().invoke(main, ["import", str(V2_EXPORT), "-o", str(converted)])
    assert result.exit_code == 0, result.output
    assert LogReader(converted).info().schema_version == SCHEMA_VERSION
    assert read_log(converted) == old
