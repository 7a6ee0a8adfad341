"""The policy presets measured: the field's set and rolloutlog's own, on several scenarios
and seeds.

For each scenario, every preset runs on the same seeded worlds (the invariant checker on
every event; a violation stops the benchmark), and the figures that tell the presets apart
print as `simulate --compare`'s turned table (`rolloutlog.cli.sim_report`: one row per
preset, 80 columns), each figure the mean over seeds (`max age` the largest), then the
range over seeds of the two that trade against each other, then whether rolloutlog's own
rules meet the acceptance rule of the policy issue (its best preset discards at most a
quarter of what `per-episode` discards, at no lower throughput); field presets are
measured, never held to it. Figures only: nothing here asserts.

    .venv/bin/python benchmarks/policies.py [--seeds 5] [--steps 200] [--scenarios A,B,...]
        [--presets P1,P2,...]
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from rich import box
from rich.console import Console
from rich.table import Table

from rolloutlog.cli.output import per_unit, rate_unit
from rolloutlog.cli.sim_report import turned_tables
from rolloutlog.core.presets import NAMED, field_set, parse_policy_list
from rolloutlog.runs.simulate import run_policy
from rolloutlog.runtime.sim.scenario import load_scenario

SCENARIOS = ("default", "tight", "loose")
ADDING_RULES = [p for p in NAMED if p not in ("per-group", "per-episode")]  # held to the rule
RANGED = ("trained_episodes_per_hour", "finished_rollouts_discarded")


def presets() -> list[str]:
    """The field's set (`field`), then rolloutlog's named presets it does not hold."""
    return list(dict.fromkeys([*field_set(), *NAMED]))


def measure(scenario: str, preset: str, seeds: int, steps: int) -> list[dict[str, Any]]:
    """The `simulate --json` object of each seed's run."""
    reports = []
    for seed in range(seeds):
        world = load_scenario(scenario).with_steps(steps).with_seed(seed).with_policy(preset)
        report, _ = run_policy(world, check=True)
        if report["invariant_violations"]:
            raise RuntimeError(
                f"{scenario}/{preset}/seed {seed}: {report['invariant_violations'][0]}"
            )
        reports.append(report)
    return reports


def over_seeds(reports: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """One report of the seeds' runs: each number the mean (a `max_` figure the largest),
    a figure missing from any run missing."""
    merged: dict[str, Any] = {}
    for key in reports[0]:
        values = [report.get(key) for report in reports]
        numbers = [v for v in values if isinstance(v, int | float) and not isinstance(v, bool)]
        if len(numbers) == len(values):
            merged[key] = max(numbers) if key.startswith("max_") else statistics.fmean(numbers)
    return merged


def ranges(runs: Mapping[str, Sequence[Mapping[str, Any]]]) -> Table:
    """The lowest and highest over seeds of the figures that trade against each other."""
    unit = rate_unit(r["virtual_seconds"] for reports in runs.values() for r in reports)
    shows: tuple[Callable[[float], str], ...] = (lambda v: per_unit(v, unit), "{:,.0f}".format)
    table = Table(title="range over seeds", title_justify="left", box=box.SIMPLE_HEAD)
    table.add_column("policy", overflow="fold")
    for label in (f"trained / {unit[0]}", "discarded"):
        table.add_column(label, justify="right")
    for name, reports in runs.items():
        cells = []
        for key, show in zip(RANGED, shows, strict=True):
            values = [float(r[key]) for r in reports if r.get(key) is not None]
            cells.append(f"{show(min(values))}–{show(max(values))}" if values else "–")
        table.add_row(name, *cells)
    return table


def acceptance(merged: Mapping[str, Mapping[str, Any]]) -> str:
    """The acceptance rule of rolloutlog's own rules (no field preset is held to it), on
    means over seeds: among its presets that add rules and train at least as many episodes
    per hour as `per-episode`, the one that discards least, against `per-episode`."""
    base = merged["per-episode"]
    rivals = [p for p in ADDING_RULES if p in merged]
    keeping_pace = [
        p
        for p in rivals
        if merged[p]["trained_episodes_per_hour"] >= base["trained_episodes_per_hour"]
    ]
    best = min(keeping_pace or rivals, key=lambda p: merged[p]["finished_rollouts_discarded"])
    discarded = merged[best]["finished_rollouts_discarded"] / max(
        1.0, base["finished_rollouts_discarded"]
    )
    throughput = merged[best]["trained_episodes_per_hour"] / base["trained_episodes_per_hour"]
    verdict = "meets" if discarded <= 0.25 and throughput >= 1.0 else "does not meet"
    return (
        f"rolloutlog's best preset {best!r}: discards {discarded:.1%} of per-episode's, "
        f"trained/h {throughput:.3f}x per-episode's -> {verdict} the rule "
        "(<= 25% of the discards at >= 1.0x throughput)"
    )


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--scenarios", default=",".join(SCENARIOS))
    parser.add_argument(
        "--presets", type=parse_policy_list, help="P1,P2,... (default: field, then the named)"
    )
    args = parser.parse_args(argv)
    chosen = args.presets or presets()
    console = Console(width=80)
    start = time.perf_counter()
    for scenario in args.scenarios.split(","):
        runs = {p: measure(scenario, p, args.seeds, args.steps) for p in chosen}
        bound = load_scenario(scenario).run.max_off_policy_steps
        title = (
            f"{scenario} (max_off_policy_steps = {bound}): mean of {args.seeds} seeds "
            f"x {args.steps} steps"
        )
        merged = {name: over_seeds(reports) for name, reports in runs.items()}
        for table in turned_tables(merged, title, console):
            console.print(table)
        console.print(ranges(runs))
        if "per-episode" in merged and any(p in merged for p in ADDING_RULES):
            console.print(f"{scenario}: {acceptance(merged)}")
        console.print()
    console.print(
        f"{len(chosen)} presets x {args.seeds} seeds x {args.steps} steps per scenario; "
        f"{time.perf_counter() - start:.0f} s"
    )


if __name__ == "__main__":
    main()
