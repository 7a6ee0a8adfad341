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

import attrs

from rolloutlog.studies.learning_model import LearningModel, LearningPoint, constant, fit, loso

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
    histogram = _age_shares(runs)
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


EVALS: Final = 2  # evaluations in the mean that must reach a target (`eval_late` too)


def to_eval_target(row: Row, target: float) -> tuple[float, float]:
    """(batches, CPU seconds) until the held-out greedy reward, the mean of the last
    `EVALS` evaluations (every `eval_every` batches; fewer at the first), first reached
    `target`; (inf, inf) if it never did. One evaluation of 64 tasks moves by a few
    hundredths from one to the next, so a single lucky one does not decide."""
    greedy = [scored["greedy"] for scored in row["eval"]]
    for index, scored in enumerate(row["eval"]):
        if statistics.fmean(greedy[max(0, index - EVALS + 1) : index + 1]) >= target:
            step = scored["step"]
            cpu = row["batch_cpu_s"][step - 1] if step <= len(row["batch_cpu_s"]) else math.inf
            return float(step), float(cpu)
    return math.inf, math.inf


def mean_age(row: Row) -> float:
    ages = {int(age): count for age, count in row["trained_ages"].items()}
    return sum(age * count for age, count in ages.items()) / (sum(ages.values()) or 1)


