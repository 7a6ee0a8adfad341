"""The policy presets measured: the field's set and rolloutlog's own, on several scenarios
and seeds.

For each scenario, every preset runs on the same seeded worlds (the invariant checker on
every event; a violation stops the benchmark), and prints as one markdown table, one row
per preset, ready to paste into benchmarks/RESULTS.md or docs/policies.md: each figure the
mean over seeds (`max age` the largest), the two that trade against each other (trained
per hour, finished rollouts discarded) with their range over seeds, and the figures only
some rules have (ages past the bound, ship waits, requeued groups, withheld and evicted
episodes). Then whether rolloutlog's own rules meet the acceptance rule of the policy
issue (its best preset discards at most a quarter of what `per-episode` discards, at no
lower throughput); field presets are measured, never held to it. Progress goes to stderr,
one line per preset and scenario. Figures only: nothing here asserts.

    .venv/bin/python benchmarks/policies.py [--seeds 5] [--steps 200] [--scenarios A,B,...]
        [--presets P1,P2,...]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from rolloutlog.cli.output import duration, per_unit, rate_unit
from rolloutlog.core.presets import NAMED, field_set, parse_policy_list
from rolloutlog.events.log_reader import read_log
from rolloutlog.events.types import Event
from rolloutlog.runs.simulate import run_policy
from rolloutlog.runtime.sim.scenario import Scenario, load_scenario

SCENARIOS = ("default", "tight", "loose")
ADDING_RULES = [p for p in NAMED if p not in ("per-group", "per-episode")]  # held to the rule
Runs = Mapping[str, Sequence[Mapping[str, Any]]]  # preset -> each seed's report
FromLog = Callable[[Scenario, Sequence[Event]], dict[str, Any]]  # figures read off a run's log


def presets() -> list[str]:
    """The field's set (`field`), then rolloutlog's named presets it does not hold."""
    return list(dict.fromkeys([*field_set(), *NAMED]))


def measure(
    scenario: str, preset: str, seeds: int, steps: int, *, from_log: FromLog | None = None
) -> list[dict[str, Any]]:
    """The `simulate --json` object of each seed's run; with `from_log`, the figures it
    reads from the run's log (written to a temporary file) added."""
    reports = []
    for seed in range(seeds):
        world = load_scenario(scenario).with_steps(steps).with_seed(seed).with_policy(preset)
        report = run_policy(world, check=True)[0] if from_log is None else _read(world, from_log)
        if report["invariant_violations"]:
            raise RuntimeError(
                f"{scenario}/{preset}/seed {seed}: {report['invariant_violations'][0]}"
            )
        reports.append(report)
    return reports


class Progress:
    """One stderr line per row measured: `[done/total] scenario row: seeds in T (elapsed)`."""

    def __init__(self, total: int) -> None:
        self.total, self.done, self.start = total, 0, time.perf_counter()

    def row(self, scenario: str, name: str, seeds: int, began: float) -> None:
        self.done, now = self.done + 1, time.perf_counter()
        print(
            f"[{self.done}/{self.total}] {scenario} {name}: {seeds} seeds in "
            f"{duration(now - began)} (elapsed {duration(now - self.start)})",
            file=sys.stderr,
            flush=True,
        )


def measure_rows(
    scenario: str,
    rows: Mapping[str, str],
    seeds: int,
    steps: int,
    progress: Progress,
    *,
    from_log: FromLog | None = None,
) -> dict[str, list[dict[str, Any]]]:
    """Each row's (name -> preset) seeds' reports on `scenario`, a progress line each."""
    runs = {}
    for name, preset in rows.items():
        began = time.perf_counter()
        runs[name] = measure(scenario, preset, seeds, steps, from_log=from_log)
        progress.row(scenario, name, seeds, began)
    return runs


def _read(world: Scenario, from_log: FromLog) -> dict[str, Any]:
    """A run's report with the figures `from_log` reads off its log."""
    with tempfile.TemporaryDirectory() as folder:
        log = Path(folder) / "run.arrow"
        report, _ = run_policy(world, log_path=log, check=True)
        return {**report, "log": None, **from_log(world, read_log(log))}


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


