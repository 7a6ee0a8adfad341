"""`rolloutlog train` with redundant members (and under `--policy roll-flash`): the live
driver aborts the members past G when a group's G-th answer comes back, with the
invariants checked on every event, and the log re-decides."""

from __future__ import annotations

from pathlib import Path

from rolloutlog.events.log_reader import read_log
from tests.runtime.live.live_helpers import train_checked


def test_train_cancels_redundant_members_and_its_log_verifies(tmp_path: Path) -> None:
    log = tmp_path / "redundant.arrow"
    settings = ("group_size=4", "group_redundancy=2", "batch_size=16", "max_inflight=18")
    report = train_checked(log, ["--steps", "3"], settings)
    assert report["episodes_cancelled"]["redundant"] > 0
    assert read_log(log)[0].config["group_redundancy"] == 2


def test_train_runs_roll_flash_with_redundant_members_and_its_log_verifies(
    tmp_path: Path,
) -> None:
    """`--policy roll-flash`: ROLL's budget and window carried out live, with members past G
    cut as they come back."""
    log = tmp_path / "roll.arrow"
    settings = ("group_size=4", "group_redundancy=1", "batch_size=16", "max_inflight=20")
    report = train_checked(log, ["--policy", "roll-flash", "--steps", "3"], settings)
    assert report["episodes_cancelled"]["redundant"] > 0
    config = read_log(log)[0].config
    assert (config["admission"], config["batch_order"]) == ("roll", "roll-window")
