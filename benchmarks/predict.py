"""How far to trust a cross-policy what-if: live probes on the CPU twin against `whatif`.

    .venv/bin/python benchmarks/predict.py --quick           # 2 presets x 2 settings, 10 steps
    .venv/bin/python benchmarks/predict.py --out runs/predict # 6 presets x 3 settings, 25 steps
    .venv/bin/python benchmarks/predict.py --targets cross    # each probe's row and column only

Each probe is a short live run (`rolloutlog train`, the CPU twin) of one preset at one
`max_inflight`; its log is fitted (`whatif`'s shared world, `studies.whatif.shared_fit`)
and simulated under every setting of the grid (every preset at every `max_inflight`;
`--targets cross`: its preset at every `max_inflight` and every preset at its own).
Each prediction is held against the live probe of that setting on five figures: trained
episodes per second, the median rollout latency (dispatch to completion), the trainer's
idle fraction, stale drops and the mean trained age. Printed: the median absolute error
of each figure over the cross predictions (source != target), split into same preset /
other preset, and for each probe the Spearman rank correlation, across presets at each
`max_inflight`, of predicted against live trained episodes per second.

Errors: relative for throughput, latency and age; stale drops relative to the larger of
the live count and 1% of the live run's dispatches (a run that drops 3 is not 100% off at
6); the trainer's idle fraction in points (it is a fraction already). Probes whose
`NAME.json` report is in `--out` are reused (the live runs are the slow part: about a
minute each on a quiet 2-core machine); `--out/predict.json` gets every figure.
"""

from __future__ import annotations

import argparse
import itertools
import json
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rolloutlog.cli.whatif import fit_recorded, fit_shared_world, recorded_servers
from rolloutlog.events.types import EpisodeCompleted, EpisodeDispatched, Event
from rolloutlog.replay.source import open_log
from rolloutlog.runs.simulate import run_policy
from rolloutlog.runtime.sim.scenario import Scenario
from rolloutlog.studies.whatif.shared_fit import shared_scenario

PRESETS = ("per-episode", "per-group", "all", "prime-rl", "areal", "tinker")
INFLIGHT = (32, 64, 128)
QUICK = {"presets": ("per-episode", "prime-rl"), "inflight": (32, 128), "steps": 10}
FIGURES = ("trained_per_s", "latency_p50_s", "trainer_idle", "stale_drops", "mean_trained_age")
Setting = tuple[str, int]


def probe_log(out: Path, setting: Setting, steps: int, seed: int) -> Path:
    """The live probe's log of `setting`, run now unless its report is in `out`."""
    preset, inflight = setting
    name = f"{preset}-mi{inflight}"
    log, report = out / f"{name}.arrow", out / f"{name}.json"
    if report.exists():
        print(f"probe {name}: reusing {log}", file=sys.stderr, flush=True)
        return log
    for stale in out.glob(f"{name}.arrow*"):  # a probe cut short: start it again
        _remove(stale)
    command = [sys.executable, "-m", "rolloutlog", "train", "--seed", str(seed), "--steps",
               str(steps), "--policy", preset, "--set", f"max_inflight={inflight}", "--log",
               str(log), "--json"]  # fmt: skip
    print(f"probe {name}: {' '.join(command[2:])}", file=sys.stderr, flush=True)
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"probe {name} failed: {done.stderr.strip().splitlines()[-1:]}")
    report.write_text(done.stdout, encoding="utf-8")
    return log


def _remove(path: Path) -> None:
    if path.is_dir():
        for child in path.iterdir():
            _remove(child)
        path.rmdir()
    else:
        path.unlink()


def latency_p50(events: Sequence[Event] | Any) -> float:
    """The median seconds from dispatch to completion of the completed episodes."""
    dispatched: dict[str, float] = {}
    seconds = []
    for event in events:
        if isinstance(event, EpisodeDispatched):
            dispatched[event.episode_id] = event.t
        elif isinstance(event, EpisodeCompleted) and event.episode_id in dispatched:
            seconds.append(event.t - dispatched.pop(event.episode_id))
    return statistics.median(seconds) if seconds else float("nan")


def figures(report: dict[str, Any], log: Path) -> dict[str, float]:
    """The five figures, from a `simulate --json`-shaped report and its log."""
    return {
        "trained_per_s": report["trained_episodes_per_hour"] / 3600.0,
        "latency_p50_s": latency_p50(open_log(log).events()),
        "trainer_idle": report["trainer_idle_fraction"],
        "stale_drops": float(report["episodes_dropped_stale"]),
        "mean_trained_age": report["mean_trained_age"],
        "dispatched": float(report["episodes_dispatched"]),
    }


