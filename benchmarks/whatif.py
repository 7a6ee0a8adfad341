"""How far to trust `rolloutlog whatif`: its figures against the simulator's truth.

For each scenario and recorded policy P, simulate P (writing the log), fit a world to the
log, and run policy Q on the fitted world, once per what-if seed (the draws for work the
recorded run never finished). Two checks, printed as relative errors:

- reproduce: Q = P, against the recorded figures (the issue asks for within 5%);
- what-if: Q != P, against simulating Q on the true seeded world (within 10%).

A last table gives, per pair and figure, the worst error over the seeds and the error of
their mean. Seed 0 is the scenario's own: its `races` stream is the true world's, so its
what-if decides races with the truth's numbers; the default seeds (1, 2, 3) share none.

    .venv/bin/python benchmarks/whatif.py            # 200 steps, default and tight, seeds 1,2,3
    .venv/bin/python benchmarks/whatif.py --steps 100 --scenarios default --seeds 0
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from rolloutlog.cli.whatif import fit_recorded, run_whatif
from rolloutlog.runtime.sim.scenario import load_scenario
from rolloutlog.studies.run_report import run_policy
from rolloutlog.studies.whatif.fit import observed_races

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
    parser.add_argument("--seeds", default="1,2,3", help="what-if draw seeds, comma-separated")
    args = parser.parse_args()
    seeds = [int(s) for s in args.seeds.split(",")]
    print(f"whatif validation, {args.steps} steps, scenario seed 0, what-if seeds {args.seeds}")
    header = f"{'scenario':8s} {'recorded':12s} {'what-if':12s} {'vs':9s} {'seed':>4s}"
    for key in FIGURES:
        header += f" {SHORT[key] + ' got/want':>22s} {'err':>6s}"
    print(header + "   late rate (late / races seen)")
    started = time.perf_counter()
    summary: list[str] = []
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
                if what_if not in truth:
                    truth[what_if], _ = run_policy(base.with_policy(what_if))
                got_by_seed = []
                for seed in seeds if what_if != recorded_policy else seeds[:1]:  # exact re-run
                    fitted, recorded, _ = fit_recorded(log, seed)
                    runs, _ = run_whatif(fitted.scenario.with_steps(args.steps), [what_if])
                    against = "recorded" if what_if == recorded_policy else "truth"
                    want = recorded if what_if == recorded_policy else truth[what_if]
                    got = runs[what_if]
                    got_by_seed.append(got)
                    line = f"{scenario:8s} {recorded_policy:12s} {what_if:12s} {against:9s}"
                    line += f" {seed:4d}"
                    for key in FIGURES:
                        pair = f"{got[key]:,.2f}/{want[key]:,.2f}"
                        line += f" {pair:>22s} {100 * error(got[key], want[key]):5.1f}%"
                    late, seen = observed_races(fitted.trace.episodes)
                    rate = fitted.scenario.world.late_arrival_rate
                    print(f"{line}   {rate:.3f} ({late} / {seen:.1f})", flush=True)
                line = f"{scenario:8s} {recorded_policy:12s} {what_if:12s} {against:9s}"
                for key in FIGURES:
                    worst = max(error(got[key], want[key]) for got in got_by_seed)
                    mean = statistics.fmean(got[key] for got in got_by_seed)
                    line += f" {100 * worst:10.1f}% {100 * error(mean, want[key]):10.1f}%"
                summary.append(line)
    print("\nper pair, over the seeds: worst error, error of the mean")
    columns = "".join(f" {SHORT[key] + ' worst':>11s} {'of mean':>11s}" for key in FIGURES)
    print(f"{'':44s}{columns}")
    print("\n".join(summary))
    print(f"({time.perf_counter() - started:.0f} s)")


if __name__ == "__main__":
    main()