def sweep_report(rows: Sequence[Row], steps: int, target: float) -> str:
    """The sweep's table: one line per cell (settings, preset and sweep variant), best
    first by the mean held-out greedy reward of the last two evaluations, with its 95%
    interval over seeds; then batches, trained episodes and CPU seconds to `target`, the
    held-out reward at the CPU second every run reached, and the diagnostics (trained
    ages, task mix, ratio ESS, clip fraction, KL; training-batch reward and wall seconds)."""
    scored = [r for r in rows if r["steps"] == steps and r.get("eval")]
    if not scored:
        return ""
    common = min(r["batch_cpu_s"][-1] for r in scored)
    groups: dict[tuple[str, str, str], list[Row]] = {}
    for row in scored:
        key = (row["settings"], row["preset"], variant_name(row))
        groups.setdefault(key, []).append(row)
    order = sorted(groups, key=lambda key: -statistics.fmean(map(eval_late, groups[key])))
    lines = [
        f"### held-out reward ({steps} batches; target {target}; common CPU {common:.0f} s)",
        "",
        "| settings | preset | cell | seeds | held-out greedy (last 2) | sampled (last 2) | "
        f"greedy at {common:.0f} CPU s | batches to target | episodes to target | "
        "CPU s to target | CPU s / batch | wall s / batch | trained ages | mean age | "
        "hard trained (opened) | length ratio | ratio ESS | clip fraction | KL(b‖θ) | "
        "train-batch reward |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    lines += [_sweep_line(key, groups[key], target, common) for key in order]
    return "\n".join(lines) + "\n"


def _sweep_line(key: tuple[str, str, str], runs: list[Row], target: float, common: float) -> str:
    hits = [reached(r, target) for r in runs]
    steps_diag = [d for r in runs for d in r["diagnostics"]]

    def diag(name: str) -> str:
        return _number(statistics.fmean(d[name] for d in steps_diag), 3)

    return (
        f"| {' | '.join(key)} | {len(runs)} | {_mean_interval([eval_late(r) for r in runs])} | "
        f"{_mean_interval([eval_late(r, 'sampled') for r in runs])} | "
        f"{_mean_interval([eval_at_cpu(r, common) for r in runs])} | "
        f"{' | '.join(_spread([hit[i] for hit in hits]) for i in range(3))} | "
        f"{statistics.fmean(r['cpu_s'] / r['steps'] for r in runs):.2f} | "
        f"{statistics.fmean(r['wall_s'] / r['steps'] for r in runs):.2f} | "
        f"{_age_shares(runs)} | {statistics.fmean(map(mean_age, runs)):.2f} | "
        f"{_hard_share(runs)} | {_number(_mean_of(runs, 'trained_length_ratio'), 3)} | "
        f"{diag('ratio_ess')} | {diag('clip_fraction')} | {diag('kl_behaviour')} | "
        f"{statistics.fmean(map(final_reward, runs)):.3f} |"
    )


def _mean_interval(values: list[float]) -> str:
    """`mean ± half` of the 95% t interval over seeds (the mean alone for one seed)."""
    mean = statistics.fmean(values)
    if len(values) < 2:
        return f"{mean:.3f}"
    half = t_975(len(values) - 1) * statistics.stdev(values) / math.sqrt(len(values))
    return f"{mean:.3f} ± {half:.3f}"


def _age_shares(runs: list[Row]) -> str:
    ages: Counter[str] = Counter()
    for run in runs:
        ages.update(run["trained_ages"])
    total = sum(ages.values()) or 1
    return " ".join(f"{age}:{ages[age] / total:.2f}" for age in sorted(ages, key=int))


def _hard_share(runs: list[Row]) -> str:
    trained = sum(r["by_difficulty"].get("hard", {}).get("trained", 0) for r in runs)
    sent = sum(r["by_difficulty"].get("hard", {}).get("dispatched", 0) for r in runs)
    all_trained = sum(d["trained"] for r in runs for d in r["by_difficulty"].values())
    all_sent = sum(d["dispatched"] for r in runs for d in r["by_difficulty"].values())
    return f"{trained / (all_trained or 1):.2f} ({sent / (all_sent or 1):.2f})"


def _mean_of(runs: list[Row], key: str) -> float | None:
    values = [r[key] for r in runs if r.get(key) is not None]
    return statistics.fmean(values) if values else None


def plot_eval(rows: Sequence[Row], steps: int, path: Path) -> None:
    """Held-out greedy reward against batches and against CPU seconds, one line per
    preset and sweep cell: the mean over seeds at each evaluation (its batch's CPU
    seconds, the mean too)."""
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot

    groups: dict[str, list[Row]] = {}
    for row in rows:
        if row["steps"] == steps and row.get("eval"):
            groups.setdefault(f"{row['preset']} {variant_name(row)}", []).append(row)
    figure, axes = pyplot.subplots(1, 2, figsize=(12, 4.5), sharey=True)
    for name, runs in sorted(groups.items()):
        evaluated = [e["step"] for e in runs[0]["eval"]]
        scored = [
            (
                step,
                statistics.fmean(e["greedy"] for r in runs for e in r["eval"] if e["step"] == step),
            )
            for step in evaluated
            if all(step <= len(r["batch_cpu_s"]) for r in runs)
        ]
        cpu = [statistics.fmean(r["batch_cpu_s"][step - 1] for r in runs) for step, _ in scored]
        (line,) = axes[0].plot([s for s, _ in scored], [g for _, g in scored], marker=".")
        axes[1].plot(cpu, [g for _, g in scored], marker=".", color=line.get_color(), label=name)
    axes[0].set(xlabel="batches", ylabel="held-out reward (greedy, mean over seeds)")
    axes[1].set(xlabel="CPU seconds")
    axes[1].legend(fontsize=6)
    figure.tight_layout()
    figure.savefig(path)


# ---- the sweep's factors, with intervals over seeds ----------------------------------
def variant_name(row: Row) -> str:
    """A run's sweep cell in short: `b4 drop decoupled`, `sync` (bound 0 with drain)."""
    items = dict(item.split("=", 1) for item in row.get("variant", []))
    if items.get("weight_update") == "drain" and items.get("max_off_policy_steps") == "0":
        inflight = items.get("max_inflight")
        return "sync" if inflight is None else f"sync, {inflight} in flight"
    parts = [
        f"b{items['max_off_policy_steps']}" if "max_off_policy_steps" in items else "",
        items.get("stale_tokens", ""),
        items.get("is_correction", ""),
    ]
    return " ".join(part for part in parts if part) or "no variant"


def episodes_by_step(row: Row) -> list[int]:
    """Trained episodes after each step (the per-step age counts, summed)."""
    total, out = 0, []
    for step in row["diagnostics"]:
        total += sum(step["ages"].values())
        out.append(total)
    return out


def reached(row: Row, target: float) -> tuple[float, float, float]:
    """(batches, trained episodes, CPU s) at the first evaluation whose greedy held-out
    reward reached `target`; all inf if none did."""
    batches, cpu = to_eval_target(row, target)
    if math.isinf(batches):
        return math.inf, math.inf, math.inf
    return batches, float(episodes_by_step(row)[int(batches) - 1]), cpu


def eval_at_cpu(row: Row, cpu_s: float) -> float:
    """The greedy held-out reward of the last evaluation made by CPU second `cpu_s`
    (the first evaluation's if none was)."""
    value = row["eval"][0]["greedy"]
    for scored in row["eval"]:
        if row["batch_cpu_s"][scored["step"] - 1] > cpu_s:
            break
        value = scored["greedy"]
    return float(value)


def eval_late(row: Row, key: str = "greedy") -> float:
    """The mean held-out reward (`greedy` or `sampled`) of the last `EVALS` evaluations."""
    return statistics.fmean(scored[key] for scored in row["eval"][-EVALS:])


T_975: Final = {1: 12.71, 2: 4.30, 3: 3.18, 4: 2.78, 5: 2.57, 6: 2.45, 7: 2.36, 8: 2.31,
                9: 2.26, 10: 2.23, 12: 2.18, 15: 2.13, 20: 2.09, 30: 2.04}  # fmt: skip


def t_975(df: float) -> float:
    """Student's t at 97.5% for the table's df at or below `df` (so never too small)."""
    return T_975[max(k for k in T_975 if k <= max(1.0, df))]


def difference(first: Sequence[float], second: Sequence[float]) -> tuple[float, float, float]:
    """mean(first) − mean(second) and its 95% Welch interval (t at the table's df at or
    below Welch's, so never narrower); infinite bounds under two values a side."""
    delta = statistics.fmean(first) - statistics.fmean(second)
    if len(first) < 2 or len(second) < 2:
        return delta, -math.inf, math.inf
    a, b = (statistics.variance(x) / len(x) for x in (first, second))
    if a + b == 0:
        return delta, delta, delta
    df = (a + b) ** 2 / (a * a / (len(first) - 1) + b * b / (len(second) - 1))
    half = t_975(df) * math.sqrt(a + b)
    return delta, delta - half, delta + half


def _factor_of(row: Row, factor: str) -> str | None:
    items = dict(item.split("=", 1) for item in row.get("variant", []))
    return items.get(factor)


CONTRASTS: Final = (  # (what, factor, level, against): pooled over the other factors
    ("mask against drop", "stale_tokens", "mask", "drop"),
    ("decoupled against none", "is_correction", "decoupled", "none"),
    ("tis against none", "is_correction", "tis", "none"),
)


def effects(rows: Sequence[Row], measures: Sequence[tuple[str, Any]]) -> str:
    """The sweep's contrasts, each over the runs of the two levels in the cells (the other
    factors' values) where both ran, then each bound above 1 against bound 1 the same way,
    and each synchronous baseline against every bound-1 run:
    difference of means and its 95% interval, per measure; `resolved` where the interval
    leaves out 0."""
    pairs: list[tuple[str, list[Row], list[Row]]] = []
    for what, factor, level, against in CONTRASTS:
        first, second = _matched(rows, factor, level, against)
        if first and second:
            pairs.append((what, first, second))
    bounds = sorted({int(b) for r in rows if (b := _factor_of(r, "max_off_policy_steps"))})
    for bound in bounds[bounds.index(1) + 1 :] if 1 in bounds else []:
        first, second = _matched(rows, "max_off_policy_steps", str(bound), "1")
        if first:
            pairs.append((f"bound {bound} against bound 1", first, second))
    bound_one = [r for r in rows if _factor_of(r, "max_off_policy_steps") == "1"]
    for name in sorted({variant_name(r) for r in rows if variant_name(r).startswith("sync")}):
        if bound_one:  # every bound-1 cell: the baseline has no rule or correction of its own
            mine = [r for r in rows if variant_name(r) == name]
            pairs.append((f"{name} against bound 1", mine, bound_one))
    header = " | ".join(name for name, _ in measures)
    lines = [f"| contrast | runs | {header} |", "|---|---|" + "---|" * len(measures)]
    for what, first, second in pairs:
        cells = []
        for _, measure in measures:
            delta, low, high = difference([measure(r) for r in first], [measure(r) for r in second])
            mark = " resolved" if low > 0 or high < 0 else ""
            cells.append(f"{delta:+.3f} ({low:+.3f} to {high:+.3f}){mark}")
        lines.append(f"| {what} | {len(first)} vs {len(second)} | {' | '.join(cells)} |")
    return "\n".join(lines) + "\n"


def _matched(
    rows: Sequence[Row], factor: str, level: str, against: str
) -> tuple[list[Row], list[Row]]:
    """The runs at `level` and at `against` of `factor`, each only in the cells (the other
    factors' values) where the other level ran too: a level tried at some bounds only is
    compared at those."""

    def others(row: Row) -> tuple[str, ...]:
        return tuple(sorted(i for i in row.get("variant", []) if not i.startswith(f"{factor}=")))

    first = [r for r in rows if _factor_of(r, factor) == level]
    second = [r for r in rows if _factor_of(r, factor) == against]
    common = {others(r) for r in first} & {others(r) for r in second}
    return [r for r in first if others(r) in common], [r for r in second if others(r) in common]


# ---- the learning model: episodes needed at the trained age and task mix -------------
def model_cells(rows: Sequence[Row], target: float) -> tuple[list[Cell], list[str]]:
    """Per sweep cell: its point (mean trained age, length ratio, median trained episodes
    to `target` over seeds), its episodes per CPU second (median over seeds) and median
    CPU seconds to `target`; and the cells left out because most seeds never got there."""
    groups: dict[str, list[Row]] = {}
    for row in rows:
        if row.get("eval") and row.get("trained_length_ratio") is not None:
            groups.setdefault(variant_name(row), []).append(row)
    cells, censored = [], []
    for name, runs in sorted(groups.items()):
        hits = [reached(r, target) for r in runs]
        episodes, cpu = (statistics.median(hit[i] for hit in hits) for i in (1, 2))
        if math.isinf(episodes) or math.isinf(cpu):
            censored.append(f"{name} ({sum(math.isfinite(h[1]) for h in hits)}/{len(runs)})")
            continue
        point = LearningPoint(
            mean_age=statistics.fmean(map(mean_age, runs)),
            length_ratio=statistics.fmean(r["trained_length_ratio"] for r in runs),
            episodes=episodes,
        )
        rate = statistics.median(r["episodes_trained"] / r["cpu_s"] for r in runs)
        wall_rate = statistics.median(r["episodes_trained"] / r["wall_s"] for r in runs)
        wall = statistics.median(
            r["batch_t"][int(hit[0]) - 1] if math.isfinite(hit[0]) else math.inf
            for r, hit in zip(runs, hits, strict=True)
        )
        cells.append(Cell(name, point, rate, cpu, wall_rate, wall))
    return cells, censored


@attrs.frozen
class Cell:
    """One sweep cell as the model sees it (`model_cells`)."""

    name: str
    point: LearningPoint
    rate: float  # trained episodes per CPU second
    cpu_to_target: float
    wall_rate: float  # per wall second: a diagnostic (the machine's load moves it)
    wall_to_target: float


def model_report(rows: Sequence[Row], target: float) -> tuple[str, LearningModel | None]:
    """The learning model fitted on every cell, and its leave-one-setting-out test against
    throughput alone (every cell needing the others' geometric mean of episodes): per cell
    the measured and predicted CPU seconds to `target`; the median absolute relative error
    and Spearman of each. The full fit carries the test's figures."""
    cells, censored = model_cells(rows, target)
    lines = [f"### learning model: CPU seconds to held-out greedy {target}", ""]
    if censored:
        lines += [f"Left out (most seeds never reached it): {', '.join(censored)}.", ""]
    if len(cells) < 3:
        return "\n".join(
            [*lines, f"{len(cells)} cells reached it: too few to test a model.\n"]
        ), None
    points, rates = [c.point for c in cells], [c.rate for c in cells]
    measured = [c.cpu_to_target for c in cells]
    model_pred, model_err, model_rho = loso(points, rates, measured, target)
    flat_pred, flat_err, flat_rho = loso(points, rates, measured, target, fitter=constant)
    walls = [c.wall_to_target for c in cells]
    _, wall_err, wall_rho = loso(points, [c.wall_rate for c in cells], walls, target)
    _, wall_flat, wall_flat_rho = loso(
        points, [c.wall_rate for c in cells], walls, target, fitter=constant
    )
    lines += [
        "| cell | mean age | length ratio | episodes to target | episodes / CPU s | "
        "CPU s to target | model (left out) | throughput only (left out) |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for cell, mine, flat in zip(cells, model_pred, flat_pred, strict=True):
        p = cell.point
        lines.append(
            f"| {cell.name} | {p.mean_age:.2f} | {p.length_ratio:.3f} | {p.episodes:.0f} | "
            f"{cell.rate:.1f} | {cell.cpu_to_target:.0f} | {mine:.0f} | {flat:.0f} |"
        )
    full = attrs.evolve(
        fit(points, target), loso_error=model_err, loso_spearman=model_rho,
        settings=len(cells),
    )  # fmt: skip
    lines += [
        "",
        f"Leave one cell out, {len(cells)} cells: the model's median absolute error "
        f"{100 * model_err:.0f}%, Spearman {model_rho:.2f}; throughput alone "
        f"{100 * flat_err:.0f}%, Spearman {flat_rho:.2f}. In wall seconds (diagnostic): "
        f"{100 * wall_err:.0f}%, {wall_rho:.2f}; throughput alone {100 * wall_flat:.0f}%, "
        f"{wall_flat_rho:.2f}. Fitted on all: log episodes = "
        f"{full.intercept:.3f} + {full.per_age:.3f}·age + {full.per_length:.3f}·(ratio − 1).",
        "",
    ]
    return "\n".join(lines), full


def sweep_effects(rows: Sequence[Row], steps: int) -> str:
    """`effects` of the sweep's runs of `steps` batches on the held-out reward (the last two
    evaluations, and at the CPU second every run reached), the CPU seconds per batch and
    the mean trained age."""
    scored = [r for r in rows if r["steps"] == steps and r.get("eval") and r.get("variant")]
    if not scored:
        return ""
    common = min(r["batch_cpu_s"][-1] for r in scored)
    measures = (
        ("held-out greedy (last 2)", eval_late),
        (f"greedy at {common:.0f} CPU s", lambda r: eval_at_cpu(r, common)),
        ("CPU s / batch", lambda r: r["cpu_s"] / r["steps"]),
        ("mean age", mean_age),
    )
    return f"### contrasts ({steps} batches; 95% Welch intervals over runs)\n\n" + effects(
        scored, measures
    )


# ---- vLLM against the twin: the same cells on both backends ------------------------------
BACKEND_MEASURES: Final = (
    ("held-out greedy (last 2)", eval_late),
    ("CPU s / batch", lambda r: r["cpu_s"] / r["steps"]),
    ("wall s / batch", lambda r: r["wall_s"] / r["steps"]),
    ("mean age", mean_age),
    ("discarded / batch", lambda r: r["discarded"] / r["steps"]),
    ("length ratio", lambda r: r["trained_length_ratio"]),
    ("ratio ESS", lambda r: statistics.fmean(d["ratio_ess"] for d in r["diagnostics"])),
)


def backend_effects(twin: Sequence[Row], vllm: Sequence[Row], steps: int) -> str:
    """Per sweep cell that ran on both backends for `steps` batches: vLLM's mean against
    the twin's and the difference's 95% Welch interval over seeds, per measure (`resolved`
    where the interval leaves out 0)."""
    cells: dict[str, tuple[list[Row], list[Row]]] = {}
    for side, rows in enumerate((twin, vllm)):
        for row in rows:
            if row["steps"] == steps and row.get("eval"):
                cells.setdefault(variant_name(row), ([], []))[side].append(row)
    lines = [
        f"### vLLM against the twin ({steps} batches; 95% Welch intervals over seeds)",
        "",
        "| cell | seeds (twin, vLLM) | measure | twin | vLLM | vLLM − twin |",
        "|---|---|---|---|---|---|",
    ]
    for name, (twin_runs, vllm_runs) in sorted(cells.items()):
        if not (twin_runs and vllm_runs):
            continue
        for what, measure in BACKEND_MEASURES:
            on_twin, on_vllm = [measure(r) for r in twin_runs], [measure(r) for r in vllm_runs]
            delta, low, high = difference(on_vllm, on_twin)
            mark = " resolved" if low > 0 or high < 0 else ""
            lines.append(
                f"| {name} | {len(twin_runs)}, {len(vllm_runs)} | {what} | "
                f"{statistics.fmean(on_twin):.3f} | {statistics.fmean(on_vllm):.3f} | "
                f"{delta:+.3f} ({low:+.3f} to {high:+.3f}){mark} |"
            )
    return "\n".join(lines) + "\n"
