"""Simulated events per second on the default scenario, against decoding the log it wrote.

    .venv/bin/python benchmarks/simulate.py                  # 1,000 steps; memory at 250/500/1000
    .venv/bin/python benchmarks/simulate.py --steps 200 --memory-steps 50,100,200

The yardstick is the log itself: `pyarrow`'s `Table.to_pylist()` builds one dict per event
of the written log, the least any consumer of those events in Python pays. The figure that
matters is the ratio of `simulate --log` time to that decode time, measured in the same
run; the ratio is taken on CPU seconds of this process (`time.process_time`), which a
machine shared with other work disturbs far less than wall time (both are printed). Times:
- `sim`: `simulate()` alone, the driver and the reaction loop;
- `simulate --log`: what `rolloutlog simulate --log` does: the summary observed on the
  loop, every event written to the Arrow log;
- `simulate --log --check`: the same with the invariant checker observing the loop and
  every written event validated;
- `to_pylist`: decoding the written log into one dict per event.
Memory is the tracemalloc peak of Python allocations during one `simulate` run (the log not
kept), taken at several step counts: flat means the state is bounded by what is in flight
and queued, not by history.
"""

from __future__ import annotations

import argparse
import tempfile
import time
import tracemalloc
from pathlib import Path

import pyarrow as pa
import pyarrow.ipc as ipc

from rolloutlog.runs.simulate import run_policy
from rolloutlog.runtime.sim.scenario import Scenario, load_scenario
from rolloutlog.runtime.sim.simulation import SimResult, simulate

Times = tuple[float, float]  # (wall seconds, CPU seconds of this process)


def clock() -> Times:
    return time.perf_counter(), time.process_time()


def since(start: Times) -> Times:
    wall, cpu = clock()
    return wall - start[0], cpu - start[1]


def line(name: str, events: int, took: Times, note: str = "") -> None:
    wall, cpu = took
    print(
        f"{name:24} {events:>9,} events  {wall:6.2f} s wall {cpu:6.2f} s CPU  "
        f"{events / cpu:>9,.0f} events/CPU-s  {note}"
    )


def timed_simulate(scenario: Scenario) -> Times:
    start = clock()
    result = simulate(scenario)
    took = since(start)
    line("sim", result.events, took, _note(result))
    return took


def timed_run(scenario: Scenario, log: Path, *, check: bool) -> Times:
    start = clock()
    report, result = run_policy(scenario, log_path=log, check=check)
    took = since(start)
    if check and report["invariant_violations"]:
        raise RuntimeError(
            f"the benchmark run broke an invariant: {report['invariant_violations']}"
        )
    line("simulate --log" + (" --check" if check else ""), result.events, took, _note(result))
    return took


def _note(result: SimResult) -> str:
    return f"({result.steps_shipped} steps, {result.virtual_seconds / 3600:.1f} virtual hours)"


def timed_decode(log: Path) -> Times:
    with pa.memory_map(str(log)) as source:
        table = ipc.open_stream(source).read_all()
    start = clock()
    rows = table.to_pylist()
    took = since(start)
    line("to_pylist", len(rows), took)
    return took


def ratio(name: str, run: Times, decode: Times) -> None:
    print(f"{name} / to_pylist: {run[1] / decode[1]:.2f} (CPU), {run[0] / decode[0]:.2f} (wall)")


def peak_memory(scenario: Scenario) -> tuple[int, int]:
    """(events, tracemalloc peak in bytes) of one `simulate` run, the log not kept."""
    tracemalloc.start()
    tracemalloc.reset_peak()
    _, result = run_policy(scenario)
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
    scenario = load_scenario(args.scenario).with_seed(args.seed).with_steps(args.steps)
    print(f"scenario {args.scenario!r}, seed {args.seed}, {args.steps} steps")
    with tempfile.TemporaryDirectory() as folder:
        log = Path(folder) / "run.arrow"
        timed_simulate(scenario)
        simulated = timed_run(scenario, log, check=False)
        decoded = timed_decode(log)
        checked = timed_run(scenario, log, check=True)
    ratio("simulate --log", simulated, decoded)
    ratio("simulate --log --check", checked, decoded)
    print("peak memory (tracemalloc, simulate, log not kept):")
    for steps in (int(s) for s in args.memory_steps.split(",")):
        events, peak = peak_memory(scenario.with_steps(steps))
        print(f"  {steps:>6} steps  {events:>9,} events  peak {peak / 2**20:6.2f} MiB")


if __name__ == "__main__":
    main()
