"""`rolloutlog train --policy prime-rl-withhold`: the live driver runs a withholding preset.

Nothing is cancelled for its age, so no abort is sent for staleness: every rollout runs to
its end, the sink withholds the stale ones after scoring them, and the log re-decides.
"""

from __future__ import annotations

import json

from click.testing import CliRunner

from rolloutlog.cli import main
from rolloutlog.events.log_reader import read_log


def test_train_withholds_stale_members_instead_of_cancelling_them(tmp_path):
    log = tmp_path / "withhold.arrow"
    arguments = ["train", "--policy", "prime-rl-withhold", "--steps", "4", "--json"]
    arguments += ["--log", str(log)]
    for setting in (
        "group_size=4",
        "batch_size=16",
        "max_inflight=16",
        "server_mode=thread",
        "max_off_policy_steps=0",
        "target_lag=0",
        "check_invariants=true",
    ):
        arguments += ["--set", setting]
    result = CliRunner().invoke(main, arguments)
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["finished_reason"] == "steps" and report["invariant_violations"] == []
    assert report["replay_error"] is None and report["max_trained_age"] == 0
    assert report["episodes_cancelled"]["stale"] == 0 and report["unscheduled_cancelled"] >= 0
    assert 0 <= report["episodes_withheld"] <= report["episodes_dropped_stale"]
    verify = CliRunner().invoke(main, ["verify", str(log)])
    assert verify.exit_code == 0 and "every decision matches" in verify.output
    assert read_log(log)[0].config["stale_member"] == "withhold"
