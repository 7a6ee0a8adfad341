"""`rolloutlog whatif` on a log the live driver wrote: a real trainer, a real server, a report."""

from __future__ import annotations

import json

from click.testing import CliRunner

from rolloutlog.cli import main
from tests.runtime.live.live_helpers import run_driver


def test_whatif_fits_and_reports_on_a_live_log(tmp_path, slow_server):
    overrides = {"max_off_policy_steps": 0, "target_lag": 0}  # stale cancels: censored work
    result, log = run_driver(tmp_path, [slow_server.url], steps=6, overrides=overrides)
    assert result.finished_reason == "steps", result.error
    world = tmp_path / "world.toml"
    runner = CliRunner()
    report = runner.invoke(
        main,
        ["whatif", str(log), "--compare", "per-episode,per-group,all", "--json", "--check",
         "--save-world", str(world)],
    )  # fmt: skip
    assert report.exit_code == 0, report.output
    answer = json.loads(report.stdout)
    recorded = answer["recorded"]
    assert recorded["steps_shipped"] == 6 and recorded["invariant_violations"] == []
    assert recorded["trained_episodes_per_hour"] > 0 and recorded["rollout_seconds_total"] > 0
    for name, run in answer["policies"].items():
        assert run["steps_shipped"] >= 6 and run["invariant_violations"] == [], name
        assert run["run_finished"] == "steps", name
    # How closely the re-run matches a live log's rates depends on the live run's timing
    # (a loaded CI machine moved it by 6%), so that is measured by benchmarks/whatif.py and
    # held to 5% on simulated logs (tests/studies/test_whatif.py), not asserted here.
    table = runner.invoke(main, ["simulate", "--scenario", str(world)])
    assert table.exit_code == 0 and "per-episode" in table.output, table.output
