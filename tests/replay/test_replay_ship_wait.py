"""`replay --json` reads a tinker-822 run's waits from the log as `simulate --json` counted
them while it ran: the columnar fold takes each reaction's time from its world event."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from rolloutlog.cli import main


def test_replay_counts_the_waits_simulate_counted(tmp_path: Path) -> None:
    log = tmp_path / "tight.arrow"
    simulated = CliRunner().invoke(
        main,
        [
            "simulate", "--scenario", "tight", "--policy", "tinker-822", "--set", "group_size=8",
            "--steps", "30", "--seed", "0", "--json", "--log", str(log),
        ],
    )  # fmt: skip
    assert simulated.exit_code == 0, simulated.output
    replayed = CliRunner().invoke(main, ["replay", str(log), "--json"])
    assert replayed.exit_code == 0, replayed.output
    ran, read = json.loads(simulated.stdout), json.loads(replayed.stdout)
    assert ran["ship_waits"] > 0 and read["invariant_violations"] == []
    assert (read["ship_waits"], read["ship_wait_seconds"]) == (
        ran["ship_waits"],
        ran["ship_wait_seconds"],
    )
