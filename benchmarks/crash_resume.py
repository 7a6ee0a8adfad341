"""Crash-resume benchmark: kill one `rolloutlog train` run at N random points, resume it
each time into the same log, and report what survived.

Each kill is a real SIGKILL at a random crash point (`ROLLOUTLOG_CRASH_AT`, a random
point and pass). After every kill the durable log is read (a torn tail cut, as the reader
does); the resumed process must keep every one of those events unchanged (events lost
beyond the torn tail: must be 0) and the log must verify. Reported per kill: the point,
the torn tail, the events lost, whether the log verified after the resume, the time to
resume (`resume_seconds`: opening the log, folding it, starting servers, making the
announced version live, recording `run_resumed`) and the resumed process's wall time.

`diff` of the log as the first crash left it against the resumed log says where they
part (the `run_resumed`, or the first event a torn tail lost). With `--baseline` an
uninterrupted run with the same seed is made too: both reward curves (mean reward per
shipped batch, from the logs) are printed, so that learning across restarts can be
compared with learning without, and `diff` says where the two logs part (two live runs
differ in timing from their first event, `t` of `run_started`, so this is seq 0).

Run: `python benchmarks/crash_resume.py [--kills 5] [--steps 40] [--seed 0] [--baseline]`.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from rolloutlog.events.log_reader import LogReader
from rolloutlog.events.types import BatchShipped, EpisodeCompleted, Event
from rolloutlog.replay.diff import diff_logs
from rolloutlog.replay.source import open_log
from rolloutlog.replay.verify import verify_log
from rolloutlog.runtime.live.crash_points import ENVIRONMENT_VARIABLE

SETTINGS = ("group_size=8", "batch_size=64", "max_inflight=64", "server_mode=thread")
# How far into a process each point's pass may be drawn (from 1): kills land in the first
# few steps of each process, so that N kills fit in one run.
PASSES = {"dispatch": 300, "pending": 3, "shipped": 3, "commit": 6}


def _train(arguments: list[str], crash: str | None) -> tuple[int, float, float | None, Any]:
    """Exit code, wall seconds, time to resume (from the process's stderr line), report."""
    environment = {k: v for k, v in os.environ.items() if k != ENVIRONMENT_VARIABLE}
    if crash is not None:
        environment[ENVIRONMENT_VARIABLE] = crash
    command = [sys.executable, "-c", "from rolloutlog.cli.main import main; main()", "train"]
    started = time.perf_counter()
    done = subprocess.run(
        [*command, *arguments, "--json"], env=environment, capture_output=True, text=True
    )
    wall_s = time.perf_counter() - started
    report = json.loads(done.stdout) if done.returncode in (0, 1) and done.stdout else None
    if done.returncode not in (0, -signal.SIGKILL):
        raise SystemExit(f"train exited {done.returncode}: {done.stderr[-2000:]}")
    resumed = re.search(r"rolloutlog: resumed .* in ([0-9.]+) s", done.stderr)
    return done.returncode, wall_s, float(resumed.group(1)) if resumed else None, report


def _durable(log: Path) -> tuple[list[Event], int]:
    """The events a reader keeps, and the bytes of the torn tail it cut."""
    reader = LogReader(log, warn=False)
    events = list(reader)
    return events, 0 if reader.torn_tail is None else reader.torn_tail.cut_bytes


def _lost(before: list[Event], log: Path) -> int:
    """Durable events of the crashed process that the resumed log no longer holds as they were."""
    after = list(LogReader(log, warn=False))
    kept = sum(1 for a, b in zip(before, after, strict=False) if a == b)
    return len(before) - kept


def reward_curve(log: Path) -> list[float]:
    """Mean reward of each shipped batch, from the log alone."""
    rewards: dict[str, float] = {}
    curve = []
    for event in LogReader(log, warn=False):
        if isinstance(event, EpisodeCompleted):
            rewards[event.episode_id] = event.reward
        elif isinstance(event, BatchShipped):
            shipped = [rewards[e] for e in event.episode_ids]
            curve.append(sum(shipped) / len(shipped))
    return curve


def _tenths(curve: list[float]) -> str:
    size = max(1, len(curve) // 10)
    return " ".join(
        f"{sum(curve[i : i + size]) / len(curve[i : i + size]):.2f}"
        for i in range(0, len(curve), size)
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kills", type=int, default=5)
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--baseline", action="store_true", help="also an uninterrupted run")
    options = parser.parse_args()
    rng = random.Random(options.seed)
    root = Path(tempfile.mkdtemp(prefix="crash-resume-"))
    log = root / "resumed.arrow"
    start = [*("--steps", str(options.steps), "--seed", str(options.seed)), "--log", str(log)]
    start += ["--weights-dir", str(root / "weights")]
    for setting in SETTINGS:
        start += ["--set", setting]
    rows: list[dict[str, Any]] = []
    arguments = start
    for kill in range(options.kills):
        point = rng.choice(sorted(PASSES))
        crash = f"{point}:{rng.randint(1, PASSES[point])}"
        code, wall_s, resume_s, report = _train(arguments, crash)
        if rows:  # the previous kill's resume: what it kept, how long it took
            _resumed(rows[-1], log, resume_s, wall_s)
        if code != -signal.SIGKILL:
            print(f"kill {kill + 1}: {crash} not reached before the run finished", flush=True)
            break
        durable, torn = _durable(log)
        if not rows:  # what the run had written when it first died, for `diff` at the end
            shutil.copy(log, root / "first-crash.arrow")
        rows.append({"kill": kill + 1, "at": crash, "durable": durable, "events": len(durable)})
        rows[-1]["torn_bytes"] = torn
        arguments = ["--resume", str(log)]
        print(f"kill {kill + 1}: {crash}, {len(durable)} durable events, torn {torn} B", flush=True)
    code, wall_s, resume_s, report = _train(["--resume", str(log)], None)
    if rows and "durable" in rows[-1]:
        _resumed(rows[-1], log, resume_s, wall_s)
    print(json.dumps({"kills": rows}, indent=1))
    verified = sum(bool(row.get("verified")) for row in rows)
    lost = sum(row.get("lost", 0) for row in rows)
    print(
        f"resumes that verified: {verified}/{len(rows)}; events lost beyond torn tails: {lost}; "
        f"final run: {report and report['finished_reason']}, "
        f"{report and report['steps_shipped']} steps, {report and report['restarts']} restarts"
    )
    if rows:
        crashed = diff_logs(open_log(root / "first-crash.arrow"), open_log(log))
        where = None if crashed.b is None else crashed.b.kind
        print(f"diff of the first crash's log against the resumed one: seq {crashed.seq} ({where})")
    curve = reward_curve(log)
    print(f"reward (tenths of the run), resumed:      {_tenths(curve)}")
    if options.baseline:
        baseline = root / "uninterrupted.arrow"
        plain = [a if a != str(log) else str(baseline) for a in start]
        plain[plain.index("--weights-dir") + 1] = str(root / "weights-uninterrupted")
        _train(plain, None)
        print(f"reward (tenths of the run), uninterrupted: {_tenths(reward_curve(baseline))}")
        difference = diff_logs(open_log(baseline), open_log(log))
        first = next(e.seq for e in LogReader(log, warn=False) if e.kind == "run_resumed")
        where = difference.b.kind if difference.b is not None else None
        print(f"diff: the logs part at seq {difference.seq} ({where}); first restart at {first}")
    print(f"logs under {root}")


def _verifies(log: Path) -> bool:
    verification = verify_log(open_log(log))
    return verification.divergence is None and verification.error is None


def _resumed(row: dict[str, Any], log: Path, resume_s: float | None, wall_s: float) -> None:
    """What the resume after `row`'s kill kept, whether the log verified, how long it took."""
    row.update(
        lost=_lost(row.pop("durable"), log),
        verified=_verifies(log),
        resume_s=resume_s,
        resumed_process_wall_s=round(wall_s, 1),
    )


if __name__ == "__main__":
    main()
