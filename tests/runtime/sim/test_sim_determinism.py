"""Same seed, same log, byte for byte (also across hash seeds); another seed, another log."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from rolloutlog.events.log_writer import LogWriter
from rolloutlog.runtime.sim.scenario import load_scenario
from tests.runtime.sim.sim_helpers import run_collect

# Every world feature on, so that every kind of draw is covered by the comparison.
CHAOS_STEPS = 12


def _write(path: Path, seed: int) -> bytes:
    events, _ = run_collect(
        load_scenario("chaos").with_steps(CHAOS_STEPS).with_seed(seed), check=False
    )
    with LogWriter(path, mode="overwrite", fsync=False) as writer:
        for event in events:
            writer.append(event)
    return path.read_bytes()


def test_same_seed_same_log_bytes_different_seed_different_log(tmp_path: Path) -> None:
    first = _write(tmp_path / "a.arrow", seed=3)
    again = _write(tmp_path / "b.arrow", seed=3)
    other = _write(tmp_path / "c.arrow", seed=4)
    assert first == again
    assert first != other


def test_the_log_does_not_depend_on_the_hash_seed(tmp_path: Path) -> None:
    """Set and dict iteration of strings changes with PYTHONHASHSEED; the log must not."""
    logs = []
    for hash_seed in ("1", "2"):
        path = tmp_path / f"hash{hash_seed}.arrow"
        code = (
            "from rolloutlog.cli.simulate import simulate_command; "
            f"simulate_command(['--scenario', 'chaos', '--steps', '{CHAOS_STEPS}', "
            f"'--log', {str(path)!r}, '--json'])"
        )
        env = {**os.environ, "PYTHONHASHSEED": hash_seed}
        completed = subprocess.run(
            [sys.executable, "-c", code], env=env, capture_output=True, check=False
        )
        assert completed.returncode == 0, completed.stderr.decode()
        logs.append(path.read_bytes())
    assert logs[0] == logs[1]
