"""How far to trust `rolloutlog whatif`: its figures against the simulator's truth.

For each scenario, world seed and recorded policy P, simulate P (writing the log), fit a
world to the log, and run policy Q on the fitted world, once per what-if seed (the draws
for work the recorded run never finished). Two checks, printed as relative errors:

- reproduce: Q = P, against the recorded figures (the issue asks for within 5%);
- what-if: Q != P, against simulating Q on the true seeded world (within 10%).

Each what-if row also gives the late-arrival rate: the fitted one (from the late arrivals
and the races the recorded log could show), the world's, and the share of the truth's
in-flight cancellations that lost their race. With `--true-rate`, each what-if also runs
once more with the fitted rate replaced by the world's (the figure a perfect rate fit would
give; the rest of the fitted world unchanged), its discarded count printed as `at rate`.

Where `whatif` gives the discarded count a 95% interval (what-if policies that cut
stragglers, `studies/whatif/interval.py`), the row prints it and whether the truth lies in
it, and beside it the interval a rate known exactly would give (the true run's binomial
draw at the fitted rate only: `binomial`), and the summary counts how often each covered
the truth.

A last table gives, per pair and figure, the worst error over the seeds and the error of
their mean. World seed 0 is the scenario's own; what-if seed 0 is left out by default: its
`races` stream is the true world's under world seed 0, so its what-if would decide races
with the truth's numbers. A what-if seed equal to the world seed is skipped for that world
(unless it is the only one). Over several world seeds (`--world-seeds`), the summary's
"of mean" is the error of the mean over every world and seed: a bias, where one world's
error may be mostly noise.

    .venv/bin/python benchmarks/whatif.py            # 200 steps, default and tight, seeds 1,2,3
    .venv/bin/python benchmarks/whatif.py --steps 100 --scenarios default --seeds 0
    .venv/bin/python benchmarks/whatif.py --steps 600 --scenarios default \\
        --pairs per-episode:all --world-seeds 0,1,2,3 --seeds 1,2,3,4 --true-rate
"""

from __future__ import annotations

import argparse
import math
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import attrs

from rolloutlog.cli.whatif import (
    INTERVAL_KEY,
    discarded_interval_for,
    fit_recorded,
    run_whatif,
)
from rolloutlog.runs.simulate import run_policy
from rolloutlog.runtime.sim.scenario import load_scenario
from rolloutlog.studies.whatif import with_overrides

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


def lost_share(report: dict[str, Any]) -> float:
    """The share of a run's in-flight cancellations (not at shutdown) that arrived late."""
    cancelled = report["episodes_cancelled"]
    inflight = sum(cancelled.values()) - cancelled.get("shutdown", 0)
    return report["late_arrivals"] / inflight if inflight else 0.0


