"""`rolloutlog train` with redundant members: the live driver aborts the members past G
when a group's G-th answer comes back, with the invariants checked on every event, and the
log re-decides."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from rolloutlog.cli import main
from rolloutlog.events.log_reader import read_log


def test_train_cancels_redundant_members_and_its_log_verifies(tmp_path: Path) -> None:
    log = tmp_path / "redundant.arrow"
    arguments = ["train", "--steps", "3", "--json", "--log", str(log)]
    for setting in (
        "group_size=4",
        "group_redundancy=2",
        "batch_size=16",
        "max_inflight=18",
        "server_mode=thread",
        "check_invariants=true",
    ):
        arguments += ["--set", setting]
    result = CliRunner().invoke(main, arguments)
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["finished_reason"] == "steps" and report["invariant_violations"] == []
    assert report["replay_error"] is None
    assert report["episodes_cancelled"]["redundant"] > 0
    verify = CliRunner().invoke(main, ["verify", str(log)])
    assert verify.exit_code == 0 and "every decision matches" in verify.output
    assert read_log(log)[0].config["group_redundancy"] == 2
