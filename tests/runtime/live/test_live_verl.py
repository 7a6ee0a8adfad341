"""`train --policy verl-fully-async`: the live driver carries out verl's sample budget."""

from __future__ import annotations

import json

from click.testing import CliRunner

from rolloutlog.cli import main
from rolloutlog.events.log_reader import read_log


def test_train_runs_the_verl_preset_and_its_log_verifies(tmp_path):
    """G = 4, a batch of one group, θ = 0, a weight sync every K = 2 batches (the preset's
    4, halved: batch 4 ships only once v2 is announced): each sync window opens two train
    groups, though the permits would let four run. The invariants (the budget among them)
    are checked on every event, and the log re-decides."""
    log = tmp_path / "verl.arrow"
    arguments = ["train", "--policy", "verl-fully-async", "--steps", "4", "--json"]
    for setting in (
        "group_size=4",
        "batch_size=4",
        "max_inflight=16",
        "staleness_threshold=0.0",
        "updates_per_sync=2",
        "server_mode=thread",
        "check_invariants=true",
    ):
        arguments += ["--set", setting]
    result = CliRunner().invoke(main, [*arguments, "--log", str(log)])
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["finished_reason"] == "steps" and report["invariant_violations"] == []
    assert report["replay_error"] is None
    verify = CliRunner().invoke(main, ["verify", str(log)])
    assert verify.exit_code == 0 and "every decision matches" in verify.output
    events = read_log(log)
    assert events[0].config["admission"] == "verl"
    assert [e.version for e in events if e.kind == "version_pending"] == [2]  # the run ends
    opened = [e for e in events if e.kind == "group_opened" and e.work == "train"]
    assert len(opened) <= 2 * 2  # two a window: before the sync, and after it