def binomial_interval(rest: int, races: int, rate: float) -> tuple[float, float]:
    """The 95% interval if the fitted rate were the world's: rest + A p +- 1.96 sd."""
    sd = math.sqrt(races * rate * (1.0 - rate))
    return rest + races * rate - 1.96 * sd, rest + races * rate + 1.96 * sd


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--scenarios", default="default,tight")
    parser.add_argument("--seeds", default="1,2,3", help="what-if draw seeds, comma-separated")
    parser.add_argument("--world-seeds", default="0", help="scenario seeds, comma-separated")
    parser.add_argument(
        "--pairs", default=None, help="recorded:what-if pairs, comma-separated (default: all)"
    )
    parser.add_argument(
        "--true-rate", action="store_true", help="also run each what-if at the world's rate"
    )
    args = parser.parse_args()
    seeds = [int(s) for s in args.seeds.split(",")]
    worlds = [int(s) for s in args.world_seeds.split(",")]
    pairs = (
        PAIRS
        if args.pairs is None
        else tuple(tuple(p.split(":", 1)) for p in args.pairs.split(","))  # type: ignore[misc]
    )
    print(
        f"whatif validation, {args.steps} steps, world seeds {args.world_seeds}, "
        f"what-if seeds {args.seeds}"
    )
    header = f"{'scenario':8s} {'world':>5s} {'recorded':12s} {'what-if':12s} {'vs':9s}"
    header += f" {'seed':>4s}"
    for key in FIGURES:
        header += f" {SHORT[key] + ' got/want':>22s} {'err':>6s}"
    print(header + "   late rate: fitted (late / races seen), world, truth's lost share")
    started = time.perf_counter()
    summary: list[str] = []
    with tempfile.TemporaryDirectory() as folder:
        for scenario in args.scenarios.split(","):
            bases = {
                w: attrs.evolve(load_scenario(scenario).with_steps(args.steps), seed=w)
                for w in worlds
            }
            truth: dict[tuple[int, str], dict[str, Any]] = {}
            for recorded_policy, what_if in pairs:
                errors: dict[str, list[float]] = {key: [] for key in FIGURES}
                got_all: dict[str, list[float]] = {key: [] for key in FIGURES}
                want_all: dict[str, list[float]] = {key: [] for key in FIGURES}
                at_rate_all: list[float] = []  # discarded at the world's rate (--true-rate)
                covered: list[bool] = []  # the truth inside the 95% interval
                covered_binomial: list[bool] = []  # inside the interval of a known rate
                against = "recorded" if what_if == recorded_policy else "truth"
                for world_seed, base in bases.items():
                    log = Path(folder) / f"{scenario}.{world_seed}.{recorded_policy}.arrow"
                    if not log.exists():
                        truth[world_seed, recorded_policy], _ = run_policy(
                            base.with_policy(recorded_policy), log_path=log
                        )
                    if (world_seed, what_if) not in truth:
                        truth[world_seed, what_if], _ = run_policy(base.with_policy(what_if))
                    world_rate = base.world.late_arrival_rate
                    lost = lost_share(truth[world_seed, what_if])
                    usable = [s for s in seeds if s != world_seed] or seeds
                    for seed in usable if against == "truth" else usable[:1]:  # exact re-run
                        fitted, recorded, _ = fit_recorded(log, seed)
                        scenario_fit = fitted.scenario.with_steps(args.steps)
                        scenario_q = scenario_fit.with_policy(what_if)  # as run_whatif
                        got, drawn = run_policy(scenario_q)
                        got[INTERVAL_KEY] = discarded_interval_for(
                            scenario_q, got, drawn, fitted.races
                        )
                        want = recorded if against == "recorded" else truth[world_seed, what_if]
                        line = f"{scenario:8s} {world_seed:5d} {recorded_policy:12s} "
                        line += f"{what_if:12s} {against:9s} {seed:4d}"
                        for key in FIGURES:
                            pair = f"{got[key]:,.2f}/{want[key]:,.2f}"
                            line += f" {pair:>22s} {100 * error(got[key], want[key]):5.1f}%"
                            errors[key].append(error(got[key], want[key]))
                            got_all[key].append(got[key])
                            want_all[key].append(want[key])
                        late, seen = fitted.races.late, fitted.races.seen
                        rate = fitted.scenario.world.late_arrival_rate
                        line += f"   {rate:.4f} ({late} / {seen:.1f}), {world_rate:.4f}"
                        if against == "truth":
                            line += f", {lost:.4f}"
                        interval = got[INTERVAL_KEY]
                        if interval is not None:
                            key = "finished_rollouts_discarded"
                            inside = interval[0] <= want[key] <= interval[1]
                            covered.append(inside)
                            low, high = binomial_interval(
                                got[key] - drawn.drawn_late, drawn.drawn_races, rate
                            )
                            covered_binomial.append(low <= want[key] <= high)
                            line += f"   95%: {interval[0]:,}-{interval[1]:,}"
                            line += f" {'in' if inside else 'OUT'}"
                            line += f" (binomial {low:,.0f}-{high:,.0f})"
                        if args.true_rate and against == "truth":
                            at_rate = with_overrides(
                                scenario_fit, {"world.late_arrival_rate": world_rate}
                            )
                            exact = run_whatif(at_rate, [what_if])[0][what_if]
                            key = "finished_rollouts_discarded"
                            err = 100 * error(exact[key], want[key])
                            line += f"   at rate: {exact[key]:,.0f} ({err:.1f}%)"
                            at_rate_all.append(exact[key])
                        print(line, flush=True)
                line = f"{scenario:8s} {recorded_policy:12s} {what_if:12s} {against:9s}"
                for key in FIGURES:
                    mean = error(statistics.fmean(got_all[key]), statistics.fmean(want_all[key]))
                    line += f" {100 * max(errors[key]):10.1f}% {100 * mean:10.1f}%"
                if at_rate_all:
                    wants = want_all["finished_rollouts_discarded"]
                    worst = max(error(g, w) for g, w in zip(at_rate_all, wants, strict=True))
                    mean = error(statistics.fmean(at_rate_all), statistics.fmean(wants))
                    line += f" {100 * worst:10.1f}% {100 * mean:10.1f}%"
                if covered:
                    line += f"   in 95%: {sum(covered)} of {len(covered)}"
                    line += f" (binomial: {sum(covered_binomial)} of {len(covered_binomial)})"
                summary.append(line)
    print("\nper pair, over the worlds and seeds: worst error, error of the mean")
    columns = "".join(f" {SHORT[key] + ' worst':>11s} {'of mean':>11s}" for key in FIGURES)
    if args.true_rate:
        columns += f" {'at rate worst':>11s} {'of mean':>11s}"
    print(f"{'':44s}{columns}")
    print("\n".join(summary))
    print(f"({time.perf_counter() - started:.0f} s)")


if __name__ == "__main__":
    main()
