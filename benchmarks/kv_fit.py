"""How well `whatif` recovers the servers' KV capacity: simulated logs of known capacity.

    .venv/bin/python benchmarks/kv_fit.py                       # the grid below, one server
    .venv/bin/python benchmarks/kv_fit.py --servers 2 --capacities 6000,10000

The logs are those the tests hold the fit to (`rolloutlog.studies.whatif.kv_logs.truth`). Each log
is a run of the shared world (`step(n) = 0.02 + 0.002·n`, 128-token prompts, completions of
median 256, the concurrency controller moving the limit between 20% and 100% of
`max_inflight` every 60 s on average, so that the log runs both below and above the
capacity) with `kv_capacity_tokens` set; `studies.whatif.kv_fit.fit_kv` fits it from the log
alone. Printed per log: the capacity, `max_inflight`, seed, whether the fit saw the
capacity, its estimate and relative error; then the largest error among those seen.
"""

from __future__ import annotations

import argparse
import itertools

from rolloutlog.runtime.sim.scenario import Scenario
from rolloutlog.studies.whatif.decode_fit import decode_rows
from rolloutlog.studies.whatif.fit import collect, train_windows
from rolloutlog.studies.whatif.kv_fit import KvFit, fit_kv
from rolloutlog.studies.whatif.kv_logs import events_of, truth


def fitted(scenario: Scenario) -> KvFit:
    """The KV fit of a simulated log of `truth`."""
    collector = collect(events_of(scenario))
    servers = scenario.world.inference_servers
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
        kv = fitted(truth(capacity, max_inflight, seed, args.servers))
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
