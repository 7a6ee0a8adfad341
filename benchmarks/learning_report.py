"""The learning study's report: rankings, the what-if correlation, the table and the plot.

Pure functions of the table's rows (benchmarks/learning.py writes them), so that a study
run in parts is reported the same way as one run at once, and the tests can check the
rankings on hand-made rows.
"""

from __future__ import annotations

import math
import statistics
import textwrap
from collections import Counter
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any, Final

WINDOW: Final = 10  # batches in the moving mean that must reach a target
TARGETS: Final = (0.5, 0.8)
Row = dict[str, Any]


def label(row: Row) -> str:
    """A run's settings as its `--set` items (the set's, then the command's)."""
    return " ".join(row["overrides"]) or "live defaults"


def moving_mean(curve: Sequence[float]) -> list[float | None]:
    """The mean of the last WINDOW batches at each batch (None before WINDOW batches)."""
    return [
        statistics.fmean(curve[i - WINDOW + 1 : i + 1]) if i >= WINDOW - 1 else None
        for i in range(len(curve))
    ]


def seconds_to(row: Row, target: float) -> float:
    """Wall seconds until the moving mean first reached `target`; inf if it never did."""
    for mean, t in zip(moving_mean(row["curve"]), row["batch_t"], strict=False):
        if mean is not None and mean >= target:
            return float(t)
    return math.inf


def final_reward(row: Row) -> float:
    curve = row["curve"][-WINDOW:]
    return statistics.fmean(curve) if curve else 0.0


def run_order(rows: Iterable[Row], target: float = 0.8) -> list[Row]:
    """Runs best first: those that reach `target` by their time, then the rest by final
    reward."""
    return sorted(rows, key=lambda r: (seconds_to(r, target), -final_reward(r)))


def preset_order(rows: Sequence[Row], target: float = 0.8) -> list[str]:
    """Presets best first: median seconds to `target` over seeds (a seed that never gets
    there counts as infinite), ties (never, mostly) by median final reward."""
    by_preset = _by(rows, "preset")
    return sorted(
        by_preset,
        key=lambda p: (
            statistics.median(seconds_to(r, target) for r in by_preset[p]),
            -statistics.median(final_reward(r) for r in by_preset[p]),
        ),
    )


def whatif_order(rows: Sequence[Row]) -> list[str]:
    """Presets best first by what-if trained episodes per hour, median over the live logs."""
    presets = sorted({r["preset"] for r in rows})
    return sorted(presets, key=lambda p: -statistics.median(r["whatif"].get(p, 0.0) for r in rows))


def spearman(first: Sequence[str], second: Sequence[str]) -> float | None:
    """Spearman's rank correlation of two orderings of the same names (None under 2)."""
    if sorted(first) != sorted(second):
        raise ValueError(f"rankings of different presets: {first} and {second}")
    n = len(first)
    if n < 2:
        return None
    position = {name: index for index, name in enumerate(second)}
    squares = sum((index - position[name]) ** 2 for index, name in enumerate(first))
    return 1.0 - 6.0 * squares / (n * (n * n - 1))


def report(rows: Sequence[Row], steps: int) -> str:
    """The markdown report of the table's runs of `steps` batches, per settings set."""
    lines = []
    for label, group in _by_settings(rows, steps).items():
        common = min((r["batch_t"][-1] for r in group if r["batch_t"]), default=0.0)
        lines += [f"### {label}", ""]
        lines += [
            "| preset | seeds | s to 0.5 | s to 0.8 | final reward | "
            f"reward at {common:.0f} s | trained tok/s | "
            "discarded | trained ages | trained share (dispatched) by difficulty | "
            "late reward by difficulty | what-if eps/h |",
            "|---|---|---|---|---|---|---|---|---|---|---|---|",
        ]
        by_preset = _by(group, "preset")
        for preset in preset_order(group):
            lines.append(_preset_line(preset, by_preset[preset], group, common))
        learner, simulated = preset_order(group), whatif_order(group)
        rho = spearman(learner, simulated)
        lines += [
            "",
            f"Learner (time to 0.8): {', '.join(learner)}; what-if (trained episodes per "
            f"hour): {', '.join(simulated)}; Spearman {_number(rho, 2)}.",
            "",
        ]
    return "\n".join(lines)


