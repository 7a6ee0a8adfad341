"""prime-rl's own orchestrator, recorded live by `rolloutlog.integrations.prime_rl`.

`scripts/prime-rl-run/run.py` runs prime-rl's `orchestrator.main()` unmodified (its main
loop, dispatcher and watcher tasks, concurrency controller with its float limits, sinks and
file monitor) and its env server unmodified (verifiers' null harness in a local subprocess
runtime), against fake inference and a fake trainer on loopback, under a bound of one
stale step, so that groups are cancelled and queued traces swept as stale; the recorder is
enabled in its process as a user would enable it. The run must go on unharmed, and the log
must be finished, replay clean, and hold what prime-rl itself reported in its log.

Runs only where ROLLOUTLOG_PRIME_RL names a prime-rl checkout (read at 559b447) and
ROLLOUTLOG_PRIME_RL_PYTHON a Python with its orchestrator's and env server's imports and
`uv` beside it (docs/foreign-runs.md says which); elsewhere it is skipped, and the
scripted stand-in of test_prime_rl_recorder.py runs in its place.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import warnings
from collections import Counter
from pathlib import Path

import pytest

from rolloutlog.events.log_reader import read_log
from rolloutlog.events.types import EpisodeDropped, EpisodesCancelled, RunStarted
from rolloutlog.importers import import_prime_rl
from rolloutlog.replay.conformance import check_conformance
from rolloutlog.replay.log_replay import replay_log
from rolloutlog.replay.source import open_log

CHECKOUT = os.environ.get("ROLLOUTLOG_PRIME_RL")
if not CHECKOUT:
    pytest.skip(
        "ROLLOUTLOG_PRIME_RL names no prime-rl checkout (the scripted stand-in runs instead)",
        allow_module_level=True,
    )
PYTHON = os.environ.get("ROLLOUTLOG_PRIME_RL_PYTHON", sys.executable)
ROOT = Path(__file__).resolve().parents[2]
ANSI = re.compile(r"\x1b\[[0-9;]*m")


def run_prime_rl(tmp_path: Path) -> tuple[Path, Path, str]:
    """(the run folder, the recorded log, the orchestrator's log without colors)."""
    log = tmp_path / "recorded.arrow"
    env = {**os.environ, "PRIME_RL": str(CHECKOUT), "PYTHONPATH": str(ROOT)}
    env["PATH"] = f"{Path(PYTHON).parent}{os.pathsep}{env.get('PATH', '')}"  # its uv
    script = ROOT / "scripts" / "prime-rl-run" / "run.py"
    done = subprocess.run(
        [PYTHON, str(script), str(tmp_path / "out"), "--record", str(log)],
        env=env,
        capture_output=True,
        text=True,
        timeout=1500,  # 8 to 13 minutes on 2 busy shared cores
        check=False,
    )
    (run_dir,) = (tmp_path / "out").iterdir()
    output = ANSI.sub("", (run_dir / "logs" / "attempt_1" / "orchestrator.log").read_text())
    assert done.returncode == 0, output[-3000:] + done.stderr[-2000:]
    return run_dir, log, output


def counted(pattern: str, output: str) -> int:
    return sum(int(n) for n in re.findall(pattern, output))


def test_prime_rls_own_orchestrator_runs_unharmed_and_is_recorded_whole(tmp_path: Path) -> None:
    run_dir, path, output = run_prime_rl(tmp_path)
    assert "Orchestrator finished." in output  # prime-rl's clean exit
    assert "rolloutlog stopped recording" not in output
    events = read_log(path)
    first = events[0]
    assert isinstance(first, RunStarted) and first.config["max_inflight"] == 8  # from 8.0
    assert first.config["target_lag"] == 1  # prime-rl's TARGET_LAG
    kinds = Counter(event.kind for event in events)
    assert kinds["run_finished"] == 1 and kinds["batch_shipped"] == 6, kinds  # max_steps
    rows = (run_dir / "metrics.jsonl").read_text().splitlines()
    assert sum('"off_policy/dropped"' in row for row in rows) == 6  # the steps prime-rl shipped
    replay = replay_log(open_log(path))
    assert replay.error is None and not replay.violations, replay.violations[:3]
    stale = [e for e in events if isinstance(e, EpisodesCancelled) and e.reason == "stale"]
    in_flight = sum(len(e.episode_ids) for e in stale)
    # prime-rl's own counts: its WARNING lines, before the drain's shutdown
    assert in_flight + sum(e.unscheduled for e in stale) == counted(
        r"Cancelled (\d+) train episodes past max_off_policy_steps", output
    )
    before_drain = output.split("draining pipeline")[0]  # then the run is over, unrecorded
    swept = counted(r"Dropped (\d+) queued traces past max_off_policy_steps", before_drain)
    queued_drops = [e for e in events if isinstance(e, EpisodeDropped)]
    assert swept > 0 and len(queued_drops) >= swept  # one trace per episode here
    empty = len(re.findall(r"empty train batch", output))
    # the folder prime-rl wrote, imported, counts what the live recording and its log say
    note = import_prime_rl(run_dir, tmp_path / "imported.arrow")
    reconciled = note["reconciled"]
    assert reconciled["swept"]["import"] == reconciled["swept"]["prime-rl log"] == swept
    assert reconciled["stale_cancelled"]["import"] == in_flight + sum(e.unscheduled for e in stale)
    assert (
        reconciled["drained_inflight"]["import"] == reconciled["drained_inflight"]["prime-rl log"]
    )
    imported = Counter(event.kind for event in read_log(tmp_path / "imported.arrow"))
    verdict = check_conformance(open_log(path), "prime-rl", t_tolerance=1.0)
    found = "conforms" if verdict.nonconformity is None else verdict.nonconformity.describe()
    warnings.warn(
        f"prime-rl {CHECKOUT}: {len(events)} events {dict(kinds)}; {swept} swept, "
        f"{empty} all-pruned batches; under prime-rl: {found}; the import's kinds "
        f"{'equal' if imported == kinds else dict(imported)}",
        stacklevel=1,
    )