def predict(log: Path, targets: Sequence[Setting], seed: int) -> dict[Setting, dict[str, Any]]:
    """Fit `log`'s shared world and simulate every target setting on it."""
    fitted, _, _ = fit_recorded(log, seed)
    fit = fit_shared_world(log, fitted, recorded_servers(log))
    base: Scenario = shared_scenario(fitted, fit)
    predicted: dict[Setting, dict[str, Any]] = {}
    with tempfile.TemporaryDirectory() as folder:
        for preset, inflight in targets:
            scenario = base.with_policy(preset).with_run(max_inflight=inflight)
            path = Path(folder) / f"{preset}-{inflight}.arrow"
            report, _ = run_policy(scenario, log_path=path)
            predicted[(preset, inflight)] = figures(report, path)
    return predicted


def targets(grid: Sequence[Setting], source: Setting, which: str) -> list[Setting]:
    """The settings a probe's log is what-if'd into (`--targets`)."""
    if which == "all":
        return list(grid)
    return [s for s in grid if s[0] == source[0] or s[1] == source[1]]


def error(figure: str, got: float, live: dict[str, float]) -> float:
    """The error of one predicted figure against the live one (the module's definitions)."""
    want = live[figure]
    if figure == "trainer_idle":
        return abs(got - want)
    if figure == "stale_drops":
        return abs(got - want) / max(want, 0.01 * live["dispatched"], 1.0)
    return abs(got - want) / abs(want) if want else float(got != want)


def spearman(xs: Sequence[float], ys: Sequence[float]) -> float:
    """Spearman's rank correlation (average ranks for ties)."""

    def ranks(values: Sequence[float]) -> list[float]:
        order = sorted(range(len(values)), key=lambda i: values[i])
        out = [0.0] * len(values)
        i = 0
        while i < len(order):
            j = i
            while j + 1 < len(order) and values[order[j + 1]] == values[order[i]]:
                j += 1
            for k in range(i, j + 1):
                out[order[k]] = (i + j) / 2.0
            i = j + 1
        return out

    rx, ry = ranks(xs), ranks(ys)
    mx, my = statistics.fmean(rx), statistics.fmean(ry)
    num = sum((a - mx) * (b - my) for a, b in zip(rx, ry, strict=True))
    den = (sum((a - mx) ** 2 for a in rx) * sum((b - my) ** 2 for b in ry)) ** 0.5
    return num / den if den else float("nan")


def summarize(
    live: dict[Setting, dict[str, float]],
    predicted: dict[Setting, dict[Setting, dict[str, Any]]],
    presets: Sequence[str],
    inflight: Sequence[int],
) -> dict[str, Any]:
    """Median absolute errors (all cross / same preset / other preset), the reproduction's,
    and per probe the rank correlation across presets of trained episodes per second."""
    groups: dict[str, dict[str, list[float]]] = {
        name: {figure: [] for figure in FIGURES} for name in ("reproduce", "same", "other", "all")
    }
    for source, by_target in predicted.items():
        for target, got in by_target.items():
            kind = "reproduce" if target == source else (
                "same" if target[0] == source[0] else "other")  # fmt: skip
            for figure in FIGURES:
                value = error(figure, got[figure], live[target])
                groups[kind][figure].append(value)
                if kind != "reproduce":
                    groups["all"][figure].append(value)
    mae = {
        name: {f: statistics.median(v) if v else None for f, v in errors.items()}
        for name, errors in groups.items()
    }
    rho = {
        f"{source[0]}-mi{source[1]}": {
            m: spearman([got[(p, m)]["trained_per_s"] for p in presets],
                        [live[(p, m)]["trained_per_s"] for p in presets])
            for m in inflight
            if all((p, m) in got for p in presets)
        }
        for source, got in predicted.items()
    }  # fmt: skip
    return {"median_abs_error": mae, "rank_correlation": rho}