def _preset_line(preset: str, runs: list[Row], group: list[Row], common: float) -> str:
    """One preset's row; its what-if figure is the median over every live log of `group`;
    `common` is the wall second every run of `group` reached, where rewards compare at
    equal wall time (the final reward compares them at equal batches)."""
    times = [_spread([seconds_to(r, target) for r in runs]) for target in TARGETS]
    ages: Counter[str] = Counter()
    for run in runs:
        ages.update(run["trained_ages"])
    total = sum(ages.values()) or 1
    histogram = " ".join(f"{age}:{ages[age] / total:.2f}" for age in sorted(ages, key=int))
    shares, rewards = [], []
    names = sorted({d for r in runs for d in r["by_difficulty"]})
    for name in names:
        trained = sum(r["by_difficulty"].get(name, {}).get("trained", 0) for r in runs)
        sent = sum(r["by_difficulty"].get(name, {}).get("dispatched", 0) for r in runs)
        all_trained = sum(d["trained"] for r in runs for d in r["by_difficulty"].values())
        all_sent = sum(d["dispatched"] for r in runs for d in r["by_difficulty"].values())
        shares.append(f"{name} {trained / (all_trained or 1):.2f} ({sent / (all_sent or 1):.2f})")
        late = [r["by_difficulty"].get(name, {}).get("reward") for r in runs]
        values = [v for v in late if v is not None]
        rewards.append(f"{name} {_number(statistics.fmean(values) if values else None, 2)}")
    per_s = [r["trained_tokens"] / r["batch_t"][-1] for r in runs if r["batch_t"]]
    whatif = statistics.median(r["whatif"].get(preset, 0.0) for r in group)
    return (
        f"| {preset} | {len(runs)} | {times[0]} | {times[1]} | "
        f"{statistics.median(final_reward(r) for r in runs):.3f} | "
        f"{statistics.median(_at(r, common) for r in runs):.3f} | "
        f"{statistics.median(per_s) if per_s else 0:.0f} | "
        f"{statistics.median(r['discarded'] for r in runs):.0f} | {histogram} | "
        f"{'; '.join(shares)} | {'; '.join(rewards)} | {whatif:,.0f} |"
    )


def _spread(values: list[float]) -> str:
    """`median (min-max)` of seconds; `never` where the median run never got there."""
    median = statistics.median(values)
    if math.isinf(median):
        return f"never ({sum(math.isfinite(v) for v in values)}/{len(values)} did)"
    return f"{median:.0f} ({min(values):.0f}-{_number(max(values), 0)})"


def _number(value: float | None, digits: int) -> str:
    if value is None:
        return "n/a"
    return "never" if math.isinf(value) else f"{value:.{digits}f}"


def _by_settings(rows: Iterable[Row], steps: int) -> dict[str, list[Row]]:
    """The runs of `steps` batches by settings set and `--set` items: `name (items)`."""
    groups: dict[str, list[Row]] = {}
    for row in rows:
        if row["steps"] == steps:
            groups.setdefault(f"{row['settings']} ({label(row)})", []).append(row)
    return groups


def _by(rows: Iterable[Row], key: str) -> dict[str, list[Row]]:
    groups: dict[str, list[Row]] = {}
    for row in rows:
        groups.setdefault(row[key], []).append(row)
    return groups


def plot(rows: Sequence[Row], steps: int, path: Path) -> None:
    """Moving-mean reward against wall seconds per preset: median and min-max over seeds."""
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot

    sets = _by_settings(rows, steps)
    figure, axes = pyplot.subplots(1, len(sets), figsize=(5 * len(sets), 4), squeeze=False)
    for axis, (name, group) in zip(axes[0], sets.items(), strict=True):
        for preset, runs in _by(group, "preset").items():
            end = min(r["batch_t"][-1] for r in runs)
            grid = [end * i / 100 for i in range(101)]
            curves = [[_at(r, t) for t in grid] for r in runs]
            middle = [statistics.median(c[i] for c in curves) for i in range(len(grid))]
            (line,) = axis.plot(grid, middle, label=preset)
            low = [min(c[i] for c in curves) for i in range(len(grid))]
            high = [max(c[i] for c in curves) for i in range(len(grid))]
            axis.fill_between(grid, low, high, color=line.get_color(), alpha=0.2)
        axis.set_title("\n".join(textwrap.wrap(name, 50)), fontsize=8)  # labels run long
        axis.set(xlabel="wall seconds", ylabel=f"reward ({WINDOW}-batch mean)")
        axis.legend(fontsize=7)
    figure.tight_layout()
    figure.savefig(path)


def _at(row: Row, t: float) -> float:
    """The moving-mean reward at wall second `t` (the first batch's reward before it)."""
    value = row["curve"][0] if row["curve"] else 0.0
    for batch_t, mean in zip(row["batch_t"], moving_mean(row["curve"]), strict=False):
        if batch_t > t:
            break
        value = mean if mean is not None else statistics.fmean(row["curve"][:WINDOW])
    return value


