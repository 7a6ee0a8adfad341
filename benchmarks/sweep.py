"""Sweep throughput: cells per second with 1 and 2 workers, on Ray and in local processes.

    .venv/bin/python benchmarks/sweep.py [--scenario default] [--steps 20] [--seeds 0-3]

The same grid (presets per-episode and per-group over the seeds) runs four times: local
processes and a local Ray, each with 1 and then 2 workers. `cells/s` counts the cells over
the whole run, start-up included (spawning the worker processes, or `ray.init` and Ray's
workers); `after init` leaves out `ray.init` (the processes' spawning cannot be told apart
from their first cells). A cell is one `simulate` run, a fraction of a second to seconds,
so the engines' per-task overhead (milliseconds) hardly shows; start-up does on a short
grid. Figures only.
"""

from __future__ import annotations

import argparse
import time
from typing import Any

import ray

from rolloutlog.studies.engines import RAY_LOCAL_OPTIONS, Engine, run_cells
from rolloutlog.studies.grid import expand, parse_seeds


def measure(engine: Engine, workers: int, cells: list[Any]) -> tuple[float, float]:
    """(start-up seconds, total seconds) of running `cells`."""
    start = time.perf_counter()
    if engine == "ray":
        ray.init(num_cpus=workers, **RAY_LOCAL_OPTIONS)
    started = time.perf_counter()
    rows: list[dict[str, Any]] = []
    try:
        run_cells(cells, rows.append, engine=engine, workers=workers)
    finally:
        if engine == "ray":
            ray.shutdown()
    end = time.perf_counter()
    if len(rows) != len(cells):
        raise RuntimeError(f"{engine}: {len(rows)} rows for {len(cells)} cells")
    return started - start, end - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scenario", default="default")
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--seeds", default="0-3")
    args = parser.parse_args()
    seeds = parse_seeds(args.seeds)
    cells = expand([args.scenario], ["per-episode", "per-group"], seeds, {}, args.steps)
    print(f"{len(cells)} cells: scenario {args.scenario!r}, {args.steps} steps, seeds {args.seeds}")
    header = ("engine", "workers", "ray.init s", "total s", "cells/s", "after init")
    print("{:10} {:>7} {:>10} {:>8} {:>8} {:>10}".format(*header))
    for engine in ("processes", "ray"):
        for workers in (1, 2):
            startup, total = measure(engine, workers, cells)
            init = f"{startup:.2f}" if engine == "ray" else "-"
            print(
                f"{engine:10} {workers:>7} {init:>10} {total:>8.2f} "
                f"{len(cells) / total:>8.2f} {len(cells) / (total - startup):>10.2f}"
            )


if __name__ == "__main__":
    main()
