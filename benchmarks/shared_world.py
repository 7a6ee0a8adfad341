"""CPU cost of the shared-inference world against today's independent world, same command.

    .venv/bin/python benchmarks/shared_world.py                    # default, 300 steps, best of 3
    .venv/bin/python benchmarks/shared_world.py --scenario long-gen --steps 100 --rounds 5

Each round runs the scenario twice, as `sim` (`simulate()`: the driver and the reaction
loop, as `benchmarks/simulate.py`'s `sim` line) and as `simulate` (what `rolloutlog
simulate` runs without `--log`: the same with the run summary and the step metrics
observing the loop): in the independent world (`--set inference=independent`), and in the
shared world with a decode step equal to its `seconds_per_token` at every batch size, on
one server of unbounded batch, so that the two worlds do the same work per token and only
the world's bookkeeping differs. The runs alternate and the best CPU seconds
(`time.process_time`) of each are compared: the ratio shared / independent is the figure
(the issue asks <= 1.2). Each round's own ratio (its two runs back to back) is printed too,
with their median: on a loaded machine the best of each side can come from different
rounds, and the median of paired ratios moves less.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

from rolloutlog.runs.simulate import run_policy
from rolloutlog.runtime.sim.scenario import Scenario, load_scenario, parse_set_options
from rolloutlog.runtime.sim.simulation import SimResult, simulate

RUNS: dict[str, Callable[[Scenario], SimResult]] = {
    "sim": simulate,
    "simulate": lambda scenario: run_policy(scenario)[1],
}


def shared_twin(name: str, steps: int) -> tuple[Scenario, Scenario]:
    """The scenario in the independent world, and in the shared world at the same token rate."""
    today = load_scenario(name, parse_set_options(["inference=independent"])).with_steps(steps)
    world = today.world
    keys = [
        "inference=shared",
        f"decode_step_s={world.seconds_per_token}",
        "decode_s_per_seq=0",
        "decode_compute_s_per_seq=0",
        f"max_running={today.run.max_inflight}",
        f"kv_capacity_tokens={10 * today.run.max_inflight * world.max_completion_tokens}",
    ]
    return today, load_scenario(name, parse_set_options(keys)).with_steps(steps)


def timed(run: Callable[[Scenario], SimResult], scenario: Scenario) -> tuple[float, SimResult]:
    start = time.process_time()
    result = run(scenario)
    return time.process_time() - start, result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--scenario", default="default")
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    worlds = dict(
        zip(("independent", "shared"), shared_twin(args.scenario, args.steps), strict=True)
    )
    best = {(run, world): float("inf") for run in RUNS for world in worlds}
    ratios: dict[str, list[float]] = {run: [] for run in RUNS}
    for _ in range(args.rounds):
        for run_name, run in RUNS.items():
            cpu = {}
            for name, scenario in worlds.items():
                cpu[name], result = timed(run, scenario)
                best[run_name, name] = min(best[run_name, name], cpu[name])
                print(
                    f"{run_name:9} {name:12} {cpu[name]:6.2f} s CPU  {result.events:>9,} events  "
                    f"{result.steps_shipped} steps  {result.virtual_seconds / 3600:.2f} virtual h"
                )
            ratios[run_name].append(cpu["shared"] / cpu["independent"])
    for run_name in RUNS:
        independent, shared = best[run_name, "independent"], best[run_name, "shared"]
        rounds = ", ".join(f"{r:.2f}" for r in ratios[run_name])
        print(
            f"{run_name}, best of {args.rounds}: independent {independent:.2f} s, shared "
            f"{shared:.2f} s CPU; shared / independent = {shared / independent:.2f}; the "
            f"rounds' own ratios {rounds}, median {statistics.median(ratios[run_name]):.2f}"
        )


if __name__ == "__main__":
    main()
