"""`simulate --compare --plot`: what each policy trains against what it throws away.

The left panel puts one point per policy at (finished rollouts discarded, trained episodes
per hour), labelled with its name and its two selection-bias ratios (trained length and
difficulty against dispatched; 1 is no bias), so a preset that trains fast by keeping only
short or easy tasks reads as such. The Pareto front (no other policy trains more per hour
while discarding no more) is ringed and joined, as in `sweep --plot`. Beside it, the
trained-age histograms and the cumulative waste of `simulate --plot`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from rolloutlog.runtime.sim.plot import plot_runs
from rolloutlog.studies.sweep_plot import X_KEY, Y_KEY, draw_front, place_labels

LENGTH_KEY, DIFFICULTY_KEY = "trained_length_ratio", "trained_difficulty_ratio"


def plot_compare(
    runs: Mapping[str, Mapping[str, Any]],
    series: Mapping[str, Sequence[tuple[float, float]]],
    path: Path,
    title: str,
) -> None:
    """Draw the trade-off, the trained ages and the waste of `runs` (the `--json` objects)."""

    def tradeoff(axis: Any) -> Callable[[], object]:
        labelled = draw_tradeoff(axis, runs)
        return lambda: place_labels(axis, *labelled)  # once the axes are laid out

    plot_runs(runs, series, path, title, lead=tradeoff)


def bias_label(name: str, run: Mapping[str, Any]) -> str:
    """The policy and its two bias ratios: `all (length 0.951, difficulty 0.991)`."""
    ratios = [
        f"{word} {'–' if run.get(key) is None else f'{run[key]:.3f}'}"
        for word, key in (("length", LENGTH_KEY), ("difficulty", DIFFICULTY_KEY))
    ]
    return f"{name} ({', '.join(ratios)})"


def draw_tradeoff(
    axis: Any, runs: Mapping[str, Mapping[str, Any]]
) -> tuple[list[tuple[float, float]], list[str]]:
    """One point per run that has both figures, the front ringed and joined; returns the
    points and their labels, for `place_labels` once the figure is laid out."""
    plotted = {n: r for n, r in runs.items() if None not in (r.get(X_KEY), r.get(Y_KEY))}
    points = [(float(r[X_KEY]), float(r[Y_KEY])) for r in plotted.values()]
    draw_front(axis, points)
    axis.set_title("trade-off; (length, difficulty): trained / dispatched, 1 = no bias")
    return points, [bias_label(name, run) for name, run in plotted.items()]
