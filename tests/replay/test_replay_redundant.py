"""A log with redundant members verifies, replays with its figures (`episodes_cancelled`'s
`redundant`, metrics' `cancelled/redundant`), and the columnar fold agrees with the plain
one; a log without them reports neither figure."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

from rolloutlog.events.types import Event, RunFinished
from rolloutlog.replay.source import MemoryLog
from rolloutlog.replay.verify import verify_log
from tests.core.planted import fed
from tests.core.test_group_redundancy import SMALL
from tests.core.test_scenarios import Run
from tests.invoke import run
from tests.replay.test_replay_cli import written


def _log(**config: object) -> list[Event]:
    """Two groups of G = 2 with one redundant member each: g1/1 and g2/2 are cut."""
    loop_run = Run(**{**SMALL, "batch_size": 2, **config})
    loop_run.complete("g1/0", "g1/2" if loop_run.config.group_redundancy else "g1/1")
    loop_run.complete("g2/0", "g2/1")
    loop_run.feed(RunFinished(t=99.0, reason="steps"))
    return loop_run.log


def test_a_redundant_log_verifies_and_replays_its_cancellations(tmp_path: Path) -> None:
    log = _log()
    assert verify_log(MemoryLog(log)).ok
    assert fed(log).violations == []
    path = written(tmp_path, log)
    report = json.loads(run("replay", "--json", path).stdout)
    assert report["invariant_violations"] == []
    assert report["episodes_cancelled"]["redundant"] == 2
    assert report["cancelled/redundant"] == 2
    rows = list(csv.DictReader(io.StringIO(run("metrics", path).stdout)))
    assert sum(int(row["cancelled/redundant"]) for row in rows) == 2


def test_without_redundancy_the_figures_are_absent(tmp_path: Path) -> None:
    report = json.loads(run("replay", "--json", written(tmp_path, _log(group_redundancy=0))).stdout)
    assert "redundant" not in report["episodes_cancelled"]
    assert "cancelled/redundant" not in report
