"""How far to trust a cross-policy what-if: live probes (CPU twin or vLLM) against `whatif`.

    .venv/bin/python benchmarks/predict.py --quick           # 2 presets x 2 settings, 10 steps
    .venv/bin/python benchmarks/predict.py --out runs/predict # 6 presets x 3 settings, 25 steps
    .venv/bin/python benchmarks/predict.py --targets cross    # each probe's row and column only
    .venv/bin/python benchmarks/predict.py --engine vllm      # probes on real `vllm serve`
    .venv/bin/python benchmarks/predict.py --out A --from-rows --floor B  # A's what-ifs, and
                                                              # B's live probes held against A's
    .venv/bin/python benchmarks/predict.py --reference per-episode@64  # and the machine's
                                                              # speed at each probe

Each probe is a short live run (`rolloutlog train`, the CPU twin) of one preset at one
`max_inflight`; with `--engine vllm` it runs against real `vllm serve` processes instead
(`train --backend vllm`; the CPU build of docs/runtime.md, from `ROLLOUTLOG_VLLM_VENV` or
`.venv-vllm`), as many as the train settings' `servers` (the twin's probes start that many
CPU servers), started once for the command from a v0 checkpoint (each run makes its own v0
live at its start) and stopped, whole process groups, when it ends; their output is kept
in OUT/vllm/. Its log is fitted (`whatif`'s shared world, `studies.whatif.shared_fit`)
and simulated under every setting of the grid (every preset at every `max_inflight`;
`--targets cross`: its preset at every `max_inflight` and every preset at its own).
Each prediction is held against the live probe of that setting on seven figures: trained
episodes per second, the median and the mean rollout latency (dispatch to completion), the
episodes in flight (averaged over the run), the trainer's idle fraction, stale drops and
the mean trained age. At one completion rate the mean latency follows the episodes in
flight (Little's law); the median follows the latencies' spread too, which a fitted world
with too narrow a spread gets wrong with the mean right. Printed: the median absolute error
of each figure over the cross predictions (source != target), split into same preset /
other preset, and for each probe the Spearman rank correlation, across presets at each
`max_inflight`, of predicted against live trained episodes per second.

Errors: relative for throughput, latency, episodes in flight and age; stale drops relative
to the larger of the live count and 1% of the live run's dispatches (a run that drops 3 is
not 100% off at 6); the trainer's idle fraction in points (it is a fraction already).
Rows an earlier run wrote without a figure (`--from-rows`) leave it out. `--floor B` holds
another probe set of the same grid (another seed, or the same again) against this one, each
of B's live probes taken as the prediction of this set's same setting: the error a repeat of
the probe makes, which no what-if from one probe can be expected to beat, and the rank
correlation of the two sets' throughputs across presets.

`--reference PRESET@M` runs a probe of that setting first, after every two settings and
last (`reference-NN` in OUT; each probe's wall-clock span goes to OUT/clock.jsonl). The
references' throughput, interpolated to each probe's moment over their median, is the
machine's speed then, printed per probe: whether the set was recorded on a steady machine,
or its errors carry the machine's drift. Probes whose
`NAME.json` report is in `--out` are reused (the live runs are the slow part: about a
minute each on a quiet 2-core machine); `--out/predict.json` gets every figure. The engine
is written to OUT/engine, and a run of the other engine into the same OUT is refused: its
probes would be reused as this engine's (the default OUT differs: runs/predict for the
twin, runs/predict-vllm for vLLM).
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import json
import math
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy

from rolloutlog.cli.whatif import fit_recorded, fit_shared_world, recorded_servers
from rolloutlog.events.types import EpisodeCompleted, EpisodeDispatched, Event
from rolloutlog.replay.source import open_log
from rolloutlog.runs.simulate import run_policy
from rolloutlog.runs.train_inputs import weights_beside
from rolloutlog.runtime.live.session import vllm_from_v0
from rolloutlog.runtime.live.settings import build_settings
from rolloutlog.runtime.live.vllm_launch import VLLMStartError, VLLMUnavailable, cpu_command
from rolloutlog.runtime.sim.scenario import Scenario
from rolloutlog.studies.learning_model import ranks
from rolloutlog.studies.whatif.decode_fit import Occupancy
from rolloutlog.studies.whatif.fit import collect
from rolloutlog.studies.whatif.shared_fit import running_warnings, shared_scenario

PRESETS = ("per-episode", "per-group", "all", "prime-rl", "areal", "tinker")
INFLIGHT = (32, 64, 128)
QUICK = {"presets": ("per-episode", "prime-rl"), "inflight": (32, 128), "steps": 10}
ENGINES = ("twin", "vllm")
START_TIMEOUT_S = 600.0  # vLLM's CPU build: healthy after 30-55 s on a quiet machine
FIGURES = (
    "trained_per_s",
    "latency_p50_s",
    "latency_mean_s",
    "inflight_mean",
    "trainer_idle",
    "stale_drops",
    "mean_trained_age",
)
Setting = tuple[str, int]
GROUPS = ("reproduce", "same", "other", "all", "all, in range", "all, warned")
CLOCK = "clock.jsonl"  # each probe run's name and wall-clock span, appended as it ends
REFERENCE_EVERY = 2  # with --reference: a reference probe after every two settings


def probe_name(setting: Setting) -> str:
    """A probe's file stem in OUT, and its name in the tables."""
    return f"{setting[0]}-mi{setting[1]}"


