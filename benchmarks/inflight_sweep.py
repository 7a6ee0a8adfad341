"""How many rollouts in flight? A `max_inflight` sweep on the shared-inference world.

    .venv/bin/python benchmarks/inflight_sweep.py                       # the GPU figure
    .venv/bin/python benchmarks/inflight_sweep.py --scenario gpu-llama3-8b-a100 --steps 20
    .venv/bin/python benchmarks/inflight_sweep.py --live runs/sweep --steps 12   # the twin

More rollouts in flight buy throughput from each server (a decode step serves them all)
but make every rollout slower, hence older, so more of them go stale: trained episodes
per hour rise, peak and fall. Each `max_inflight` is run over `--seeds` under `--policy`;
the table prints the mean trained episodes per hour (the stale ones never train), the
mean trained age, the stale drops and the trainer's idle fraction, and `--plot` draws
trained episodes per hour against `max_inflight` (docs/simulator.md shows it).

`--live DIR` sweeps the CPU twin instead: one `rolloutlog train` per `max_inflight` of
`LIVE_INFLIGHT` (log and report kept in DIR; a report already there is reused, so the
live runs of an earlier sweep, or a copy of them, are read, not run again), then the twin
as `whatif` fits it (`twin_scenario`: the shared world fitted to the `--fit-from` log, its
decode curve over all of them), simulated over the same grid under the live seed, and
says whether the simulator's optimum is within one grid step of the live one. Live
figures are per hour of wall time, on whatever else the machine is running.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

import attrs

from rolloutlog.cli.whatif import fit_recorded, fit_shared_world, recorded_servers
from rolloutlog.events.log_reader import read_log
from rolloutlog.runs.simulate import run_policy
from rolloutlog.runtime.sim.scenario import Scenario, load_scenario
from rolloutlog.studies.whatif.decode_fit import fit_decode
from rolloutlog.studies.whatif.shared_fit import decode_keys, shared_scenario

INFLIGHT = (32, 64, 128, 256, 512, 1024, 2048)
LIVE_INFLIGHT = (16, 32, 64, 128, 256, 512)
COLUMNS = ("trained_episodes_per_hour", "mean_trained_age", "episodes_dropped_stale")
Rows = dict[int, dict[str, float]]


def sweep(
    base: Scenario, grid: Sequence[int], policy: str, steps: int, seeds: Sequence[int]
) -> Rows:
    """Per `max_inflight`, the seed means of the figures in `COLUMNS` and the idle fraction."""
    rows: Rows = {}
    for inflight in grid:
        reports = []
        for seed in seeds:
            scenario = base.with_policy(policy).with_seed(seed)
            scenario = scenario.with_run(max_inflight=inflight).with_steps(steps)
            reports.append(run_policy(scenario)[0])
        rows[inflight] = {
            key: statistics.fmean(float(r[key]) for r in reports)
            for key in (*COLUMNS, "trainer_idle_fraction")
        }
        print_row("sim ", inflight, rows[inflight])
    return rows


def print_row(source: str, inflight: int, row: dict[str, float]) -> None:
    idle = row.get("trainer_idle_fraction")
    print(
        f"{source} max_inflight {inflight:5}  trained/h {row['trained_episodes_per_hour']:9,.0f}"
        f"  mean age {row['mean_trained_age']:.2f}  dropped stale "
        f"{row['episodes_dropped_stale']:7,.0f}"
        + ("" if idle is None else f"  trainer idle {idle:.0%}"),
        flush=True,
    )


def live_run(folder: Path, inflight: int, policy: str, steps: int, seed: int) -> Path:
    """One live run on the CPU twin at `max_inflight = inflight`: its log, and its report
    beside it (`live-<inflight>.json`); a report already there is kept (a rerun goes on)."""
    log, report = folder / f"live-{inflight}.arrow", folder / f"live-{inflight}.json"
    if not report.exists():
        command = [sys.executable, "-m", "rolloutlog", "train", "--steps", str(steps)]
        command += ["--seed", str(seed), "--policy", policy, "--json", "--log", str(log)]
        command += ["--set", f"max_inflight={inflight}"]
        print(f"live: max_inflight {inflight} ...", flush=True)
        output = subprocess.run(command, check=True, capture_output=True, text=True).stdout
        report.write_text(output, encoding="utf-8")
    return log


def live_row(folder: Path, inflight: int) -> dict[str, float]:
    """The figures of `COLUMNS` of a live run, per hour of its wall time."""
    report = json.loads((folder / f"live-{inflight}.json").read_text(encoding="utf-8"))
    hours = report["wall_seconds"] / 3600
    return {
        "trained_episodes_per_hour": report["episodes_trained"] / hours,
        "mean_trained_age": report["mean_trained_age"],
        "episodes_dropped_stale": report["episodes_dropped_stale"],
    }


def twin_scenario(folder: Path, grid: Sequence[int], steps: int, source: int) -> Scenario:
    """The CPU twin as `whatif` fits it: the shared world fitted to the live log at
    `max_inflight = source` (its outcomes, trainer, update pause), with the decode curve
    fitted over every live log of the grid (`studies.whatif.decode_fit.fit_decode`: runs at
    several `max_inflight` tell the step's fixed part from its part per sequence, where one
    log cannot)."""
    log = folder / f"live-{source}.arrow"
    fitted, _, _ = fit_recorded(log, 0)
    fit = fit_shared_world(log, fitted, recorded_servers(log))
    logs = [read_log(folder / f"live-{inflight}.arrow") for inflight in grid]
    decode = fit_decode(logs, servers=fit.decode.servers)
    fit = attrs.evolve(fit, world={**fit.world, **decode_keys(decode)}, decode=decode)
    print(f"twin world: {json.dumps(decode_keys(decode))}", flush=True)
    return shared_scenario(fitted, fit).with_steps(steps)


def best(rows: Rows) -> int:
    return max(rows, key=lambda m: rows[m]["trained_episodes_per_hour"])


def plot(curves: dict[str, Rows], title: str, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axis = plt.subplots(figsize=(6.4, 3.6))
    for label, rows in curves.items():
        inflight = list(rows)
        values = [rows[m]["trained_episodes_per_hour"] for m in inflight]
        axis.plot(inflight, values, "o-", label=label)
        axis.set_xticks(inflight, [str(m) for m in inflight])
    axis.set_xscale("log", base=2)
    axis.set_xlabel("max_inflight (rollouts in flight)")
    axis.set_ylabel("trained episodes per hour")
    axis.set_title(title, fontsize=9)
    axis.grid(alpha=0.3)
    if len(curves) > 1:
        axis.legend(fontsize=8)
    figure.tight_layout()
    figure.savefig(path, metadata={"Date": None} if path.suffix == ".svg" else None)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--scenario", default="gpu-llama2-7b-h100")
    parser.add_argument("--policy", default="per-episode")
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--live", type=Path, help="sweep the CPU twin; logs kept here")
    parser.add_argument("--live-seed", type=int, default=2)
    parser.add_argument(
        "--fit-from",
        type=int,
        default=64,
        help="--live: the max_inflight whose live log gives the fitted twin its outcomes, "
        "trainer and update pause (the decode curve comes from every live log)",
    )
    parser.add_argument("--plot", type=Path)
    args = parser.parse_args()
    if args.live is None:
        seeds = range(args.seeds)
        rows = sweep(load_scenario(args.scenario), INFLIGHT, args.policy, args.steps, seeds)
        print(f"the most trained episodes per hour at max_inflight = {best(rows)}")
        title = f"{args.scenario}, {args.policy}, {args.steps} steps, mean of {args.seeds} seeds"
        curves = {"simulated": rows}
    else:
        args.live.mkdir(parents=True, exist_ok=True)
        live: Rows = {}
        for inflight in LIVE_INFLIGHT:
            live_run(args.live, inflight, args.policy, args.steps, args.live_seed)
            live[inflight] = live_row(args.live, inflight)
            print_row("live", inflight, live[inflight])
        twin = twin_scenario(args.live, LIVE_INFLIGHT, args.steps, args.fit_from)
        # the live run's seed: its groups' tasks, so the trace replays their outcomes
        rows = sweep(twin, LIVE_INFLIGHT, args.policy, args.steps, [args.live_seed])
        steps_apart = abs(LIVE_INFLIGHT.index(best(rows)) - LIVE_INFLIGHT.index(best(live)))
        print(
            f"the most trained episodes per hour: live at max_inflight = {best(live)}, "
            f"simulated at {best(rows)}: {steps_apart} grid step(s) apart"
        )
        title = f"CPU twin, {args.policy}, {args.steps} steps, live seed {args.live_seed}"
        curves = {"live (wall time)": live, "simulated, the twin fitted from them": rows}
    if args.plot is not None:
        plot(curves, title, args.plot)


if __name__ == "__main__":
    main()
