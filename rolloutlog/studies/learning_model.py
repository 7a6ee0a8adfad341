"""The learning model: how long a policy takes to reach a held-out reward, from a run's report.

Throughput alone ranks policies by trained episodes per hour, as if every trained episode
taught the same. The model says how many trained episodes a policy needs to reach the
held-out reward R of the live digit task, given what it trains:

    log episodes_needed = intercept + per_age · mean trained age + per_length · (length ratio − 1)

(`mean_trained_age`: versions between an episode's sampling and its training;
`trained_length_ratio`: the mean trained rollout's length over the dispatched one's, below 1
when a policy drops or cuts the long, hard rollouts), and the predicted time to R is that
count over the run's trained episodes per second:

    time to R = episodes_needed / (trained_episodes_per_hour / 3600).

It is fitted on the live learning study's staleness sweep (`benchmarks/learning.py`, the
fit and its leave-one-setting-out test in `benchmarks/learning_report.py`), so its episode
counts are those of that task and model: across policies on one world it ranks, within
the error it was tested to (`LearningModel.loso_error`); its absolute times are for that
task only. `simulate --compare` and `whatif` rank by it with `--rank-by time-to-reward`
once a fit holds (`FITTED`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final

import attrs
import numpy as np


@attrs.frozen(kw_only=True)
class LearningPoint:
    """One setting of the sweep: its trained age and task mix, and episodes to R."""

    mean_age: float
    length_ratio: float
    episodes: float


@attrs.frozen(kw_only=True)
class LearningModel:
    """`log episodes = intercept + per_age·age + per_length·(ratio − 1)` (module docstring)."""

    target: float  # the held-out greedy reward R
    intercept: float
    per_age: float
    per_length: float
    loso_error: float  # median |predicted − measured| / measured time to R, leave one out
    loso_spearman: float  # rank correlation of predicted and measured time to R, the same
    settings: int  # settings the fit and its test had
    source: str  # what it was fitted on

    def episodes_needed(self, mean_age: float, length_ratio: float) -> float:
        return math.exp(
            self.intercept + self.per_age * mean_age + self.per_length * (length_ratio - 1.0)
        )

    def seconds_to_reward(self, report: Mapping[str, Any]) -> float | None:
        """Predicted seconds of the run's clock to R; None without the figures it needs
        (nothing trained)."""
        rate = report.get("trained_episodes_per_hour")
        age = report.get("mean_trained_age")
        ratio = report.get("trained_length_ratio")
        if not rate or age is None or ratio is None:
            return None
        return self.episodes_needed(float(age), float(ratio)) / (float(rate) / 3600.0)


def fit(points: Sequence[LearningPoint], target: float) -> LearningModel:
    """Least squares of log episodes on the age and the length ratio; with fewer than
    four points, or ages or ratios that do not vary, the figure that cannot be identified
    gets no weight (0) rather than a guess. The error fields are left at NaN: `loso` fills
    them."""
    if not points:
        raise ValueError("fit: no settings to fit")
    columns = [[1.0] * len(points)]
    for values in ([p.mean_age for p in points], [p.length_ratio - 1.0 for p in points]):
        varies = len(points) >= 4 and max(values) - min(values) > 1e-9
        columns.append(values if varies else [0.0] * len(points))
    design = np.array(columns).T
    logs = np.log([p.episodes for p in points])
    solution = np.linalg.lstsq(design, logs, rcond=None)[0]
    intercept, per_age, per_length = (float(x) for x in solution)
    return LearningModel(
        target=target, intercept=intercept, per_age=per_age, per_length=per_length,
        loso_error=math.nan, loso_spearman=math.nan, settings=len(points), source="",
    )  # fmt: skip


def constant(points: Sequence[LearningPoint], target: float) -> LearningModel:
    """Throughput alone: every setting needs the geometric mean of the others' episodes."""
    return attrs.evolve(
        fit([attrs.evolve(p, mean_age=0.0, length_ratio=1.0) for p in points], target),
        per_age=0.0,
        per_length=0.0,
    )


def loso(
    points: Sequence[LearningPoint],
    rates: Sequence[float],
    measured: Sequence[float],
    target: float,
    fitter: Callable[[Sequence[LearningPoint], float], LearningModel] = fit,
) -> tuple[list[float], float, float]:
    """Leave one setting out: fit on the others (`fitter`), predict the left-out one's time
    to R as its episodes needed over its measured `rates` (episodes per second); the
    predictions, their median absolute relative error against `measured` and Spearman."""
    predicted = []
    for index, point in enumerate(points):
        model = fitter([p for i, p in enumerate(points) if i != index], target)
        predicted.append(model.episodes_needed(point.mean_age, point.length_ratio) / rates[index])
    errors = [abs(p - m) / m for p, m in zip(predicted, measured, strict=True)]
    return predicted, float(np.median(errors)), spearman(predicted, measured)


def spearman(xs: Sequence[float], ys: Sequence[float]) -> float:
    """Spearman's rank correlation of two samples (average ranks for ties); NaN under 3
    points or without spread."""
    if len(xs) != len(ys):
        raise ValueError(f"spearman: {len(xs)} values against {len(ys)}")
    if len(xs) < 3:
        return math.nan
    first, second = ranks(xs), ranks(ys)
    if np.std(first) == 0 or np.std(second) == 0:
        return math.nan
    return float(np.corrcoef(first, second)[0, 1])


def ranks(values: Sequence[float]) -> list[float]:
    """Each value's rank from 0, ties at their mean rank (as Spearman's correlation wants)."""
    order = sorted(range(len(values)), key=lambda i: values[i])
    ranks = [0.0] * len(values)
    start = 0
    while start < len(order):
        end = start
        while end + 1 < len(order) and values[order[end + 1]] == values[order[start]]:
            end += 1
        for k in range(start, end + 1):
            ranks[order[k]] = (start + end) / 2.0
        start = end + 1
    return ranks


# None: the sweep's fit (benchmarks/RESULTS.md § learning.py, the staleness sweep) did not
# beat throughput alone at ranking leaving one cell out of 18 (rank correlation 0.57 against
# 0.61, median error 17% against 23%, at held-out reward 0.15), so `--rank-by time-to-reward` is
# refused; a fit that does is set here with its test's figures.
FITTED: Final[LearningModel | None] = None
