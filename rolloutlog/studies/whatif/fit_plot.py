"""The fitted decode curve beside the log's points: the lead panel of `whatif --plot`.

Each completed episode is a point at the running requests per server during its life,
its seconds per decoded token once the fitted prefill, environment and colocated slowdown
are taken out; the line is the fitted `step(n)`, drawn out to the most any simulated
policy may run, with the log's range shaded, so an extrapolation shows as a line past it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from rolloutlog.studies.whatif.shared_fit import SharedFit

CURVE_POINTS = 200


def decode_panel(fit: SharedFit, reach: float) -> Callable[[Any], Callable[[], object]]:
    """A lead panel (`runtime.sim.plot.plot_runs`): the curve out to `reach` running."""

    def draw(axis: Any) -> Callable[[], object]:
        rows, decode = fit.rows, fit.decode
        decoding = rows.tokens * (1.0 + decode.coupling * rows.training)
        kept = decoding > 0
        left = rows.seconds - decode.overhead_s - decode.prefill_s_per_token * rows.prompt
        per_token = left[kept] / decoding[kept]
        axis.scatter(rows.running[kept], per_token * 1e3, s=4, alpha=0.25, label="log: episodes")
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
