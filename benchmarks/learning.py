"""The learning study: which staleness preset reaches a reward soonest, task by task?

Fewer discarded rollouts is a proxy; this runs `rolloutlog train` (in process: exactly
what the command runs, log written and replayed) under each preset of `--presets`, over
`--seeds`, for the same `--steps`, in each settings set of `--settings`, and reports per
preset: wall seconds until the mean reward of the last 10 batches first reaches 0.5 and
0.8 (median and min-max over seeds; a run that never gets there ranks after those that
do, by its final reward), the final reward (last 10 batches), trained completion tokens
per second, finished rollouts discarded, the trained-age histogram, and per task
difficulty (`live.hard_task_share`) the share of trained episodes against the share
dispatched and the reward of the last 10 batches. `rolloutlog whatif` then ranks the
same presets on each live log, and the study reports the Spearman rank correlation
between that ranking (by trained episodes per hour) and the learner's (by time to 0.8).

Resumable: each finished run is appended to `--table` (JSON lines, one row per run) and a
run already there is not run again, so a study may be run in parts (a preset, a seed at a
time); the table is what the report reads, and says which runs it holds.

Run: `python benchmarks/learning.py [--presets per-group,per-episode,all] [--compare P,Q]
[--seeds 0 1 2] [--steps 60] [--settings default,contended,long,hard,study] [--table FILE]
[--plot FILE] [--set KEY=VALUE] [--backend twin|vllm] [--report-only]`. Progress goes to stderr.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import json
import os
import resource
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, Final

from learning_report import WINDOW, Row, final_reward, label, plot, report

from rolloutlog.core.config import ConfigError, parse_overrides
from rolloutlog.core.presets import preset_overrides
from rolloutlog.events.types import BatchShipped, EpisodeCompleted, GroupOpened
from rolloutlog.replay.source import open_log
from rolloutlog.runs.train import run_training
from rolloutlog.runtime.live.digits import task_from_id
from rolloutlog.runtime.live.reports import StepStats
from rolloutlog.runtime.live.session import save_initial
from rolloutlog.runtime.live.settings import build_settings
from rolloutlog.runtime.live.vllm_launch import VLLMProcess, vllm_servers

REPO: Final = Path(__file__).resolve().parents[1]
TABLE: Final = REPO / "benchmarks" / "learning_runs.jsonl"
CPU_LAUNCHER: Final = f"{REPO}/.venv-vllm/bin/python {REPO}/scripts/vllm_cpu.py"
DEFAULT_PRESETS: Final = (
    "per-group", "per-episode", "all", "prime-rl", "prime-rl-withhold", "areal", "tinker",
    "tinker-822", "per-episode+interrupt",
)  # fmt: skip
# beside the defaults: members of a group start at different versions only when the
# permits bind (large groups) or generations outlast a train step
SETTINGS_SETS: Final[dict[str, tuple[str, ...]]] = {
    "default": (),
    "contended": ("group_size=32", "max_inflight=64"),
    "long": ("server_min_step_s=0.01",),
    "hard": ("hard_task_share=0.2",),
    # the study's budget: about a minute a run on a shared 2-core machine; batches of 64
    # at lr 1e-3 learn the most per wall second of the pilots (RESULTS.md § learning.py)
    "study": ("hard_task_share=0.2", "batch_size=64", "learning_rate=1e-3"),
}


class StudyError(ValueError):
    """A bad option: one line naming it."""


# ---- running ---------------------------------------------------------------------------
def check_presets(names: Sequence[str], option: str = "--presets") -> list[str]:
    """The presets, each known to `core.presets`; a missing one is refused by name."""
    for name in names:
        try:
            preset_overrides(name)
        except ConfigError as error:
            raise StudyError(f"{option}: {error} (not a preset of this tree)") from error
    if len(set(names)) != len(names) or not names:
        raise StudyError(f"{option} {','.join(names)}: name each preset once")
    return list(names)


def check_settings(names: Sequence[str]) -> None:
    unknown = [name for name in names if name not in SETTINGS_SETS]
    if unknown:
        raise StudyError(f"--settings {unknown[0]}: known sets: {', '.join(SETTINGS_SETS)}")


def reported(
    rows: Sequence[Row], settings: Sequence[str], seeds: Sequence[int], extra: Sequence[str]
) -> list[Row]:
    """The rows of a command's settings sets and seeds whose `--set` items begin with the
    command's: older runs of other settings stay in the table but out of its report, and
    runs with more items (a correction beside the study) are reported as sets of their own."""

    def of_command(row: Row) -> bool:
        if row["settings"] not in settings or row["seed"] not in seeds:
            return False
        base = [*SETTINGS_SETS[row["settings"]], *extra]
        return bool(row["overrides"][: len(base)] == base)

    return [row for row in rows if of_command(row)]


def run_key(row: Row) -> tuple[str, str, str, int, int]:
    """What makes a run: its settings (the set's and `--set`'s), preset, seed and length."""
    return row["settings"], label(row), row["preset"], row["seed"], row["steps"]


def load_table(path: Path) -> list[Row]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def study(
    *,
    presets: Sequence[str],
    seeds: Sequence[int],
    steps: int,
    settings: Sequence[str],
    table: Path,
    extra: Sequence[str] = (),
    compare: Sequence[str] = (),
    runner: Callable[..., Row] | None = None,
    progress: Callable[[str], None] = lambda line: print(line, file=sys.stderr, flush=True),
) -> int:
    """Run every (settings, preset, seed) the table lacks, appending each row; how many ran.
    `whatif` ranks `compare` on each log (default `presets`): a study run a preset at a
    time names all of its presets there, so that every log ranks the same ones."""
    check_presets(presets)
    compare = check_presets(compare, "--compare") if compare else list(presets)
    check_settings(settings)
    done = {run_key(row) for row in load_table(table)}
    todo = [
        (name, preset, seed)
        for name in settings
        for preset in presets
        for seed in seeds
        if run_key(_planned(name, preset, seed, steps, extra)) not in done
    ]
    progress(f"learning: {len(done)} runs in {table}, {len(todo)} to run")
    table.parent.mkdir(parents=True, exist_ok=True)
    run = runner or run_one
    for index, (name, preset, seed) in enumerate(todo, 1):
        started = time.monotonic()
        progress(f"[{index}/{len(todo)}] {name} {preset} seed {seed}: {steps} batches ...")
        row = run(name, preset, seed, steps, [*SETTINGS_SETS[name], *extra], compare)
        with table.open("a") as out:
            out.write(json.dumps(row) + "\n")
        progress(
            f"[{index}/{len(todo)}] {name} {preset} seed {seed}: final reward "
            f"{final_reward(row):.3f} in {time.monotonic() - started:.0f} s"
        )
    return len(todo)


def _planned(name: str, preset: str, seed: int, steps: int, extra: Sequence[str]) -> Row:
    overrides = [*SETTINGS_SETS[name], *extra]
    return {
        "settings": name,
        "preset": preset,
        "seed": seed,
        "steps": steps,
        "overrides": overrides,
    }


def preset_sets(preset: str) -> list[str]:
    """`--set` items of a preset (TOML values: `true`, not `True`; a key left at `None`, which
    `--set` cannot say, is left out: its default)."""
    return [
        f"{key}={str(value).lower() if isinstance(value, bool) else value}"
        for key, value in preset_overrides(preset).items()
        if value is not None
    ]


def run_one(
    settings_name: str,
    preset: str,
    seed: int,
    steps: int,
    overrides: Sequence[str],
    compare: Sequence[str],
    servers: Sequence[VLLMProcess] = (),
) -> Row:
    """One `rolloutlog train` run and `rolloutlog whatif` on its log: one table row."""

    def on_step(stats: StepStats) -> None:  # progress every 10 batches, on stderr
        if stats.step % WINDOW == 0:
            reward = "n/a" if stats.mean_reward is None else f"{stats.mean_reward:.3f}"
            print(f"  batch {stats.step}/{steps}: reward {reward} at {stats.wall_s:.0f} s",
                  file=sys.stderr, flush=True)  # fmt: skip

    items = [*overrides, *preset_sets(preset)]
    config, live = build_settings(parse_overrides(items), seed=seed)
    with tempfile.TemporaryDirectory(prefix="learning-") as scratch:
        log = Path(scratch) / "train.arrow"
        before = _cpu_s(servers)
        report = run_training(
            config, live, steps=steps, seed=seed, log_path=log,
            urls=tuple(s.url for s in servers), on_step=on_step,
            weights_dir=Path(scratch) / "weights" if servers else None,
        )  # fmt: skip
        cpu_s = round(_cpu_s(servers) - before, 1)
        figures = log_figures(log, live.hard_task_share)
        whatif = _whatif(log, compare)
    return {
        "settings": settings_name,
        "preset": preset,
        "seed": seed,
        "steps": steps,
        "overrides": list(overrides),
        "ok": report["finished_reason"] == "steps" and report["replay_error"] is None,
        "curve": [r if r is not None else 0.0 for r in report["reward_curve"]],
        "wall_s": round(report["wall_seconds"], 1),
        "cpu_s": cpu_s,
        "episodes_trained": report["episodes_trained"],
        "trained_ages": report["trained_age_histogram"],
        "discarded": whatif["recorded"]["finished_rollouts_discarded"],
        "whatif": {
            name: result["trained_episodes_per_hour"] for name, result in whatif["policies"].items()
        },
        **figures,
    }


def log_figures(log: Path, hard_share: float) -> Row:
    """What the report lacks, read from the log: when each batch shipped, the trained
    tokens, and per difficulty the episodes dispatched and trained and the late reward."""
    difficulty: dict[str, str] = {}  # group id -> easy / hard
    completed: dict[str, tuple[float, int]] = {}
    batches: list[BatchShipped] = []
    dispatched: Counter[str] = Counter()
    for event in open_log(log).events():
        if isinstance(event, GroupOpened) and event.work == "train":
            difficulty[event.group_id] = task_from_id(event.task_id, hard_share).difficulty
            dispatched[difficulty[event.group_id]] += event.group_size
        elif isinstance(event, EpisodeCompleted):
            completed[event.episode_id] = (event.reward, event.completion_tokens)
        elif isinstance(event, BatchShipped):
            batches.append(event)

    def of(episode_id: str) -> str:
        return difficulty[episode_id.rpartition("/")[0]]

    trained = [e for batch in batches for e in batch.trained_ids]
    late = [e for batch in batches[-WINDOW:] for e in batch.episode_ids]
    by_difficulty = {}
    for name in sorted(set(difficulty.values())):
        rewards = [completed[e][0] for e in late if of(e) == name]
        by_difficulty[name] = {
            "dispatched": dispatched[name],
            "trained": sum(1 for e in trained if of(e) == name),
            "reward": round(statistics.fmean(rewards), 4) if rewards else None,
        }
    return {
        "batch_t": [round(batch.t, 2) for batch in batches],
        "trained_tokens": sum(completed[e][1] for e in trained),
        "by_difficulty": by_difficulty,
    }


def _whatif(log: Path, compare: Sequence[str]) -> dict[str, Any]:
    command = [
        sys.executable, "-c", "from rolloutlog.cli.main import main; main()",
        "whatif", str(log), "--compare", ",".join(compare), "--json",
    ]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"whatif {log}: {done.stderr.strip()}")
    result: dict[str, Any] = json.loads(done.stdout)
    return result


def _group_cpu_s(groups: Sequence[int]) -> float:
    """CPU seconds of every live process in these process groups (Linux /proc)."""
    total, ticks = 0, os.sysconf("SC_CLK_TCK")
    for stat in Path("/proc").glob("[0-9]*/stat"):
        with contextlib.suppress(OSError, ValueError, IndexError):
            fields = stat.read_text().rsplit(")", 1)[1].split()
            if int(fields[2]) in groups:  # pgrp; utime and stime follow at 11 and 12
                total += int(fields[11]) + int(fields[12])
    return total / ticks


def _cpu_s(servers: Sequence[VLLMProcess]) -> float:
    """CPU seconds of this process and its servers (children that exit, or vLLM's)."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    if servers:  # long-lived vLLM servers: not children that exit with the run
        serving = _group_cpu_s([s.process.pid for s in servers])
    else:
        serving = children.ru_utime + children.ru_stime
    return own.ru_utime + own.ru_stime + serving


@contextlib.contextmanager
def _backend(backend: str, command: str, extra: list[str], root: Path) -> Iterator[list[Any]]:
    """No servers for the twin (each run starts its own); started vLLM servers otherwise."""
    if backend == "twin":
        yield []
        return
    _, settings = build_settings(parse_overrides(extra), seed=0)
    initial = save_initial(settings, 0, root / "initial")
    with vllm_servers(shlex.split(command), initial, settings.servers, log_dir=root) as servers:
        yield servers


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--presets", default=",".join(DEFAULT_PRESETS))
    parser.add_argument("--compare", default="", help="whatif's presets (default: --presets)")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--steps", type=int, default=60)
    parser.add_argument("--settings", default="default", help=",".join(SETTINGS_SETS))
    parser.add_argument("--table", type=Path, default=TABLE)
    parser.add_argument("--plot", type=Path, help="draw reward against wall seconds here")
    parser.add_argument("--set", dest="extra", action="append", default=[])
    parser.add_argument("--backend", choices=["twin", "vllm"], default="twin")
    parser.add_argument("--vllm-command", default=CPU_LAUNCHER, help="vLLM's command line")
    parser.add_argument("--report-only", action="store_true", help="run nothing new")
    args = parser.parse_args(argv)
    presets = [p.strip() for p in args.presets.split(",") if p.strip()]
    settings = [s.strip() for s in args.settings.split(",")]
    compare = [p.strip() for p in args.compare.split(",") if p.strip()]
    try:
        check_presets(presets)
        check_settings(settings)
        if compare:
            check_presets(compare, "--compare")
        if not args.report_only:
            with (
                tempfile.TemporaryDirectory() as scratch,
                _backend(args.backend, args.vllm_command, args.extra, Path(scratch)) as servers,
            ):
                study(
                    presets=presets,
                    seeds=args.seeds,
                    steps=args.steps,
                    settings=settings,
                    table=args.table,
                    extra=args.extra,
                    compare=compare,
                    runner=functools.partial(run_one, servers=servers),
                )
    except (StudyError, ConfigError) as error:
        print(f"learning.py: error: {error}", file=sys.stderr)
        raise SystemExit(2) from None
    table = reported(load_table(args.table), settings, args.seeds, args.extra)
    rows = [r for r in table if r["preset"] in presets]
    print(report(rows, args.steps))
    if args.plot:
        plot(rows, args.steps, args.plot)


if __name__ == "__main__":
    main()