def probe_log(
    out: Path,
    setting: Setting,
    steps: int,
    seed: int,
    urls: Sequence[str] = (),
    name: str | None = None,
) -> Path:
    """The live probe's log of `setting` (named `name`, default `probe_name`), run now
    unless its report is in `out`; against the `vllm serve` processes at `urls` if any (the
    twin otherwise)."""
    preset, inflight = setting
    name = name or probe_name(setting)
    log, report = out / f"{name}.arrow", out / f"{name}.json"
    if report.exists():
        print(f"probe {name}: reusing {log}", file=sys.stderr, flush=True)
        return log
    for stale in out.glob(f"{name}.arrow*"):  # a probe cut short: start it again
        _remove(stale)
    command = [sys.executable, "-m", "rolloutlog", "train", "--seed", str(seed), "--steps",
               str(steps), "--policy", preset, "--set", f"max_inflight={inflight}", "--log",
               str(log), "--json"]  # fmt: skip
    if urls:  # the broadcast directory: the twin's default, as vLLM (cwd aside) finds it
        command += ["--backend", "vllm", "--weights-dir", str(weights_beside(log.resolve()))]
        command += [part for url in urls for part in ("--url", url)]
    print(f"probe {name}: {' '.join(command[2:])}", file=sys.stderr, flush=True)
    began = time.time()
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"probe {name} failed: {done.stderr.strip().splitlines()[-1:]}")
    report.write_text(done.stdout, encoding="utf-8")
    span = {"name": name, "began": began, "ended": time.time()}
    with (out / CLOCK).open("a", encoding="utf-8") as clock:
        clock.write(json.dumps(span) + "\n")
    return log


def _remove(path: Path) -> None:
    if path.is_dir():
        for child in path.iterdir():
            _remove(child)
        path.rmdir()
    else:
        path.unlink()


def probe_sequence(grid: Sequence[Setting], reference: Setting | None) -> list[tuple[str, Setting]]:
    """The probes (name, setting) in the order they run: the grid's, and with a reference
    setting, a reference probe first, after every `REFERENCE_EVERY` settings and last."""
    if reference is None:
        return [(probe_name(s), s) for s in grid]
    sequence: list[tuple[str, Setting]] = []
    for number, setting in enumerate(grid):
        if number % REFERENCE_EVERY == 0:
            sequence.append((f"reference-{number // REFERENCE_EVERY + 1:02}", reference))
        sequence.append((probe_name(setting), setting))
    sequence.append((f"reference-{-(-len(grid) // REFERENCE_EVERY) + 1:02}", reference))
    return sequence


def machine_speed(out: Path) -> dict[str, float]:
    """Each probe's machine speed, from the reference probes run beside it: the references'
    trained episodes per second, interpolated in time to the probe's midpoint (held at the
    first and last), over their median. Empty where `out` has fewer than two references.
    The twin's speed follows the machine's, which has moved by a quarter within minutes; a
    what-if holds a probe against probes recorded minutes away, so a set whose speed moved
    measures the machine's drift with the world's error. A gauge, not a correction: on a
    quiet machine, dividing the figures by it added the references' own spread (a repeat's
    6% in throughput became 10%: benchmarks/RESULTS.md § benchmarks/predict.py)."""
    clock = out / CLOCK
    lines = clock.read_text(encoding="utf-8").splitlines() if clock.exists() else []
    midpoints = {
        span["name"]: (span["began"] + span["ended"]) / 2 for span in map(json.loads, lines)
    }
    references = sorted(
        (t, reference_rate(out / f"{name}.arrow"))
        for name, t in midpoints.items()
        if name.startswith("reference-")
    )
    if len(references) < 2:
        return {}
    times, rates = zip(*references, strict=True)
    typical = statistics.median(rates)
    return {
        name: float(numpy.interp(t, times, rates)) / typical
        for name, t in midpoints.items()
        if not name.startswith("reference-")
    }


