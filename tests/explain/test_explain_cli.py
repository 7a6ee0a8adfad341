"""`rolloutlog explain` and the wait columns of `rolloutlog metrics`, on a known world."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

from rolloutlog.core.config import RunConfig
from rolloutlog.events.log_writer import write_log
from tests.cli.test_cli_log import run
from tests.explain.tiny_world import TinyWorld


def _paused_log(tmp_path: Path) -> Path:
    """Every rollout 1 s, every update 2.5 s (the known answer's world): six batches
    ship, the trainer starts four before the log ends."""
    config = RunConfig(group_size=2, batch_size=4, max_inflight=8)
    world = TinyWorld(config, lambda episode_id: 1.0, train_s=1.0, update_s=lambda step: 2.5)
    log = tmp_path / "paused.arrow"
    write_log(log, world.run(6))
    return log


def test_explain_prints_the_table_and_the_share_of_each_cause(tmp_path: Path) -> None:
    result = run("explain", str(_paused_log(tmp_path)))
    assert result.exit_code == 0, result.output
    assert "the trainer waited 8.50 s before its 4 batches" in result.output
    assert "88% is the weight update; 12% is waiting for fresh rollouts" in result.output
    assert "never held: hold, held, straggler, gate, redo, failed" in result.output


def test_explain_json_has_every_cause_per_step_and_for_the_run(tmp_path: Path) -> None:
    result = run("explain", str(_paused_log(tmp_path)), "--json")
    assert result.exit_code == 0, result.output
    found = json.loads(result.output)
    assert [s["wait/pause"] for s in found["steps"]] == [0.0, 2.5, 2.5, 2.5]
    assert found["run"]["wait/trainer"] == 8.5
    assert found["run"]["share"]["pause"] == 7.5 / 8.5


def test_metrics_carries_the_same_wait_columns(tmp_path: Path) -> None:
    log = str(_paused_log(tmp_path))
    rows = list(csv.DictReader(io.StringIO(run("metrics", log).stdout)))
    steps = json.loads(run("explain", log, "--json").output)["steps"]
    started, unstarted = rows[: len(steps)], rows[len(steps) :]
    assert [float(r["wait/pause"]) for r in started] == [s["wait/pause"] for s in steps]
    assert [float(r["wait/trainer"]) for r in started] == [s["wait/trainer"] for s in steps]
    # shipped, never started before the log ends: no wait yet
    assert [r["step"] for r in unstarted] == ["5", "6"]
    assert {r["wait/trainer"] for r in unstarted} == {""}


def test_a_log_that_does_not_start_with_run_started_is_one_line_exit_2(tmp_path: Path) -> None:
    log = tmp_path / "headless.jsonl"
    log.write_text('{"kind": "limit_set", "seq": 0, "t": 0.0, "max_inflight": 4}\n')
    result = run("explain", str(log))
    assert result.exit_code == 2
    assert result.output.strip().splitlines()[-1].startswith("rolloutlog: error:")
