"""A `simulate --log` killed at any moment: commits fall only between two settled reactions
(one world event and everything it set off), so the log as far as it was written verifies.
The log is written whole (beside its path, renamed onto it at the end): SIGTERM unwinds
and leaves nothing; SIGKILL leaves the temporary, which verifies (the next writer of the
path removes it)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from rolloutlog.events.errors import LogError
from rolloutlog.events.log_reader import LogReader
from rolloutlog.events.types import WORLD_KINDS
from rolloutlog.replay.source import open_log
from rolloutlog.replay.verify import verify_log
from rolloutlog.runs.simulate import run_policy
from rolloutlog.runtime.sim.scenario import load_scenario

WAIT_S = 120.0  # a bound on a wait for the run to commit, never a timed assertion
REPO = Path(__file__).resolve().parents[3]


def test_every_committed_batch_ends_where_a_reaction_settles(tmp_path: Path) -> None:
    log = tmp_path / "run.arrow"
    run_policy(load_scenario("smoke").with_steps(500), log_path=log)
    batches = list(LogReader(log).batches())
    assert len(batches) > 3
    for batch in batches[1:]:  # the batch after each boundary opens with a world event
        assert batch.column("kind")[0].as_py() in WORLD_KINDS


def _committed_events(log: Path) -> int:
    try:
        return LogReader(log, warn=False).info().events
    except (OSError, LogError):
        return 0  # not created yet, or its schema not yet written


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL])
def test_a_killed_simulate_leaves_a_log_that_verifies(tmp_path: Path, sig: signal.Signals) -> None:
    log = tmp_path / "killed.arrow"
    command = "from rolloutlog.cli.main import main; main()"
    args = ["simulate", "--scenario", "smoke", "--steps", "1000000", "--log", str(log)]
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    process = subprocess.Popen(
        [sys.executable, "-c", command, *args],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    # where the log is written until the run is over: `.NAME.PID.tmp` beside it
    written = log.with_name(f".{log.name}.{process.pid}.tmp")
    try:
        deadline = time.monotonic() + WAIT_S
        while _committed_events(written) < 3 * 4096 and time.monotonic() < deadline:
            assert process.poll() is None, "the run ended before it was killed"
            time.sleep(0.05)
        process.send_signal(sig)
    finally:
        process.wait()
    assert not log.exists()  # never renamed into place: no log half-written at the path
    if sig == signal.SIGTERM:
        assert process.returncode == 128 + signal.SIGTERM
        assert not written.exists()  # unwound: no leftovers
        return
    assert process.returncode == -sig
    verification = verify_log(open_log(written))
    assert verification.ok, verification.divergence or verification.error
    assert verification.events >= 3 * 4096