def _count(key: str) -> Callable[[Mapping[str, Any]], str]:
    """A mean count; `–` where the preset has no such figure (the rule is not in it)."""
    return lambda run: "–" if run.get(key) is None else f"{run[key]:,.0f}"


def _share(
    part: Callable[[Mapping[str, Any]], float], whole: str
) -> Callable[[Mapping[str, Any]], str]:
    """`part` as a share of the figure `whole`; `–` where `whole` is 0."""
    return lambda run: f"{100.0 * part(run) / run[whole]:.1f}%" if run[whole] else "–"


def _waits(run: Mapping[str, Any]) -> str:
    if run.get("ship_waits") is None:
        return "–"
    return f"{run['ship_waits']:,.0f} ({duration(run['ship_wait_seconds'])})"


# After trained/h and discarded (ranged over seeds): (header, figure of the mean report).
COLUMNS: tuple[tuple[str, Callable[[Mapping[str, Any]], str]], ...] = (
    ("wasted", _share(lambda run: run["rollout_seconds_wasted"], "rollout_seconds_total")),
    ("idle", lambda run: f"{100.0 * run['trainer_idle_fraction']:.1f}%"),
    ("mean age", lambda run: f"{run['mean_trained_age']:.2f}"),
    ("max age", _count("max_trained_age")),
    ("past bound", _share(lambda run: run["episodes_trained_past_bound"], "episodes_trained")),
    ("ship waits", _waits),
    ("requeued", _count("groups_requeued")),
    ("withheld", _count("episodes_withheld")),
    ("evicted", _count("episodes_evicted")),
    ("length ratio", lambda run: f"{run['trained_length_ratio']:.3f}"),
    ("difficulty ratio", lambda run: f"{run['trained_difficulty_ratio']:.3f}"),
)


def ranged(reports: Sequence[Mapping[str, Any]], key: str, show: Callable[[float], str]) -> str:
    """The mean over seeds, then the lowest and highest: `4,123 (4,092–4,169)`."""
    values = [float(r[key]) for r in reports]
    return f"{show(statistics.fmean(values))} ({show(min(values))}–{show(max(values))})"


def markdown_table(runs: Runs) -> list[str]:
    """One row per preset: trained/h and discarded as mean (range over seeds), every
    other figure of `COLUMNS` on the mean report (`over_seeds`)."""
    unit = rate_unit(r["virtual_seconds"] for reports in runs.values() for r in reports)
    headers = ["policy", f"trained / {unit[0]}", "discarded", *(label for label, _ in COLUMNS)]
    lines = ["| " + " | ".join(headers) + " |", "|---" * len(headers) + "|"]
    for name, reports in runs.items():
        merged = over_seeds(reports)
        cells = [
            f"`{name}`",
            ranged(reports, "trained_episodes_per_hour", lambda v: per_unit(v, unit)),
            ranged(reports, "finished_rollouts_discarded", "{:,.0f}".format),
            *(show(merged) for _, show in COLUMNS),
        ]
        lines.append("| " + " | ".join(cells) + " |")
    return lines


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
    scenarios = args.scenarios.split(",")
    start = time.perf_counter()
    progress = Progress(len(chosen) * len(scenarios))
    for scenario in scenarios:
        rows = {preset: preset for preset in chosen}
        runs = measure_rows(scenario, rows, args.seeds, args.steps, progress)
        bound = load_scenario(scenario).run.max_off_policy_steps
        print(
            f"**{scenario}** (`max_off_policy_steps = {bound}`): mean of {args.seeds} seeds "
            f"x {args.steps} steps (range over seeds in brackets)\n"
        )
        print("\n".join(markdown_table(runs)))
        merged = {name: over_seeds(reports) for name, reports in runs.items()}
        if "per-episode" in merged and any(p in merged for p in ADDING_RULES):
            print(f"\n{scenario}: {acceptance(merged)}")
        print()
    print(
        f"{len(chosen)} presets x {args.seeds} seeds x {args.steps} steps per scenario, "
        f"{len(scenarios)} scenarios; {time.perf_counter() - start:.0f} s"
    )


if __name__ == "__main__":
    main()
