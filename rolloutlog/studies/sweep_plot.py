"""`sweep --plot`: trained episodes per hour against finished rollouts discarded.

One panel per scenario, one point per configuration (a preset and its `--set` values,
averaged over seeds), labelled with its preset beside it where no other label sits. The
Pareto front (no other configuration trains more per hour while discarding no more) is
drawn filled, ringed and joined by a line; the rest are hollow. matplotlib is imported
lazily and drawn off-screen (Agg).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any, Final

from rolloutlog.runtime.sim.plot import pyplot, save_figure
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
    """Draw one panel per scenario to `path` (its suffix names the format: .png, .pdf, .svg)."""
    plt = pyplot()
    scenarios = list(dict.fromkeys(c.scenario for c in found))
    figure, axes = plt.subplots(1, len(scenarios), figsize=(6 * len(scenarios), 4.8), squeeze=False)
    panels: list[tuple[list[tuple[float, float]], list[str]]] = []
    for axis, scenario in zip(axes[0], scenarios, strict=True):
        mine = [c for c in found if c.scenario == scenario and _plottable(c)]
        points = [(float(c.means[X_KEY] or 0.0), float(c.means[Y_KEY] or 0.0)) for c in mine]
        panels.append((points, [label(c) for c in mine]))
        draw_front(axis, points)
        axis.set_title(f"{scenario} (mean over seeds)")
    figure.suptitle(title)
    figure.tight_layout()
    for axis, labelled in zip(axes[0], panels, strict=True):  # once the axes are laid out
        place_labels(axis, *labelled)
    save_figure(figure, path)
    plt.close(figure)


def draw_front(axis: Any, points: Sequence[tuple[float, float]]) -> None:
    """The points, those of the Pareto front filled, ringed and joined by a line, the
    rest hollow (`sweep --plot`, `simulate --compare --plot`)."""
    front = pareto_front(points)
    for index, (x, y) in enumerate(points):
        on_front = index in front
        axis.scatter(
            [x], [y], s=40, facecolors="C0" if on_front else "none", edgecolors="C0", zorder=3
        )
    axis.plot(
        [points[i][0] for i in front],
        [points[i][1] for i in front],
        color="C1",
        linewidth=1.2,
        marker="o",
        markersize=11,
        markerfacecolor="none",
        label="Pareto front",
    )
    axis.margins(0.15)
    axis.set_xlabel("finished rollouts discarded")
    axis.set_ylabel("trained episodes / hour")
    axis.legend(loc="best", fontsize=8)


# Where a label may sit beside its point, in points from it, tried in this order; the
# second value of each is the text's horizontal alignment.
LABEL_SPOTS: Final = (
    ((5, 4), "left"),
    ((5, -11), "left"),
    ((-5, 4), "right"),
    ((-5, -11), "right"),
    ((5, 14), "left"),
    ((5, -21), "left"),
    ((-5, 14), "right"),
    ((-5, -21), "right"),
)


def place_labels(
    axis: Any, points: Sequence[tuple[float, float]], texts: Sequence[str]
) -> list[Any]:
    """Label each point at the first spot beside it where the text overlaps no label placed
    before and stays inside the axes (presets on nearby points would print over each other,
    and a point near an edge would lose its label's end); failing that, the first where it
    overlaps none; failing that, the first inside the axes. Returns the labels' boxes in
    display units, in the order of `points`.
    """
    renderer = axis.figure.canvas.get_renderer()
    frame = axis.get_window_extent(renderer)
    boxes: list[Any] = []
    for point, text in zip(points, texts, strict=True):
        ranks: list[tuple[bool, bool]] = []
        for spot in LABEL_SPOTS:  # each spot tried and measured, then taken off again
            note = _annotate(axis, point, text, spot)
            box = note.get_window_extent(renderer)
            note.remove()
            ranks.append((any(box.overlaps(other) for other in boxes), not _inside(box, frame)))
            if ranks[-1] == (False, False):
                break
        spot = LABEL_SPOTS[ranks.index(min(ranks))]  # the first of the best
        boxes.append(_annotate(axis, point, text, spot).get_window_extent(renderer))
    return boxes


def _inside(box: Any, frame: Any) -> bool:
    return bool(
        frame.x0 <= box.x0 <= box.x1 <= frame.x1 and frame.y0 <= box.y0 <= box.y1 <= frame.y1
    )


def _annotate(
    axis: Any, point: tuple[float, float], text: str, spot: tuple[tuple[int, int], str]
) -> Any:
    offset, align = spot
    return axis.annotate(
        text, point, textcoords="offset points", xytext=offset, ha=align, fontsize=7
    )


def _plottable(config: Configuration) -> bool:
    return config.means.get(X_KEY) is not None and config.means.get(Y_KEY) is not None
