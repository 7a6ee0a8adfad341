"""The fitted decode curve beside the log's points: the lead panel of `whatif --plot`.

Each completed episode is a point at the running requests per server during its life,
its seconds per decode step (its tokens and its request steps) once the fitted prefill,
environment and colocated slowdown are taken out; the line is the fitted `step(n)`,
drawn out to the most any simulated policy may run, with the log's range shaded, so an
extrapolation shows as a line past it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from rolloutlog.studies.whatif.shared_fit import SharedFit

CURVE_POINTS = 200
BINS = 12  # bins of running requests, by quantile: the medians show the log's trend


def decode_panel(fit: SharedFit, reach: float) -> Callable[[Any], Callable[[], object]]:
    """A lead panel (`runtime.sim.plot.plot_runs`): the curve out to `reach` running."""

    def draw(axis: Any) -> Callable[[], object]:
        rows, decode = fit.rows, fit.decode
        decoding = (rows.tokens + decode.request_steps) * (1.0 + decode.coupling * rows.training)
        kept = decoding > 0
        left = rows.seconds - decode.overhead_s - decode.prefill_s_per_token * rows.prompt
        per_token = left[kept] / decoding[kept]
        running = rows.running[kept]
        axis.scatter(running, per_token * 1e3, s=4, alpha=0.2, label="log: episodes")
        centres, medians = _binned_medians(running, per_token)
        axis.plot(centres, medians * 1e3, "o", color="tab:red", label="log: median per bin")
        running_range = fit.ranges[0]
        axis.axvspan(running_range.low, running_range.high, alpha=0.12, color="grey",
                     label="the log's range")  # fmt: skip
        xs = np.linspace(0.0, max(reach, running_range.high) * 1.05, CURVE_POINTS)
        axis.plot(xs, [decode.step_s(x) * 1e3 for x in xs], color="black", label="fitted step(n)")
        axis.set_xlabel("running requests per server")
        axis.set_ylabel("seconds per decode step (ms)")
        axis.set_title(f"fitted decode curve ({decode.episodes:,} episodes)")
        axis.legend()
        return lambda: None

    return draw


def _binned_medians(running: np.ndarray, values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The median of `values` in each quantile bin of `running` (bins of one value merge)."""
    edges = np.unique(np.quantile(running, np.linspace(0.0, 1.0, BINS + 1)))
    if len(edges) < 2:
        return np.array([running.mean()]), np.array([np.median(values)])
    index = np.clip(np.searchsorted(edges, running, side="right") - 1, 0, len(edges) - 2)
    kept = [i for i in range(len(edges) - 1) if np.any(index == i)]
    centres = np.array([np.median(running[index == i]) for i in kept])
    return centres, np.array([np.median(values[index == i]) for i in kept])