def reference_rate(log: Path) -> float:
    """A reference probe's trained episodes per second, as every probe's live figure is
    read (`figures`)."""
    _, recorded, _ = fit_recorded(log, 0)
    return float(recorded["trained_episodes_per_hour"]) / 3600.0


def latencies(events: Sequence[Event] | Any) -> list[float]:
    """The seconds from dispatch to completion of the completed episodes."""
    dispatched: dict[str, float] = {}
    seconds = []
    for event in events:
        if isinstance(event, EpisodeDispatched):
            dispatched[event.episode_id] = event.t
        elif isinstance(event, EpisodeCompleted) and event.episode_id in dispatched:
            seconds.append(event.t - dispatched.pop(event.episode_id))
    return seconds


def inflight_mean(events: Sequence[Event] | Any) -> float:
    """Episodes in flight (dispatch to arrival or cancellation), averaged over the run: with
    the completion rate, what Little's law ties the mean latency to. Counted as the fit
    counts them (`decode_fit.Occupancy.of_flights`)."""
    collector = collect(events)
    if collector.end_t <= 0.0:
        return float("nan")
    return Occupancy.of_flights(collector).integral(collector.end_t) / collector.end_t


def figures(report: dict[str, Any], log: Path) -> dict[str, float]:
    """The figures (`FIGURES`) and the dispatch count, from a `simulate --json`-shaped
    report and its log. The mean latency and the episodes in flight tell a wrong balance of
    inflight and throughput (Little's law) from a wrong spread of the latencies, which
    moves the median alone."""
    seconds = latencies(open_log(log).events())
    return {
        "trained_per_s": report["trained_episodes_per_hour"] / 3600.0,
        "latency_p50_s": statistics.median(seconds) if seconds else float("nan"),
        "latency_mean_s": statistics.fmean(seconds) if seconds else float("nan"),
        "inflight_mean": inflight_mean(open_log(log).events()),
        "trainer_idle": report["trainer_idle_fraction"],
        "stale_drops": float(report["episodes_dropped_stale"]),
        "mean_trained_age": report["mean_trained_age"],
        "dispatched": float(report["episodes_dispatched"]),
    }


def predict(log: Path, targets: Sequence[Setting], seed: int) -> dict[Setting, dict[str, Any]]:
    """Fit `log`'s shared world and simulate every target setting on it; `warned` (1 or 0):
    whether `whatif` warns that the target ran below the log's running requests."""
    fitted, _, _ = fit_recorded(log, seed)
    fit = fit_shared_world(log, fitted, recorded_servers(log))
    base: Scenario = shared_scenario(fitted, fit)
    predicted: dict[Setting, dict[str, Any]] = {}
    with tempfile.TemporaryDirectory() as folder:
        for preset, inflight in targets:
            scenario = base.with_policy(preset).with_run(max_inflight=inflight)
            path = Path(folder) / f"{preset}-{inflight}.arrow"
            report, _ = run_policy(scenario, log_path=path)
            warned = running_warnings(fit, {preset: report}, scenario.world.inference_servers)
            predicted[(preset, inflight)] = {**figures(report, path), "warned": float(bool(warned))}
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
    """Spearman's rank correlation (average ranks for ties), defined for two values too."""
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
    """Median absolute errors (all cross / same preset / other preset; all cross split by
    whether `whatif` warned the target ran below the log's range), the reproduction's, and
    per probe the rank correlation across presets of trained episodes per second."""
    groups: dict[str, dict[str, list[float]]] = {
        name: {figure: [] for figure in FIGURES} for name in GROUPS
    }
    for source, by_target in predicted.items():
        for target, got in by_target.items():
            kind = "reproduce" if target == source else (
                "same" if target[0] == source[0] else "other")  # fmt: skip
            cross = [] if kind == "reproduce" else ["all"]
            if cross and "warned" in got:  # rows written before the warning have no split
                cross.append("all, warned" if got["warned"] else "all, in range")
            for figure in (f for f in FIGURES if f in got and f in live[target]):
                value = error(figure, got[figure], live[target])
                for name in (kind, *cross):
                    groups[name][figure].append(value)
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


