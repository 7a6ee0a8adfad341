"""The readable report of `simulate` and `whatif`: one run, or policies side by side.

It renders the plain `simulate --json` object (the replay summary plus the simulator's
metrics), so it needs neither the deciders nor the replay package: a report is a view.
Durations are in the unit that fits each (`cli.output.duration`); the trained-episode rate
is per the unit of the shortest run's length (`cli.output.rate_unit`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from rich.console import Console
from rich.table import Table

from rolloutlog.cli.output import DURATION_UNITS, Unit, duration, per_unit, rate_unit

Row = tuple[str, Callable[[Mapping[str, Any]], str]]


def _number(key: str, digits: int = 0) -> Callable[[Mapping[str, Any]], str]:
    def show(run: Mapping[str, Any]) -> str:
        value = run.get(key)
        return "–" if value is None else f"{value:,.{digits}f}"

    return show


def _duration(key: str) -> Callable[[Mapping[str, Any]], str]:
    return lambda run: duration(run[key])


def _percent(key: str) -> Callable[[Mapping[str, Any]], str]:
    return lambda run: "–" if run.get(key) is None else f"{100.0 * run[key]:.1f}%"


def _wasted(run: Mapping[str, Any]) -> str:
    total, wasted = run["rollout_seconds_total"], run["rollout_seconds_wasted"]
    share = f" ({100.0 * wasted / total:.1f}%)" if total else ""
    return f"{duration(wasted)}{share}"


def _discarded(run: Mapping[str, Any]) -> str:
    """The count, with its interval where `whatif` gives one (`discarded_interval`)."""
    shown = _number("finished_rollouts_discarded")(run)
    interval = run.get("discarded_interval")
    return shown if interval is None else f"{shown} (95%: {interval[0]:,}–{interval[1]:,})"


def _violations(run: Mapping[str, Any]) -> str:
    violations = run.get("invariant_violations")
    return "not checked" if violations is None else f"{len(violations):,}"


def _cancelled(reason: str) -> Callable[[Mapping[str, Any]], str]:
    return lambda run: f"{run['episodes_cancelled'].get(reason, 0):,}"


def _rate(unit: Unit) -> Callable[[Mapping[str, Any]], str]:
    def show(run: Mapping[str, Any]) -> str:
        value = run.get("trained_episodes_per_hour")
        return "–" if value is None else per_unit(value, unit)

    return show


TIME_ROW, RATE_ROW = "virtual time", "trained episodes / hour"  # their labels vary
REQUEUED_ROW = "groups requeued"  # shown when a run requeues (tinker, slime-lag)
ROWS: tuple[Row, ...] = (
    ("steps shipped", _number("steps_shipped")),
    ("run finished", lambda run: run.get("run_finished") or "unfinished"),  # a torn log
    (TIME_ROW, _duration("virtual_seconds")),
    ("episodes dispatched", _number("episodes_dispatched")),
    ("episodes trained", _number("episodes_trained")),
    (RATE_ROW, _rate(DURATION_UNITS[0])),
    ("trainer idle", _percent("trainer_idle_fraction")),
    ("rollout time, total", _duration("rollout_seconds_total")),
    ("rollout time, wasted", _wasted),
    ("finished rollouts discarded", _discarded),
    ("dropped stale (sink)", _number("episodes_dropped_stale")),
    ("cancelled stale (dispatcher)", _cancelled("stale")),
    ("cancelled overload", _cancelled("overload")),
    ("failed", _number("episodes_failed")),
    ("late arrivals", _number("episodes_late")),
    ("partial groups", _number("groups_partial")),
    (REQUEUED_ROW, _number("groups_requeued")),
    ("mean trained age", _number("mean_trained_age", 2)),
    ("  of it in flight", _number("off_policy/in_flight/mean", 2)),
    ("  of it in queue", _number("off_policy/in_queue/mean", 2)),
    ("max trained age", _number("max_trained_age")),
    ("trained length ratio", _number("trained_length_ratio", 3)),
    ("trained difficulty ratio", _number("trained_difficulty_ratio", 3)),
    ("invariant violations", _violations),
)


def report_table(
    runs: Mapping[str, Mapping[str, Any]], title: str, *, time_label: str = TIME_ROW
) -> Table:
    """A table with one column per run (policy), one row per metric; `time_label` names
    the run's length (`whatif`'s recorded column is on the log's clock, not virtual)."""
    unit = rate_unit(run.get("virtual_seconds") for run in runs.values())
    table = Table(title=title, title_justify="left")
    table.add_column("metric")
    for name in runs:
        table.add_column(name, justify="right")
    requeues = any(run.get("groups_requeued") for run in runs.values())
    for label, show in ROWS:
        if label == REQUEUED_ROW and not requeues:
            continue
        if label == RATE_ROW:
            label, show = f"trained episodes / {unit[1]}", _rate(unit)
        table.add_row(time_label if label == TIME_ROW else label, *map(show, runs.values()))
    return table


def age_histogram_line(run: Mapping[str, Any]) -> str:
    """Trained episodes by rollout age, as `age:count` pairs."""
    histogram = run.get("trained_age_histogram", {})
    return "  ".join(f"{age}:{count:,}" for age, count in histogram.items()) or "none"


def print_report(
    runs: Mapping[str, Mapping[str, Any]],
    title: str,
    console: Console,
    *,
    time_label: str = TIME_ROW,
) -> None:
    """Print the table, then the trained-age histogram of every run."""
    console.print(report_table(runs, title, time_label=time_label))
    for name, run in runs.items():
        console.print(f"trained age histogram, {name}: {age_histogram_line(run)}")
        for violation in (run.get("invariant_violations") or [])[:5]:
            console.print(f"[red]invariant violation ({name}): {violation}[/red]")
