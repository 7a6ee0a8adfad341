"""Simulated events per second on the default scenario, and peak memory as steps grow.

    .venv/bin/python benchmarks/simulate.py                  # 1,000 steps; memory at 250/500/1000
    .venv/bin/python benchmarks/simulate.py --steps 200 --memory-steps 50,100,200

Back of the envelope: every event is built once as an attrs object, evolved by two deciders,
hashed into the digest chain (one `repr` and one blake2b) and seen by the driver; the world
adds a heap push and pop per episode and one numpy call per group and stream. That is a few
microseconds of interpreted Python per event, so tens of thousands of events per second on
one core, bounded by the reaction loop rather than by the world. Times:
- `sim`: `simulate()` alone, the driver and the reaction loop;
- `sim+fold`: what `rolloutlog simulate --json` does: every event also folded by replay's
  `LogFold` (invariants checked, summary collected, second digest chain).
Memory is the tracemalloc peak of Python allocations during one run (sim+fold, the log not
kept), taken at several step counts: flat means the state is bounded by what is in flight
and queued, not by history.
"""

from __future__ import annotations

import argparse
import time
import tracemalloc
from collections.abc import Callable

from rolloutlog.events.types import Event
from rolloutlog.replay.fold import LogFold
from rolloutlog.runtime.sim.scenario import Scenario, load_scenario
from rolloutlog.runtime.sim.simulation import SimResult, simulate


def run_sim(scenario: Scenario) -> SimResult:
    return simulate(scenario)


def run_sim_fold(scenario: Scenario) -> SimResult:
    fold = LogFold(scenario.run)

    def on_events(events: list[Event]) -> None:
        for event in events:
            fold.apply(event)

    result = simulate(scenario, on_events=on_events)
    fold.finish()
    if fold.summary()["invariant_violations"]:
        raise RuntimeError("the benchmark run broke an invariant")
    return result


def throughput(name: str, run: Callable[[Scenario], SimResult], scenario: Scenario) -> None:
    start = time.perf_counter()
    result = run(scenario)
    elapsed = time.perf_counter() - start
    print(
        f"{name:9} {result.events:>9,} events  {elapsed:6.2f} s  "
        f"{result.events / elapsed:>9,.0f} events/s  "
        f"({result.steps_shipped} steps, {result.virtual_seconds / 3600:.1f} virtual hours)"
    )


def peak_memory(scenario: Scenario) -> tuple[int, int]:
    """(events, tracemalloc peak in bytes) of one sim+fold run."""
    tracemalloc.start()
    tracemalloc.reset_peak()
    result = run_sim_fold(scenario)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return result.events, peak


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scenario", default="default")
    parser.add_argument("--steps", type=int, default=1000)
    parser.add_argument("--memory-steps", default="250,500,1000")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    scenario = load_scenario(args.scenario).with_seed(args.seed)
    print(f"scenario {args.scenario!r}, seed {args.seed}, {args.steps} steps")
    throughput("sim", run_sim, scenario.with_steps(args.steps))
    throughput("sim+fold", run_sim_fold, scenario.with_steps(args.steps))
    print("peak memory (tracemalloc, sim+fold, log not kept):")
    for steps in (int(s) for s in args.memory_steps.split(",")):
        events, peak = peak_memory(scenario.with_steps(steps))
        print(f"  {steps:>6} steps  {events:>9,} events  peak {peak / 2**20:6.2f} MiB")


if __name__ == "__main__":
    main()
