"""How far to trust `rolloutlog whatif`: its figures against the simulator's truth.

For each scenario and recorded policy P, simulate P (writing the log), fit a world to the
log, and run policy Q on the fitted world. Two checks, printed as relative errors:

- reproduce: Q = P, against the recorded figures (the issue asks for within 5%);
- what-if: Q != P, against simulating Q on the true seeded world (within 10%).

    .venv/bin/python benchmarks/whatif.py            # 200 steps, default and tight
    .venv/bin/python benchmarks/whatif.py --steps 100 --scenarios default
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path
from typing import Any

from rolloutlog.cli.whatif import fit_recorded, run_whatif
from rolloutlog.runtime.sim.scenario import load_scenario
from rolloutlog.studies.run_report import run_policy

FIGURES = ("finished_rollouts_discarded", "trained_episodes_per_hour", "mean_trained_age")
SHORT = {"finished_rollouts_discarded": "discarded", "trained_episodes_per_hour": "trained/h",
         "mean_trained_age": "mean age"}  # fmt: skip
PAIRS = (
    ("per-episode", "per-episode"),
    ("per-group", "per-group"),
    ("all", "all"),
    ("per-episode", "per-group"),
    ("per-group", "per-episode"),
    ("per-episode", "all"),
    ("all", "per-episode"),
)


def error(got: float, want: float) -> float:
    return abs(got - want) / abs(want) if want else float(got != want)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--scenarios", default="default,tight")
    parser.add_argument("--seed", type=int, default=0, help="whatif draw seed")
    args = parser.parse_args()
    print(f"whatif validation, {args.steps} steps, scenario seed 0, whatif seed {args.seed}")
    header = f"{'scenario':8s} {'recorded':12s} {'what-if':12s} {'vs':9s}"
    for key in FIGURES:
        header += f" {SHORT[key] + ' got/want':>22s} {'err':>6s}"
    print(header + "   late rate (races seen)")
    started = time.perf_counter()
    with tempfile.TemporaryDirectory() as folder:
        for scenario in args.scenarios.split(","):
            truth: dict[str, dict[str, Any]] = {}
            base = load_scenario(scenario).with_steps(args.steps)
            for recorded_policy, what_if in PAIRS:
                log = Path(folder) / f"{scenario}.{recorded_policy}.arrow"
                if not log.exists():
                    truth[recorded_policy], _ = run_policy(
                        base.with_policy(recorded_policy), log_path=log
                    )
                fitted, recorded, _ = fit_recorded(log, args.seed)
                runs, _ = run_whatif(fitted.scenario.with_steps(args.steps), [what_if])
                if what_if == recorded_policy:
                    want, against = recorded, "recorded"
                else:
                    if what_if not in truth:
                        truth[what_if], _ = run_policy(base.with_policy(what_if))
                    want, against = truth[what_if], "truth"
                got = runs[what_if]
                line = f"{scenario:8s} {recorded_policy:12s} {what_if:12s} {against:9s}"
                for key in FIGURES:
                    pair = f"{got[key]:,.2f}/{want[key]:,.2f}"
                    line += f" {pair:>22s} {100 * error(got[key], want[key]):5.1f}%"
                races = sum(recorded["episodes_cancelled"].values())
                rate = fitted.scenario.world.late_arrival_rate
                print(f"{line}   {rate:.3f} ({races})", flush=True)
    print(f"({time.perf_counter() - started:.0f} s)")


if __name__ == "__main__":
    main()
