"""`--rank-by` of `simulate --compare` and `whatif`: the policies in order, with why.

`throughput` orders them by trained episodes per hour; `time-to-reward` by the time the
learning model (`studies.learning_model`) predicts to its held-out reward, from each run's
throughput, mean trained age and trained length ratio, and states the model's tested error.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

import click
from rich.console import Console

from rolloutlog.cli.output import duration
from rolloutlog.studies.learning_model import FITTED, LearningModel

F = TypeVar("F", bound=Callable[..., Any])
RANKINGS = ("throughput", "time-to-reward")
PREDICTED_KEY = "predicted_seconds_to_reward"  # added to each run's JSON object


def rank_by_option() -> Callable[[F], F]:
    return click.option(
        "--rank-by",
        type=click.Choice(RANKINGS),
        default=None,
        callback=_held,
        help="Print the policies best first: by trained episodes per hour, or by the time the "
        "learning model predicts to its held-out reward (its tested error is printed).",
    )


def _held(context: click.Context, parameter: click.Parameter, value: str | None) -> str | None:
    """Refused before any run when no learning model has held its test."""
    if value == "time-to-reward" and learning_model() is None:
        raise click.BadParameter(NO_MODEL, context, parameter)
    return value


NO_MODEL = (
    "no learning model has held its test (benchmarks/RESULTS.md § learning.py); rank by throughput"
)


def learning_model() -> LearningModel | None:
    """The fitted model, read when a command runs (None: none has held its test)."""
    return FITTED


def ranking(
    runs: Mapping[str, Mapping[str, Any]], by: str, model: LearningModel | None
) -> tuple[list[str], dict[str, float | None]]:
    """The policies best first, and each one's predicted seconds to the model's reward
    (`time-to-reward`; empty for `throughput`). A run the model cannot price (nothing
    trained) ranks last."""
    if by == "throughput":
        rates = {name: run.get("trained_episodes_per_hour") or 0.0 for name, run in runs.items()}
        return sorted(runs, key=lambda name: -rates[name]), {}
    if model is None:
        raise click.UsageError(f"--rank-by time-to-reward: {NO_MODEL}")
    seconds = {name: model.seconds_to_reward(run) for name, run in runs.items()}
    return sorted(runs, key=lambda name: _last_if_none(seconds[name])), seconds


def _last_if_none(value: float | None) -> float:
    return math.inf if value is None else value


def print_ranking(
    runs: Mapping[str, Mapping[str, Any]],
    by: str,
    console: Console,
    model: LearningModel | None,
) -> None:
    order, seconds = ranking(runs, by, model)
    if by == "throughput" or model is None:
        console.print(f"ranked by trained episodes per hour: {', '.join(order)}")
        return
    shown = ", ".join(f"{name} ({_shown(seconds[name])})" for name in order)
    console.print(
        f"ranked by predicted time to held-out reward {model.target}: {shown}; the learning "
        f"model ({model.source}) was off by {100 * model.loso_error:.0f}% (median, leaving "
        f"each of {model.settings} settings out; rank correlation {model.loso_spearman:.2f})"
    )


def with_predictions(
    runs: Mapping[str, Mapping[str, Any]], by: str | None, model: LearningModel | None
) -> dict[str, dict[str, Any]]:
    """The runs' JSON objects, each with its predicted seconds to the model's reward under
    `--rank-by time-to-reward`, in ranked order under any `--rank-by`."""
    if by is None:
        return {name: dict(run) for name, run in runs.items()}
    order, seconds = ranking(runs, by, model)
    if by == "throughput":
        return {name: dict(runs[name]) for name in order}
    return {name: {**runs[name], PREDICTED_KEY: seconds[name]} for name in order}


def _shown(value: float | None) -> str:
    return "nothing trained" if value is None else duration(value)