def print_summary(summary: dict[str, Any], live: dict[Setting, dict[str, float]]) -> None:
    print("live probes:")
    for (preset, inflight), row in sorted(live.items()):
        print(f"  {preset:12} mi {inflight:4}  " + "  ".join(
            f"{f} {row[f]:.3g}" for f in FIGURES))  # fmt: skip
    print("median absolute error (relative; trainer idle in points):")
    print(f"  {'predictions':22}" + "".join(f"{f:>18}" for f in FIGURES))
    for name, errors in summary["median_abs_error"].items():
        cells = "".join(f"{'-':>18}" if v is None else f"{v:>18.3f}" for v in errors.values())
        print(f"  {name:22}{cells}")
    print("rank correlation across presets of trained episodes/s (per probe, per max_inflight):")
    every = []
    for source, by_inflight in summary["rank_correlation"].items():
        every += [v for v in by_inflight.values() if v == v]
        cells = "  ".join(f"mi {m}: {v:+.2f}" for m, v in by_inflight.items())
        print(f"  from {source:20} {cells}")
    if every:
        print(f"  median {statistics.median(every):+.2f}, least {min(every):+.2f}")


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help=f"a small grid: {QUICK}")
    parser.add_argument("--presets", default=",".join(PRESETS))
    parser.add_argument("--inflight", default=",".join(map(str, INFLIGHT)))
    parser.add_argument("--steps", type=int, default=25)
    parser.add_argument("--seed", type=int, default=2)
    parser.add_argument("--out", type=Path, default=Path("runs/predict"))
    parser.add_argument(
        "--from-rows",
        action="store_true",
        help="summarize the rows an earlier run wrote to OUT/predict_rows.jsonl",
    )
    parser.add_argument(
        "--targets",
        choices=("all", "cross"),
        default="all",
        help="all: every setting of the grid; cross: the probe's preset at every max_inflight "
        "and every preset at its max_inflight (its row and column, a third of the work)",
    )
    args = parser.parse_args(argv)
    presets = QUICK["presets"] if args.quick else tuple(args.presets.split(","))
    inflight = QUICK["inflight"] if args.quick else tuple(map(int, args.inflight.split(",")))
    args.steps = QUICK["steps"] if args.quick else args.steps
    out = args.out / "quick" if args.quick else args.out
    out.mkdir(parents=True, exist_ok=True)
    grid: list[Setting] = list(itertools.product(presets, inflight))  # type: ignore[arg-type]
    rows_path = out / "predict_rows.jsonl"
    if args.from_rows:
        live, predicted = read_rows(rows_path)
    else:
        live, predicted = run_grid(out, grid, args, rows_path)
    summary = summarize(live, predicted, presets, inflight)
    print_summary(summary, live)
    (out / "predict.json").write_text(json.dumps(summary, indent=1) + "\n")


def run_grid(
    out: Path, grid: list[Setting], args: argparse.Namespace, rows_path: Path
) -> tuple[dict[Setting, dict[str, float]], dict[Setting, dict[Setting, dict[str, Any]]]]:
    """The probes, then each probe's what-ifs, each source's rows appended to `rows_path`
    as they come (a run cut short keeps what it did: `--from-rows`)."""
    logs = {setting: probe_log(out, setting, args.steps, args.seed) for setting in grid}
    live = {}
    for setting, log in logs.items():
        _, recorded, _ = fit_recorded(log, 0)
        live[setting] = figures(recorded, log)
    rows_path.write_text("")
    predicted = {}
    for setting, log in logs.items():
        print(f"what-if from {setting[0]}-mi{setting[1]}", file=sys.stderr, flush=True)
        predicted[setting] = predict(log, targets(grid, setting, args.targets), 0)
        with rows_path.open("a", encoding="utf-8") as rows:
            for target, got in predicted[setting].items():
                row = {"source": setting, "target": target, "predicted": got,
                       "live": live[target]}  # fmt: skip
                rows.write(json.dumps(row) + "\n")
    return live, predicted


def read_rows(
    path: Path,
) -> tuple[dict[Setting, dict[str, float]], dict[Setting, dict[Setting, dict[str, Any]]]]:
    """The live figures and predictions of the rows a run wrote."""
    live: dict[Setting, dict[str, float]] = {}
    predicted: dict[Setting, dict[Setting, dict[str, Any]]] = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        row = json.loads(line)
        source, target = tuple(row["source"]), tuple(row["target"])
        live[target] = row["live"]  # type: ignore[index]
        predicted.setdefault(source, {})[target] = row["predicted"]  # type: ignore[index]
    return live, predicted


if __name__ == "__main__":
    main()
