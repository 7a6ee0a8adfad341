"""How many rollouts in flight? A `max_inflight` sweep on a shared-inference GPU scenario.

    .venv/bin/python benchmarks/inflight_sweep.py                       # the docs' figure
    .venv/bin/python benchmarks/inflight_sweep.py --scenario gpu-llama3-8b-a100 --steps 20

More rollouts in flight buy throughput from each server (a decode step serves them all)
but make every rollout slower, hence older, so more of them go stale: trained episodes
per hour rise, peak and fall. Each `max_inflight` is run over `--seeds` under `--policy`;
the table prints the mean trained episodes per hour (the stale ones never train), the
mean trained age, the stale drops and the trainer's idle fraction, and `--plot` draws
trained episodes per hour against `max_inflight` (docs/simulator.md shows it).
"""

from __future__ import annotations

import argparse
import statistics
from pathlib import Path

from rolloutlog.runs.simulate import run_policy
from rolloutlog.runtime.sim.scenario import load_scenario

INFLIGHT = (32, 64, 128, 256, 512, 1024, 2048)
COLUMNS = ("trained_episodes_per_hour", "mean_trained_age", "episodes_dropped_stale")


def sweep(name: str, policy: str, steps: int, seeds: int) -> dict[int, dict[str, float]]:
    """Per `max_inflight`, the seed means of the figures in `COLUMNS` and the idle fraction."""
    rows: dict[int, dict[str, float]] = {}
    for inflight in INFLIGHT:
        reports = []
        for seed in range(seeds):
            scenario = load_scenario(name).with_policy(policy).with_seed(seed)
            scenario = scenario.with_run(max_inflight=inflight).with_steps(steps)
            reports.append(run_policy(scenario)[0])
        rows[inflight] = {
            key: statistics.fmean(float(r[key]) for r in reports)
            for key in (*COLUMNS, "trainer_idle_fraction")
        }
        row = rows[inflight]
        print(
            f"max_inflight {inflight:5}  trained/h {row['trained_episodes_per_hour']:9,.0f}  "
            f"mean age {row['mean_trained_age']:.2f}  dropped stale "
            f"{row['episodes_dropped_stale']:7,.0f}  trainer idle "
            f"{row['trainer_idle_fraction']:.0%}",
            flush=True,
        )
    return rows


def plot(rows: dict[int, dict[str, float]], title: str, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axis = plt.subplots(figsize=(6.4, 3.6))
    inflight = list(rows)
    axis.plot(inflight, [rows[m]["trained_episodes_per_hour"] for m in inflight], "o-")
    axis.set_xscale("log", base=2)
    axis.set_xticks(inflight, [str(m) for m in inflight])
    axis.set_xlabel("max_inflight (rollouts in flight)")
    axis.set_ylabel("trained episodes per hour")
    axis.set_title(title, fontsize=9)
    axis.grid(alpha=0.3)
    figure.tight_layout()
    figure.savefig(path, metadata={"Date": None} if path.suffix == ".svg" else None)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--scenario", default="gpu-llama2-7b-h100")
    parser.add_argument("--policy", default="per-episode")
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--plot", type=Path)
    args = parser.parse_args()
    rows = sweep(args.scenario, args.policy, args.steps, args.seeds)
    best = max(rows, key=lambda m: rows[m]["trained_episodes_per_hour"])
    print(f"the most trained episodes per hour at max_inflight = {best}")
    if args.plot is not None:
        title = f"{args.scenario}, {args.policy}, {args.steps} steps, mean of {args.seeds} seeds"
        plot(rows, title, args.plot)


if __name__ == "__main__":
    main()
