"""The `simulate --plot` figure: trained ages and cumulative waste, one colour per policy.

Left: how many trained episodes had each rollout age (bars side by side per age). Right:
cumulative wasted rollout time against virtual time. matplotlib is imported lazily and
drawn off-screen (Agg), so `simulate` works without a display or the `plot` extra.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any


def plot_runs(
    runs: Mapping[str, Mapping[str, Any]],
    series: Mapping[str, Sequence[tuple[float, float]]],
    path: Path,
    title: str,
) -> None:
    """Draw the figure for `runs` (the `--json` objects) and their wasted-time `series`."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as error:
        raise RuntimeError("--plot needs matplotlib (pip install 'rolloutlog[plot]')") from error
    figure, (ages, waste) = plt.subplots(1, 2, figsize=(11, 4.2))
    width = 0.8 / max(len(runs), 1)
    for index, (name, run) in enumerate(runs.items()):
        histogram = {int(age): count for age, count in run["trained_age_histogram"].items()}
        xs = [age + (index - (len(runs) - 1) / 2) * width for age in histogram]
        ages.bar(xs, list(histogram.values()), width=width, label=name)
        points = series.get(name, [])
        waste.plot([t / 3600.0 for t, _ in points], [s / 3600.0 for _, s in points], label=name)
    ages.xaxis.get_major_locator().set_params(integer=True)
    ages.set_xlabel("rollout age at the step it trained (versions)")
    ages.set_ylabel("trained episodes")
    ages.set_title("trained-age histogram")
    ages.legend()
    waste.set_xlabel("virtual time (h)")
    waste.set_ylabel("wasted rollout time (h)")
    waste.set_title("cumulative wasted rollout time")
    waste.legend()
    figure.suptitle(title)
    figure.tight_layout()
    figure.savefig(path, dpi=120)
    plt.close(figure)
