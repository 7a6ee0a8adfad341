"""The `simulate --plot` figure: trained ages and cumulative waste, one colour per policy.

Left: how many trained episodes had each rollout age (bars side by side per age). Right:
cumulative wasted rollout time against virtual time. matplotlib is imported lazily and
drawn off-screen (Agg), so `simulate` works without a display or the `plot` extra. A `lead`
panel goes before the two (`simulate --compare`'s trade-off, `studies.compare_plot`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from rolloutlog.events.whole_file import written_whole


def pyplot() -> Any:
    """matplotlib's pyplot, drawing off-screen; a clear error without the `plot` extra."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as error:
        raise RuntimeError("--plot needs matplotlib (pip install 'rolloutlog[plot]')") from error
    return plt


# A panel drawn before the two: it draws on its axis and returns what to do once the
# figure is laid out (labels placed where they fit, as `studies.compare_plot` needs).
LeadPanel = Callable[[Any], Callable[[], object]]


def plot_runs(
    runs: Mapping[str, Mapping[str, Any]],
    series: Mapping[str, Sequence[tuple[float, float]]],
    path: Path,
    title: str,
    *,
    lead: LeadPanel | None = None,
) -> None:
    """Draw the figure for `runs` (the `--json` objects) and their wasted-time `series`,
    after a `lead` panel where one is given."""
    plt = pyplot()
    laid_out = None
    if lead is None:
        figure, (ages, waste) = plt.subplots(1, 2, figsize=(11, 4.2))
    else:
        figure, (first, ages, waste) = plt.subplots(
            1, 3, figsize=(17, 5.2), gridspec_kw={"width_ratios": [1.4, 1, 1]}
        )
        laid_out = lead(first)
    _draw_ages(ages, runs)
    _draw_waste(waste, runs, series)
    figure.suptitle(title)
    figure.tight_layout()
    if laid_out is not None:
        laid_out()
    save_figure(figure, path)
    plt.close(figure)


def save_figure(figure: Any, path: Path) -> None:
    """Write `figure` to `path` in the format its suffix names, whole or not at all and
    under the output's lock (`events.whole_file`), as every other output."""
    with written_whole(Path(path)) as temporary:
        figure.savefig(temporary, dpi=120, format=Path(path).suffix[1:].lower() or "png")


def _draw_ages(axis: Any, runs: Mapping[str, Mapping[str, Any]]) -> None:
    """The trained-age histogram of every run, bars side by side per age."""
    width = 0.8 / max(len(runs), 1)
    for index, (name, run) in enumerate(runs.items()):
        histogram = {int(age): count for age, count in run["trained_age_histogram"].items()}
        xs = [age + (index - (len(runs) - 1) / 2) * width for age in histogram]
        axis.bar(xs, list(histogram.values()), width=width, label=name)
    axis.xaxis.get_major_locator().set_params(integer=True)
    axis.set_xlabel("rollout age at the step it trained (versions)")
    axis.set_ylabel("trained episodes")
    axis.set_title("trained-age histogram")
    axis.legend()


def _draw_waste(
    axis: Any,
    runs: Mapping[str, Mapping[str, Any]],
    series: Mapping[str, Sequence[tuple[float, float]]],
) -> None:
    """Each run's cumulative wasted rollout time against virtual time, in hours."""
    for name in runs:
        points = series.get(name, [])
        axis.plot([t / 3600.0 for t, _ in points], [s / 3600.0 for _, s in points], label=name)
    axis.set_xlabel("virtual time (h)")
    axis.set_ylabel("wasted rollout time (h)")
    axis.set_title("cumulative wasted rollout time")
    axis.legend()