def floor(
    live: dict[Setting, dict[str, float]],
    repeat: dict[Setting, dict[str, float]],
    presets: Sequence[str],
    inflight: Sequence[int],
) -> dict[str, Any]:
    """Another probe set's live figures (`--floor`) held against this set's as if they were
    predictions: each setting's repeat against it, and per `max_inflight` the rank
    correlation across presets of the two sets' trained episodes per second."""
    shared = [s for s in live if s in repeat]
    mae = {
        f: statistics.median(values) if values else None
        for f in FIGURES
        for values in [[error(f, repeat[s][f], live[s]) for s in shared
                        if f in repeat[s] and f in live[s]]]
    }  # fmt: skip
    rho = {
        m: spearman([repeat[(p, m)]["trained_per_s"] for p in presets],
                    [live[(p, m)]["trained_per_s"] for p in presets])
        for m in inflight
        if all((p, m) in repeat and (p, m) in live for p in presets)
    }  # fmt: skip
    return {"settings": len(shared), "median_abs_error": mae, "rank_correlation": rho}


def print_floor(summary: dict[str, Any]) -> None:
    cells = "".join(
        f"{'-':>18}" if v is None else f"{v:>18.3f}" for v in summary["median_abs_error"].values()
    )
    print(f"  {'floor (repeat, ' + str(summary['settings']) + ')':22}{cells}")
    ranks_ = "  ".join(f"mi {m}: {v:+.2f}" for m, v in summary["rank_correlation"].items())
    print(f"  floor rank correlation (the other set's live against this set's): {ranks_}")


def print_speed(speed: dict[str, float]) -> None:
    """The machine's speed at each probe (`machine_speed`), least and most first."""
    low, high = min(speed, key=speed.__getitem__), max(speed, key=speed.__getitem__)
    print(f"machine speed (the references' rate at each probe over their median): "
          f"{speed[low]:.2f} ({low}) to {speed[high]:.2f} ({high})")  # fmt: skip
    print("  " + "  ".join(f"{name} {value:.2f}" for name, value in speed.items()))


def print_summary(summary: dict[str, Any], live: dict[Setting, dict[str, float]]) -> None:
    print("live probes:")
    for (preset, inflight), row in sorted(live.items()):
        print(f"  {preset:12} mi {inflight:4}  " + "  ".join(
            f"{f} {row.get(f, math.nan):.3g}" for f in FIGURES))  # fmt: skip
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


