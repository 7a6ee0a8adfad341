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
`LIVE_INFLIGHT` (log and report kept in DIR; a rerun reuses the reports there), then the
twin's world fitted from those logs (`twin_scenario`), simulated over the same grid, and
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

from rolloutlog.events.log_reader import read_log
from rolloutlog.events.types import Event, VersionLive, VersionPending
from rolloutlog.runs.simulate import run_policy
from rolloutlog.runtime.live.settings import TRAIN_RUN_DEFAULTS
from rolloutlog.runtime.sim.scenario import Scenario, load_scenario, scenario_from_mapping
from rolloutlog.studies.whatif.decode_fit import fit_decode

INFLIGHT = (32, 64, 128, 256, 512, 1024, 2048)
LIVE_INFLIGHT = (16, 32, 64, 128, 256, 512)
COLUMNS = ("trained_episodes_per_hour", "mean_trained_age", "episodes_dropped_stale")
Rows = dict[int, dict[str, float]]


def sweep(base: Scenario, grid: Sequence[int], policy: str, steps: int, seeds: int) -> Rows:
    """Per `max_inflight`, the seed means of the figures in `COLUMNS` and the idle fraction."""
    rows: Rows = {}
    for inflight in grid:
        reports = []
        for seed in range(seeds):
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


def twin_scenario(folder: Path, grid: Sequence[int], steps: int) -> Scenario:
    """The CPU twin as a shared world, from the live runs: its decode curve fitted over
    every run's log (`studies.whatif.decode_fit`; the rest of an episode's seconds as
    environment seconds), the trainer's seconds per step against its tokens, the weight
    update and the episodes' tokens (medians). Colocation is not fitted (not colocated)."""
    logs = [read_log(folder / f"live-{inflight}.arrow") for inflight in grid]
    decode = fit_decode(logs)
    steps_done = [
        step
        for inflight in grid
        for step in json.loads((folder / f"live-{inflight}.json").read_text("utf-8"))["train_steps"]
    ]
    per_token = _slope([s["tokens"] for s in steps_done], [s["duration_s"] for s in steps_done])
    per_token = max(per_token, 0.0)  # a step never takes less for more tokens
    fixed = statistics.median(s["duration_s"] - per_token * s["tokens"] for s in steps_done)
    completions = [
        e.completion_tokens for log in logs for e in log if e.kind == "episode_completed"
    ]
    prompts = [e.prompt_tokens for log in logs for e in log if e.kind == "episode_completed"]
    world = {
        "inference": "shared",
        "decode_step_s": max(decode.decode_step_s, 1e-6),
        "decode_s_per_seq": max(decode.decode_s_per_seq, 0.0),
        "episode_overhead_s": max(decode.overhead_s, 0.0),
        "prompt_tokens": round(statistics.median(prompts)),
        "task_length_tokens": round(statistics.median(completions)),
        "task_length_sigma": 0.1,
        "max_completion_tokens": max(completions),
        "duration_shape": 0.01,
        "max_running": 256,  # the twin engine's `max_batch`
        "reward": "fractional",
        "failure_rate": 0.0,
        "train_step_s": max(fixed, 0.0),
        "train_s_per_token": per_token,
        "weight_update_s": statistics.median(_update_seconds(log) for log in logs),
        "trainer_jitter": 0.0,
    }
    run = {key: value for key, value in TRAIN_RUN_DEFAULTS.items() if key != "max_inflight"}
    data = {"description": "the CPU twin, fitted", "steps": steps, "run": run, "world": world}
    print(f"twin world: {json.dumps(world)}", flush=True)
    return scenario_from_mapping(data, name="cpu-twin", source=str(folder))


def _slope(x: Sequence[float], y: Sequence[float]) -> float:
    """The least-squares slope of y against x (0 when x does not vary)."""
    mean_x, mean_y = statistics.fmean(x), statistics.fmean(y)
    spread = sum((a - mean_x) ** 2 for a in x)
    return (
        sum((a - mean_x) * (b - mean_y) for a, b in zip(x, y, strict=True)) / spread
        if spread
        else 0.0
    )


def _update_seconds(events: list[Event]) -> float:
    """The median seconds from a version's `version_pending` to its `version_live`."""
    pending = {e.version: e.t for e in events if isinstance(e, VersionPending)}
    gaps = [
        e.t - pending[e.version]
        for e in events
        if isinstance(e, VersionLive) and e.version in pending
    ]
    return statistics.median(gaps) if gaps else 0.0


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
    parser.add_argument("--plot", type=Path)
    args = parser.parse_args()
    if args.live is None:
        rows = sweep(load_scenario(args.scenario), INFLIGHT, args.policy, args.steps, args.seeds)
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
        twin = twin_scenario(args.live, LIVE_INFLIGHT, args.steps)
        rows = sweep(twin, LIVE_INFLIGHT, args.policy, args.steps, args.seeds)
        steps_apart = abs(LIVE_INFLIGHT.index(best(rows)) - LIVE_INFLIGHT.index(best(live)))
        print(
            f"the most trained episodes per hour: live at max_inflight = {best(live)}, "
            f"simulated at {best(rows)}: {steps_apart} grid step(s) apart"
        )
        title = f"CPU twin, {args.policy}, {args.steps} steps, live seed {args.live_seed}"
        curves = {"live (wall time)": live, f"simulated, fitted twin ({args.seeds} seeds)": rows}
    if args.plot is not None:
        plot(curves, title, args.plot)


if __name__ == "__main__":
    main()
