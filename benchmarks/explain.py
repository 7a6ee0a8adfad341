"""What `explain` costs beside `replay` and `metrics`, in CPU seconds on one log.

    .venv/bin/python benchmarks/explain.py                  # simulates the log once, cached
    .venv/bin/python benchmarks/explain.py --log run.arrow  # any log

The log is `rolloutlog simulate --steps 1000` (the default scenario, seed 0). Each pass
reads the log from disk: the columnar replay (`replay`), the per-step age split
(`metrics` before the wait columns), the wait split (`explain`, and the extra pass that
`metrics` and `timeline` now make), the split with the timeline's band kept, and one
step's story (`explain --step`). Reported as CPU seconds (this process's, the best of
`--rounds`) and as ratios to the replay.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from rolloutlog.events.log_reader import LogReader
from rolloutlog.events.schema import iter_batch_columns
from rolloutlog.replay.explain import cause_bands, explain_log
from rolloutlog.replay.explain_story import Story
from rolloutlog.replay.log_replay import replay_log
from rolloutlog.replay.source import open_log
from rolloutlog.replay.step_metrics import StepMetrics
from rolloutlog.runs.simulate import run_policy
from rolloutlog.runtime.sim.scenario import load_scenario

STEPS = 1000
DEFAULT_LOG = Path(tempfile.gettempdir()) / f"rolloutlog-bench-explain-{STEPS}.arrow"


def simulated_log(path: Path) -> Path:
    """The default scenario's first `STEPS` batches, simulated in this process once."""
    if not path.exists():
        print(f"simulating {STEPS} steps of the default scenario into {path} ...", flush=True)
        run_policy(load_scenario("default").with_steps(STEPS), log_path=path)
    return path


def best_cpu(work: Callable[[], object], rounds: int) -> float:
    times = []
    for _ in range(rounds):
        began = time.process_time()
        work()
        times.append(time.process_time() - began)
    return min(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--log", type=Path, help=f"the log (default: {DEFAULT_LOG})")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    log = args.log or simulated_log(DEFAULT_LOG)
    info = LogReader(log).info()
    print(f"log: {log}, {info.events:,} events, {log.stat().st_size / 1e6:.1f} MB")
    passes: dict[str, Callable[[], object]] = {
        "replay (columnar)": lambda: replay_log(open_log(log)),
        "metrics: age split": lambda: StepMetrics.from_batches(open_log(log).batches()),
        "explain: wait split": lambda: explain_log(open_log(log)),
        "timeline band": lambda: cause_bands(open_log(log)),
        "explain --step 500": lambda: explain_log(open_log(log), trace_step=500),
        "story of step 500": lambda: Story(step=500).read(
            iter_batch_columns(open_log(log).batches())
        ),
    }
    base = None
    for name, work in passes.items():
        seconds = best_cpu(work, args.rounds)
        base = base or seconds
        print(f"{name:22} {seconds:7.2f} s CPU  {seconds / base:5.2f}x replay")


if __name__ == "__main__":
    main()