def parse(argv: Sequence[str] | None) -> argparse.Namespace:
    """The command line, the quick grid applied."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help=f"a small grid: {QUICK}")
    parser.add_argument("--presets", default=",".join(PRESETS))
    parser.add_argument("--inflight", default=",".join(map(str, INFLIGHT)))
    parser.add_argument("--steps", type=int, default=25)
    parser.add_argument("--seed", type=int, default=2)
    parser.add_argument(
        "--engine",
        choices=ENGINES,
        default="twin",
        help="twin: each probe starts the CPU twin's servers; vllm: the probes share real "
        "`vllm serve` processes started for the command (ROLLOUTLOG_VLLM_VENV or .venv-vllm)",
    )
    parser.add_argument(
        "--out", type=Path, help="default: runs/predict (twin), runs/predict-vllm (vllm)"
    )
    parser.add_argument(
        "--floor",
        type=Path,
        help="another probe set's OUT, of the same grid (another seed, or the same again): "
        "its live probes held against this set's, as a repeat would predict them (the floor "
        "no what-if can beat); read from its predict_rows.jsonl",
    )
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
    parser.add_argument(
        "--reference",
        type=reference_setting,
        help="PRESET@M: a probe of this setting first, after every two settings and last; "
        "from their throughputs, the machine's speed at each probe",
    )
    args = parser.parse_args(argv)
    if args.out is None:
        args.out = Path("runs/predict" if args.engine == "twin" else "runs/predict-vllm")
    args.presets = QUICK["presets"] if args.quick else tuple(args.presets.split(","))
    args.inflight = QUICK["inflight"] if args.quick else tuple(map(int, args.inflight.split(",")))
    args.steps = QUICK["steps"] if args.quick else args.steps
    args.out = args.out / "quick" if args.quick else args.out
    return args


def reference_setting(text: str) -> Setting:
    """`--reference PRESET@M`."""
    preset, _, inflight = text.partition("@")
    if not preset or not inflight.isdigit():
        raise argparse.ArgumentTypeError(f"{text!r} is not PRESET@M (e.g. per-episode@64)")
    return preset, int(inflight)


def main(argv: Sequence[str] | None = None) -> None:
    args = parse(argv)
    out: Path = args.out
    out.mkdir(parents=True, exist_ok=True)
    grid: list[Setting] = list(itertools.product(args.presets, args.inflight))
    rows_path = out / "predict_rows.jsonl"
    if args.from_rows:
        live, predicted = read_rows(rows_path)
    else:
        check_engine(out, args.engine)
        try:
            logs = run_probes(out, grid, args)
        except VLLMStartError as error:  # no vLLM environment, or a server that did not start
            first = str(error).splitlines()[0].rstrip(":")
            where = "" if isinstance(error, VLLMUnavailable) else f" (its output: {out}/vllm)"
            print(f"predict.py: error: {first}{where}", file=sys.stderr)
            raise SystemExit(2) from None
        live, predicted = run_grid(logs, grid, args.targets, rows_path)
    summary = summarize(live, predicted, args.presets, args.inflight)
    print_summary(summary, live)
    repeat = read_rows(args.floor / "predict_rows.jsonl")[0] if args.floor else None
    if repeat is not None:
        summary["floor"] = floor(live, repeat, args.presets, args.inflight)
        print_floor(summary["floor"])
    speed = machine_speed(out)
    if speed:
        summary["machine_speed"] = speed
        print_speed(speed)
    (out / "predict.json").write_text(json.dumps(summary, indent=1) + "\n")


def check_engine(out: Path, engine: str) -> None:
    """Refuse to mix engines in one folder: a probe's report there is reused as this
    engine's. A folder of reports and no mark holds the twin's (before `--engine`)."""
    mark = out / "engine"
    if mark.exists():
        recorded = mark.read_text(encoding="utf-8").strip()
    else:
        recorded = "twin" if any(out.glob("*-mi*.json")) else engine
    if recorded != engine:
        print(f"predict.py: error: {out} holds probes of --engine {recorded}, not {engine}; "
              "name another --out", file=sys.stderr)  # fmt: skip
        raise SystemExit(2)
    mark.write_text(engine + "\n", encoding="utf-8")


def run_probes(out: Path, grid: Sequence[Setting], args: argparse.Namespace) -> dict[Setting, Path]:
    """Every probe's log, on the command's engine (vLLM's servers up only while probes run,
    and not started where every probe's report is reused)."""
    sequence = probe_sequence(grid, args.reference)
    missing = [name for name, _ in sequence if not (out / f"{name}.json").exists()]
    with probe_servers(args.engine, out, needed=bool(missing)) as urls:
        logs = {
            name: probe_log(out, setting, args.steps, args.seed, urls, name)
            for name, setting in sequence
        }
    return {setting: logs[probe_name(setting)] for setting in grid}


@contextlib.contextmanager
def probe_servers(engine: str, out: Path, *, needed: bool) -> Iterator[list[str]]:
    """The urls the probes run against: none for the twin (each probe starts its own CPU
    servers); else `vllm serve` processes started for the command and stopped, whole
    process groups, when it ends, on an error, Ctrl-C or SIGTERM too."""
    if engine == "twin" or not needed:
        yield []
        return
    command = cpu_command()  # VLLMUnavailable (a VLLMStartError) if there is no environment
    _, settings = build_settings({}, seed=0)  # the probes' servers, as the twin's count
    folder = out / "vllm"
    folder.mkdir(exist_ok=True)
    print(f"starting {settings.servers} vllm serve: {' '.join(command)}; output in {folder}",
          file=sys.stderr, flush=True)  # fmt: skip
    began = time.monotonic()
    previous = signal.signal(signal.SIGTERM, _exit_on_signal)
    try:
        with vllm_from_v0(command, settings, folder, START_TIMEOUT_S) as servers:
            urls = [server.url for server in servers]
            print(f"vllm serve healthy after {time.monotonic() - began:.0f} s: {' '.join(urls)}",
                  file=sys.stderr, flush=True)  # fmt: skip
            yield urls
            print("stopping vllm serve", file=sys.stderr, flush=True)
    finally:
        signal.signal(signal.SIGTERM, previous)


def _exit_on_signal(number: int, _frame: object) -> None:
    """SIGTERM as an exit: the `with` blocks stop the servers (Ctrl-C does so already)."""
    raise SystemExit(128 + number)


def run_grid(
    logs: dict[Setting, Path], grid: list[Setting], which: str, rows_path: Path
) -> tuple[dict[Setting, dict[str, float]], dict[Setting, dict[Setting, dict[str, Any]]]]:
    """Each probe's what-ifs, each source's rows appended to `rows_path` as they come (a run
    cut short keeps what it did: `--from-rows`)."""
    live = {}
    for setting, log in logs.items():
        _, recorded, _ = fit_recorded(log, 0)
        live[setting] = figures(recorded, log)
    rows_path.write_text("")
    predicted = {}
    for setting, log in logs.items():
        print(f"what-if from {probe_name(setting)}", file=sys.stderr, flush=True)
        predicted[setting] = predict(log, targets(grid, setting, which), 0)
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
