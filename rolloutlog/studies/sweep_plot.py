"""`sweep --plot`: trained episodes per hour against finished rollouts discarded.

One panel per scenario, one point per configuration (a preset and its `--set` values,
averaged over seeds), labelled with its preset. The Pareto front (no other configuration
trains more per hour while discarding no more) is drawn filled, ringed and joined by a
line; the rest are hollow. matplotlib is imported lazily and drawn off-screen (Agg).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from rolloutlog.studies.best import Configuration

X_KEY = "finished_rollouts_discarded"
Y_KEY = "trained_episodes_per_hour"


def pareto_front(points: Sequence[tuple[float, float]]) -> list[int]:
    """Indices of the points no other point dominates (x no larger and y no smaller,
    one of them strictly), sorted by x: fewer discards, more trained per hour."""
    front = [
        i
        for i, (x, y) in enumerate(points)
        if not any(
            (ox <= x and oy >= y) and (ox < x or oy > y)
            for j, (ox, oy) in enumerate(points)
            if j != i
        )
    ]
    return sorted(front, key=lambda i: points[i])


def label(config: Configuration) -> str:
    """The preset, and its settings when the sweep varied any."""
    settings = " ".join(f"{k.split('.', 1)[1]}={v}" for k, v in config.settings)
    return f"{config.preset} {settings}".strip()


def plot_sweep(found: Sequence[Configuration], path: Path, title: str) -> None:
    """Draw one panel per scenario to `path` (PNG, or any format matplotlib infers)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as error:
        raise RuntimeError("--plot needs matplotlib (pip install 'rolloutlog[plot]')") from error
    scenarios = list(dict.fromkeys(c.scenario for c in found))
    figure, axes = plt.subplots(1, len(scenarios), figsize=(6 * len(scenarios), 4.8), squeeze=False)
    for axis, scenario in zip(axes[0], scenarios, strict=True):
        mine = [c for c in found if c.scenario == scenario and _plottable(c)]
        points = [(float(c.means[X_KEY] or 0.0), float(c.means[Y_KEY] or 0.0)) for c in mine]
        front = set(pareto_front(points))
        for index, (config, (x, y)) in enumerate(zip(mine, points, strict=True)):
            on_front = index in front
            axis.scatter(
                [x], [y], s=40, facecolors="C0" if on_front else "none", edgecolors="C0", zorder=3
            )
            axis.annotate(
                label(config), (x, y), textcoords="offset points", xytext=(5, 4), fontsize=7
            )
        ordered = pareto_front(points)
        axis.plot(
            [points[i][0] for i in ordered],
            [points[i][1] for i in ordered],
            color="C1",
            linewidth=1.2,
            marker="o",
            markersize=11,
            markerfacecolor="none",
            label="Pareto front",
        )
        axis.margins(0.15)
        axis.set_title(f"{scenario} (mean over seeds)")
        axis.set_xlabel("finished rollouts discarded")
        axis.set_ylabel("trained episodes / hour")
        axis.legend(loc="best", fontsize=8)
    figure.suptitle(title)
    figure.tight_layout()
    figure.savefig(path, dpi=120)
    plt.close(figure)


def _plottable(config: Configuration) -> bool:
    return config.means.get(X_KEY) is not None and config.means.get(Y_KEY) is not None
