"""`rolloutlog train --policy verl-wait` and `--policy verl-drop`: the live driver runs verl's
v1 sampler strategies. Under `verl-wait` a full batch waits while a group at its last chance
runs; under `verl-drop` nothing is aborted for its age: a stale group runs to its end and
the sink drops it. Each log re-decides (`verify`)."""

from __future__ import annotations

from rolloutlog.events.log_reader import read_log
from tests.runtime.live.live_helpers import (
    train_checked,
    train_preset_at_bound_zero,
    verified_summary,
)


def test_train_runs_verl_wait_and_carries_out_its_wait(tmp_path):
    log = tmp_path / "verl-wait.arrow"
    settings = ("group_size=4", "batch_size=8", "max_inflight=16", "max_off_policy_steps=1")
    # episodes outlast a train step, so batches wait
    report = train_checked(
        log, ["--policy", "verl-wait", "--steps", "6"], (*settings, "server_min_step_s=0.04")
    )
    assert report["episodes_dropped_stale"] == 0
    summary = verified_summary(log)
    assert summary["ship_waits"] == report["ship_waits"]
    config = read_log(log)[0].config
    assert (config["ship_wait"], config["gate_lag"]) == ("last-chance", "zero")


def test_train_runs_verl_drop_without_aborting_stale_work(tmp_path):
    log = tmp_path / "verl-drop.arrow"
    report = train_preset_at_bound_zero(log, "verl-drop")
    assert report["episodes_cancelled"]["stale"] == 0
    assert read_log(log)[0].config["stale_member"] == "run-on"