# ---- the staleness sweep: ranked by the held-out reward --------------------------------
def eval_final(row: Row, key: str = "greedy") -> float:
    """The held-out reward of the run's last evaluation (its last step)."""
    return float(row["eval"][-1][key])


def to_eval_target(row: Row, target: float) -> tuple[float, float]:
    """(batches, CPU seconds) until the held-out greedy reward first reached `target`,
    read at the evaluations (every `eval_every` batches); (inf, inf) if it never did."""
    for scored in row["eval"]:
        if scored["greedy"] >= target:
            step = scored["step"]
            cpu = row["batch_cpu_s"][step - 1] if step <= len(row["batch_cpu_s"]) else math.inf
            return float(step), float(cpu)
    return math.inf, math.inf


def mean_age(row: Row) -> float:
    ages = {int(age): count for age, count in row["trained_ages"].items()}
    return sum(age * count for age, count in ages.items()) / (sum(ages.values()) or 1)


def sweep_report(rows: Sequence[Row], steps: int, target: float) -> str:
    """One table of every run with held-out evaluations, per settings (the variant's
    items included) and preset, best first by median final held-out reward (greedy)."""
    scored = [r for r in rows if r["steps"] == steps and r.get("eval")]
    if not scored:
        return ""
    groups: dict[tuple[str, str], list[Row]] = {}
    for row in scored:
        groups.setdefault((f"{row['settings']} ({label(row)})", row["preset"]), []).append(row)
    order = sorted(groups, key=lambda key: -statistics.median(map(eval_final, groups[key])))
    lines = [
        f"### held-out reward ({steps} batches; target {target})",
        "",
        "| settings | preset | seeds | eval greedy | eval sampled | batches to target | "
        "CPU s to target | CPU s | train-batch reward | wall s | mean age | ratio ESS | "
        "clip fraction | KL(b‖θ) |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for key in order:
        lines.append(_sweep_line(*key, groups[key], target))
    return "\n".join(lines) + "\n"


def _sweep_line(settings: str, preset: str, runs: list[Row], target: float) -> str:
    reached = [to_eval_target(r, target) for r in runs]
    steps_diag = [d for r in runs for d in r["diagnostics"]]

    def diag(key: str) -> str:
        return _number(statistics.fmean(d[key] for d in steps_diag), 3) if steps_diag else "n/a"

    return (
        f"| {settings} | {preset} | {len(runs)} | "
        f"{_median_range([eval_final(r) for r in runs], 3)} | "
        f"{_median_range([eval_final(r, 'sampled') for r in runs], 3)} | "
        f"{_spread([b for b, _ in reached])} | {_spread([c for _, c in reached])} | "
        f"{statistics.median(r['cpu_s'] for r in runs):.0f} | "
        f"{statistics.median(map(final_reward, runs)):.3f} | "
        f"{statistics.median(r['wall_s'] for r in runs):.0f} | "
        f"{statistics.fmean(map(mean_age, runs)):.2f} | {diag('ratio_ess')} | "
        f"{diag('clip_fraction')} | {diag('kl_behaviour')} |"
    )


def _median_range(values: list[float], digits: int) -> str:
    """`median (min-max)` over seeds."""
    return (
        f"{statistics.median(values):.{digits}f} "
        f"({min(values):.{digits}f}-{max(values):.{digits}f})"
    )


def plot_eval(rows: Sequence[Row], steps: int, path: Path) -> None:
    """Held-out greedy reward against CPU seconds, one line per settings and preset
    (median over seeds at each evaluation; its batch's CPU seconds, median too)."""
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot

    groups: dict[str, list[Row]] = {}
    for row in rows:
        if row["steps"] == steps and row.get("eval"):
            variant = " ".join(row.get("variant", [])) or "no variant"
            groups.setdefault(f"{row['preset']} {variant}", []).append(row)
    figure, axis = pyplot.subplots(figsize=(7, 4.5))
    for name, runs in sorted(groups.items()):
        evaluated = [e["step"] for e in runs[0]["eval"]]
        points = [
            (
                statistics.median(r["batch_cpu_s"][step - 1] for r in runs),
                statistics.median(
                    e["greedy"] for r in runs for e in r["eval"] if e["step"] == step
                ),
            )
            for step in evaluated
            if all(step <= len(r["batch_cpu_s"]) for r in runs)
        ]
        axis.plot([x for x, _ in points], [y for _, y in points], marker=".", label=name)
    axis.set(xlabel="CPU seconds", ylabel="held-out reward (greedy)")
    axis.legend(fontsize=6)
    figure.tight_layout()
    figure.savefig(path)
