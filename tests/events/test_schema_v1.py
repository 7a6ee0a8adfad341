"""Logs of schema version 1 still read: `live` (version 1) is `frozen`'s negation (version 2).

`data/schema-v1.arrow` was written by rolloutlog before the rename, with
`rolloutlog simulate --scenario smoke --set frozen_fraction=0.5 --set eval_interval=2
--steps 3 --seed 7 --log tests/data/schema-v1.arrow` (frozen, live and eval groups), when
the smoke scenario's world was the independent one (today: `--set inference=independent`).
`data/schema-v1.jsonl` is the version-1 export of `examples/small.arrow`.
"""

from __future__ import annotations

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
from rolloutlog.events.types import GroupOpened

DATA = Path(__file__).resolve().parents[1] / "data"
V1_LOG = DATA / "schema-v1.arrow"
V1_COMMAND = (
    "simulate --scenario smoke --set frozen_fraction=0.5 --set eval_interval=2 --steps 3 --seed 7"
    " --set inference=independent"
)
EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def test_the_fixture_is_a_version_1_log_with_frozen_and_other_groups() -> None:
    table = ipc.open_stream(V1_LOG).read_all()
    assert table.schema.metadata[b"rolloutlog.schema_version"] == b"1"
    assert "live" in table.schema.names and "frozen" not in table.schema.names
    assert {value for value in table.column("live").to_pylist() if value is not None} == {
        True,
        False,
    }


def test_a_version_1_log_reads_as_the_same_run_simulated_today(tmp_path: Path) -> None:
    """Same seed, same config: today's simulator writes the current version; both read the same."""
    reader = LogReader(V1_LOG)
    old = list(reader)
    assert reader.schema_version == 1
    fresh = tmp_path / "fresh.arrow"
    result = CliRunner().invoke(main, [*V1_COMMAND.split(), "--log", str(fresh)])
    assert result.exit_code == 0, result.output
    today = read_log(fresh)
    # A policy key added since (`requeue`, ...) is recorded today at its default, which is
    # what a log without it reads as: the same run.
    added = {k: v for k, v in today[0].config.items() if k not in old[0].config}  # type: ignore[attr-defined]
    assert all(RunConfig().to_dict()[k] == v for k, v in added.items()), added
    assert [attrs.evolve(old[0], config={**old[0].config, **added}), *old[1:]] == today  # type: ignore[attr-defined]
    assert old[0].schema_version == SCHEMA_VERSION  # the events are the current version now


def test_live_reads_as_the_negation_of_frozen() -> None:
    raw = ipc.open_stream(V1_LOG).read_all()
    live = [value for value in raw.column("live").to_pylist() if value is not None]
    opened = [event for event in read_log(V1_LOG) if isinstance(event, GroupOpened)]
    assert [not event.frozen for event in opened] == live
    assert all(event.frozen == (event.env == "frozen") for event in opened)


@pytest.mark.parametrize("command", ["verify", "replay"])
def test_a_version_1_log_verifies_and_replays(command: str) -> None:
    result = CliRunner().invoke(main, [command, str(V1_LOG)])
    assert result.exit_code == 0, result.output


def test_appending_to_a_version_1_log_is_refused_and_leaves_it(tmp_path: Path) -> None:
    path = tmp_path / "old.arrow"
    shutil.copy(V1_LOG, path)
    with pytest.raises(LogError, match="written with schema_version 1; this rolloutlog appends"):
        LogWriter(path, mode="append")
    assert read_log(path) == read_log(V1_LOG)


def test_a_version_1_log_converts_through_export_and_import(tmp_path: Path) -> None:
    runner = CliRunner()
    exported = tmp_path / "run.jsonl"
    assert runner.invoke(main, ["export", str(V1_LOG), "-o", str(exported)]).exit_code == 0
    converted = tmp_path / "run.arrow"
    result = runner.invoke(main, ["import", str(exported), "-o", str(converted)])
    assert result.exit_code == 0, result.output
    assert LogReader(converted).info().schema_version == SCHEMA_VERSION
    assert read_log(converted) == read_log(V1_LOG)


def test_a_version_1_export_imports_as_the_current_version() -> None:
    with (DATA / "schema-v1.jsonl").open(encoding="utf-8") as lines:
        old = list(read_jsonl(lines))
    assert old == read_log(EXAMPLES / "small.arrow")
