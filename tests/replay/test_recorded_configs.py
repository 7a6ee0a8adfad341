"""A log recorded with a config rolloutlog would not start is still folded and reported.

Another orchestrator may allow, say, `target_lag = 1` with `max_off_policy_steps = 0`
(prime-rl does). `replay`, `show`, `verify` and `diff` fold what was recorded and warn
about the config on stderr; only `simulate` and `train` refuse to start such a run.
"""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import Result

from rolloutlog.core.config import RunConfig
from rolloutlog.events.log_writer import write_log
from rolloutlog.events.types import Event
from tests.invoke import run
from tests.replay.replay_helpers import small_run

UNSTARTABLE = {"max_off_policy_steps": 0, "target_lag": 1}


def recorded_log() -> list[Event]:
    """`small_log`'s run, recorded through the loop under the config."""
    run = RunConfig(group_size=2, max_inflight=2, batch_size=2, **UNSTARTABLE)
    assert run.startup_problems()  # a config `simulate` would refuse
    return small_run(run)


def warned(result: Result) -> bool:
    return "warning" in result.stderr and "target_lag: must be <=" in result.stderr


def test_replay_folds_every_event_and_warns_about_the_config(tmp_path: Path) -> None:
    log = recorded_log()
    path = tmp_path / "theirs.arrow"
    write_log(path, log)
    replayed = run("replay", "--json", path)
    assert replayed.exit_code == 0, replayed.output
    summary = json.loads(replayed.stdout)
    assert summary["events"] == len(log) and summary["error"] is None
    assert summary["steps_shipped"] == 1 and summary["invariant_violations"] == []
    assert warned(replayed)
    for args in (("show", path, "--at", 5), ("verify", path), ("diff", path, path)):
        result = run(*args)
        assert result.exit_code == 0, (args, result.output)
        assert warned(result), args


def test_simulate_refuses_to_start_such_a_run() -> None:
    sets = [f"--set={key}={value}" for key, value in UNSTARTABLE.items()]
    result = run("simulate", "--scenario", "smoke", "--steps", "1", *sets)
    assert result.exit_code == 2 and "target_lag: must be <= max_off_policy_steps" in result.output
