"""The policy presets measured: every preset on several scenarios and seeds.

For each scenario and preset, prints the mean over seeds (and the range) of the figures
that decide between them: finished rollouts discarded, wasted rollout hours, trained
episodes per virtual hour, trainer idle fraction, mean trained age, and the two selection
bias ratios. Then checks the acceptance rule of the policy issue on each scenario: the best
preset discards at most a quarter of what `per-episode` discards, at no lower throughput.
Figures only: nothing here asserts.

    .venv/bin/python benchmarks/policies.py [--seeds 5] [--steps 200] [--markdown]
"""

from __future__ import annotations

import argparse
import statistics
import time
from typing import Any

from rolloutlog.runs.simulate import run_policy
from rolloutlog.runtime.sim.scenario import load_scenario

SCENARIOS = ("default", "tight", "loose")
PRESETS = (
    "per-group",
    "per-episode",
    "per-episode+capacity",
    "per-episode+straggler",
    "per-episode+oldest-first",
    "per-episode+straggler+oldest-first",
    "all",
)
COLUMNS = (
    ("finished_rollouts_discarded", "discarded", "{:,.0f}"),
    ("rollout_seconds_wasted", "wasted h", "{:,.1f}"),
    ("trained_episodes_per_hour", "trained/h", "{:,.0f}"),
    ("trainer_idle_fraction", "idle", "{:.1%}"),
    ("mean_trained_age", "mean age", "{:.2f}"),
    ("trained_length_ratio", "length ratio", "{:.3f}"),
    ("trained_difficulty_ratio", "difficulty ratio", "{:.3f}"),
)


def measure(scenario: str, preset: str, seeds: int, steps: int) -> dict[str, list[float]]:
    """Each column's value per seed."""
    values: dict[str, list[float]] = {key: [] for key, _, _ in COLUMNS}
    for seed in range(seeds):
        world = load_scenario(scenario).with_steps(steps).with_seed(seed).with_policy(preset)
        report, _ = run_policy(world, check=True)
        if report["invariant_violations"]:
            raise RuntimeError(
                f"{scenario}/{preset}/seed {seed}: {report['invariant_violations'][0]}"
            )
        for key, _, _ in COLUMNS:
            scale = 3600.0 if key == "rollout_seconds_wasted" else 1.0
            values[key].append(float(report[key] or 0.0) / scale)
    return values


def _cell(values: list[float], fmt: str) -> str:
    mean = statistics.fmean(values)
    if len(values) == 1 or min(values) == max(values):
        return fmt.format(mean)
    return f"{fmt.format(mean)} ({fmt.format(min(values))}–{fmt.format(max(values))})"


def print_table(scenario: str, rows: dict[str, dict[str, list[float]]], markdown: bool) -> None:
    header = ["preset", *(label for _, label, _ in COLUMNS)]
    lines = [
        [preset, *(_cell(v[key], fmt) for key, _, fmt in COLUMNS)] for preset, v in rows.items()
    ]
    print(f"\n### {scenario}\n")
    if markdown:
        print("| " + " | ".join(header) + " |")
        print("|" + "---|" * len(header))
        for line in lines:
            print("| " + " | ".join(line) + " |")
        return
    widths = [max(len(row[i]) for row in [header, *lines]) for i in range(len(header))]
    for row in [header, *lines]:
        print("  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)))


def acceptance(rows: dict[str, dict[str, list[float]]]) -> str:
    """The acceptance rule, on means over seeds: among the presets that train at least as
    many episodes per hour as `per-episode`, the one that discards least, against it."""
    mean = {p: {k: statistics.fmean(v) for k, v in cols.items()} for p, cols in rows.items()}
    base = mean["per-episode"]
    rivals = [p for p in mean if p not in ("per-episode", "per-group")]
    keeping_pace = [
        p
        for p in rivals
        if mean[p]["trained_episodes_per_hour"] >= base["trained_episodes_per_hour"]
    ]
    best = min(keeping_pace or rivals, key=lambda p: mean[p]["finished_rollouts_discarded"])
    discarded = mean[best]["finished_rollouts_discarded"] / max(
        1.0, base["finished_rollouts_discarded"]
    )
    throughput = mean[best]["trained_episodes_per_hour"] / base["trained_episodes_per_hour"]
    verdict = "meets" if discarded <= 0.25 and throughput >= 1.0 else "does not meet"
    return (
        f"best preset {best!r}: discards {discarded:.1%} of per-episode's, "
        f"trained/h {throughput:.3f}x per-episode's -> {verdict} the rule "
        "(<= 25% of the discards at >= 1.0x throughput)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--scenarios", default=",".join(SCENARIOS))
    parser.add_argument("--markdown", action="store_true")
    args = parser.parse_args()
    start = time.perf_counter()
    verdicts: dict[str, str] = {}
    for scenario in args.scenarios.split(","):
        rows: dict[str, Any] = {
            preset: measure(scenario, preset, args.seeds, args.steps) for preset in PRESETS
        }
        print_table(scenario, rows, args.markdown)
        verdicts[scenario] = acceptance(rows)
        print(f"\n{scenario}: {verdicts[scenario]}")
    print(
        f"\n{args.seeds} seeds x {args.steps} steps per cell; {time.perf_counter() - start:.0f} s"
    )


if __name__ == "__main__":
    main()
