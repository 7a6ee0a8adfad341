"""`recycle` carried out by the live driver on the CPU twin (slime's partial rollout).

When a batch ships, the driver aborts the train requests then in flight by id: each abort
answer is recorded `episode_interrupted` (reason `recycle`), the next update goes live once
every one of them is in, and they are resubmitted with their tokens so far under it
(`episode_resumed`) before any new train work goes out. Every invariant is checked on
every event and `verify` re-decides the log.
"""

from __future__ import annotations

from collections import Counter

from rolloutlog.events.log_reader import read_log
from tests.runtime.live.live_helpers import train_checked

STEP_S = 0.01  # a decode step lasts at least this: batches ship with work mid-generation


def test_train_runs_per_episode_recycle_and_its_log_verifies(tmp_path):
    log = tmp_path / "recycle.arrow"
    small = ("group_size=4", "batch_size=8", "max_inflight=16", f"server_min_step_s={STEP_S}")
    lag = ("max_off_policy_steps=2", "target_lag=2")  # work in flight at every ship
    report = train_checked(log, ["--policy", "per-episode+recycle", "--steps", "5"], (*small, *lag))
    assert report["episodes_failed"] == 0  # no recycling abort was taken for a failure
    events = read_log(log)
    assert events[0].config["recycle"] is True
    reasons = Counter(e.reason for e in events if e.kind == "episode_interrupted")
    resumed = sum(e.kind == "episode_resumed" for e in events)
    assert reasons["recycle"] > 0 and reasons["update"] == 0
    assert 0 < resumed <= reasons["recycle"]
    assert report["episodes_interrupted"] == reasons["recycle"]


def test_train_runs_the_slime_recycle_preset(tmp_path):
    log = tmp_path / "slime-recycle.arrow"
    small = ("group_size=4", "batch_size=8", "max_inflight=16", f"server_min_step_s={STEP_S}")
    report = train_checked(log, ["--policy", "slime-recycle", "--steps", "3"], small)
    assert report["episodes_failed"] == 0
    config = read_log(log)[0].config
    assert config["admission"] == "slime" and config["recycle"] is True
