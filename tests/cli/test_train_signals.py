"""Stop and go on: Ctrl-C (SIGINT) and SIGTERM (a scheduler's pre-emption) stop a real
`rolloutlog train` process at its next settled point, without `run_finished`, exit 130 and
143; `train --resume LOG` then continues the run in the same log, which verifies."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

from rolloutlog.events.log_reader import LogReader
from rolloutlog.events.types import RunFinished
from rolloutlog.replay.source import open_log
from rolloutlog.replay.verify import verify_log

STEPS = 40
SETTINGS = ("group_size=4", "batch_size=16", "max_inflight=16", "server_mode=thread")
CLI = [sys.executable, "-c", "from rolloutlog.cli.main import main; main()", "train"]


def _shipped(log: Path) -> int:
    if not log.exists() or log.stat().st_size == 0:
        return 0
    try:
        return LogReader(log, warn=False).info().counts.get("batch_shipped", 0)
    except Exception:  # the first commit may be under way
        return 0


def _stopped(arguments: list[str], cwd: Path, number: signal.Signals, after: int) -> str:
    """Start `train`, send `number` once `after` more batches shipped; its stderr."""
    log = cwd / "run.arrow"
    before = _shipped(log)
    process = subprocess.Popen(
        [*CLI, *arguments], cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    deadline = time.monotonic() + 240
    while _shipped(log) < before + after:
        assert process.poll() is None and time.monotonic() < deadline, process.communicate()
        time.sleep(0.02)
    process.send_signal(number)
    _, stderr = process.communicate(timeout=240)
    assert process.returncode == 128 + number, stderr[-3000:]
    assert "Traceback" not in stderr
    assert f"stopped by {number.name} after" in stderr
    assert "next: rolloutlog train --resume run.arrow" in stderr
    return stderr


def _assert_verifies_without_an_end(log: Path) -> int:
    kinds = [event.kind for event in LogReader(log)]
    assert "run_finished" not in kinds
    verification = verify_log(open_log(log))
    assert verification.divergence is None and verification.error is None, verification
    return kinds.count("batch_shipped")


def test_sigint_and_sigterm_stop_a_run_that_resume_continues(tmp_path: Path) -> None:
    start = ["--steps", str(STEPS), "--seed", "1", "--log", "run.arrow", "--weights-dir", "w"]
    for setting in SETTINGS:
        start += ["--set", setting]
    _stopped(start, tmp_path, signal.SIGINT, after=2)
    first = _assert_verifies_without_an_end(tmp_path / "run.arrow")
    assert 2 <= first < STEPS

    _stopped(["--resume", "run.arrow"], tmp_path, signal.SIGTERM, after=2)
    second = _assert_verifies_without_an_end(tmp_path / "run.arrow")
    assert first + 2 <= second < STEPS

    finished = subprocess.run(
        [*CLI, "--resume", "run.arrow", "--json"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert finished.returncode == 0, finished.stderr[-3000:]
    assert f"step {STEPS}/{STEPS}" in finished.stderr  # progress on stderr with --json too
    assert "next: rolloutlog verify run.arrow" in finished.stderr
    report = json.loads(finished.stdout)
    assert report["finished_reason"] == "steps" and report["stopped_by"] is None
    assert report["steps_shipped"] == STEPS and report["restarts"] == 2
    assert report["invariant_violations"] == [] and report["replay_error"] is None
    events = list(LogReader(tmp_path / "run.arrow"))
    ends = [event for event in events if isinstance(event, RunFinished)]
    assert [end.reason for end in ends] == ["steps"]
    verification = verify_log(open_log(tmp_path / "run.arrow"))
    assert verification.divergence is None and verification.error is None
