"""How well `whatif` recovers the servers' KV capacity: simulated logs of known capacity.

    .venv/bin/python benchmarks/kv_fit.py                       # the grid below, one server
    .venv/bin/python benchmarks/kv_fit.py --servers 2 --capacities 8000,12000

Each log is a run of the shared world (`step(n) = 0.02 + 0.002·n`, 128-token prompts,
completions of median 256, the concurrency controller moving the limit between 20% and
100% of `max_inflight` every 60 s on average, so that the log runs both below and above
the capacity) with `kv_capacity_tokens` set; `studies.whatif.kv_fit.fit_kv` fits it from
the log alone. Printed per log: the capacity, `max_inflight`, seed, whether the fit saw the
capacity, its estimate and relative error; then the largest error among those seen.
"""

from __future__ import annotations

import argparse
import itertools
from typing import Any

from rolloutlog.events.types import Event
from rolloutlog.runtime.sim.scenario import Scenario, scenario_from_mapping
from rolloutlog.runtime.sim.simulation import simulate
from rolloutlog.studies.whatif.decode_fit import decode_rows
from rolloutlog.studies.whatif.fit import collect, train_windows
from rolloutlog.studies.whatif.kv_fit import KvFit, fit_kv


def scenario(capacity: int, max_inflight: int, seed: int, servers: int = 1) -> Scenario:
    """The shared world at `capacity` tokens per server, its load moved by the controller."""
    world: dict[str, Any] = {
        "inference": "shared",
        "inference_servers": servers,
        "decode_step_s": 0.02,
        "decode_s_per_seq": 0.002,
        "prompt_tokens": 128,
        "prefill_tokens_per_s": 4000.0,
        "prefix_caching": False,
        "episode_overhead_s": 1.0,
        "task_length_tokens": 256,
        "max_completion_tokens": 2048,
        "train_step_s": 10.0,
        "train_s_per_token": 2e-4,
        "trainer_jitter": 0.0,
        "weight_update_s": 2.0,
        "kv_capacity_tokens": capacity,
        "limit_interval_s": 60.0,
        "limit_min_fraction": 0.2,
    }
    run = {"group_size": 8, "max_inflight": max_inflight, "batch_size": 32}
    return scenario_from_mapping({"steps": 30, "seed": seed, "run": run, "world": world})


def fitted(truth: Scenario) -> KvFit:
    """The KV fit of a simulated log of `truth`."""
    events: list[Event] = []
    simulate(truth, on_events=events.extend)
    collector = collect(events)
    servers = truth.world.inference_servers
    return fit_kv(collector, decode_rows(collector, train_windows(collector), servers), servers)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--capacities", default="10000,15000,20000")
    parser.add_argument("--inflight", default="32,64")
    parser.add_argument("--seeds", default="1,2,3")
    parser.add_argument("--servers", type=int, default=1)
    args = parser.parse_args()
    grid = itertools.product(
        [int(c) for c in args.capacities.split(",")],
        [int(m) for m in args.inflight.split(",")],
        [int(s) for s in args.seeds.split(",")],
    )
    errors = []
    print("capacity  max_inflight  seed  seen  estimate  error")
    for capacity, max_inflight, seed in grid:
        kv = fitted(scenario(capacity, max_inflight, seed, args.servers))
        if kv.capacity is None:
            print(f"{capacity:8,}  {max_inflight:12}  {seed:4}  no")
            continue
        error = kv.capacity / capacity - 1.0
        errors.append(abs(error))
        print(f"{capacity:8,}  {max_inflight:12}  {seed:4}  yes  {kv.capacity:8,.0f}  {error:+.1%}")
    if errors:
        print(f"seen {len(errors)}; largest error {max(errors):.1%}")


if __name__ == "__main__":
    main()
