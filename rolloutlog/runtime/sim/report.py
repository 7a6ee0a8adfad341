"""The readable report of `simulate`: one run, or policies side by side.

It renders the plain `simulate --json` object (the replay summary plus the simulator's
metrics), so it needs neither the deciders nor the replay package: a report is a view.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from rich.console import Console
from rich.table import Table

Row = tuple[str, Callable[[Mapping[str, Any]], str]]


def _number(key: str, digits: int = 0) -> Callable[[Mapping[str, Any]], str]:
    def show(run: Mapping[str, Any]) -> str:
        value = run.get(key)
        return "–" if value is None else f"{value:,.{digits}f}"

    return show


def _hours(key: str) -> Callable[[Mapping[str, Any]], str]:
    return lambda run: f"{run[key] / 3600.0:,.2f} h"


def _percent(key: str) -> Callable[[Mapping[str, Any]], str]:
    return lambda run: "–" if run.get(key) is None else f"{100.0 * run[key]:.1f}%"


def _wasted(run: Mapping[str, Any]) -> str:
    total, wasted = run["rollout_seconds_total"], run["rollout_seconds_wasted"]
    share = f" ({100.0 * wasted / total:.1f}%)" if total else ""
    return f"{wasted / 3600.0:,.1f} h{share}"


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


ROWS: tuple[Row, ...] = (
    ("steps shipped", _number("steps_shipped")),
    ("run finished", lambda run: str(run.get("run_finished"))),
    ("virtual time", _hours("virtual_seconds")),
    ("episodes dispatched", _number("episodes_dispatched")),
    ("episodes trained", _number("episodes_trained")),
    ("trained episodes / hour", _number("trained_episodes_per_hour")),
    ("trainer idle", _percent("trainer_idle_fraction")),
    ("rollout time, total", lambda run: f"{run['rollout_seconds_total'] / 3600.0:,.1f} h"),
    ("rollout time, wasted", _wasted),
    ("finished rollouts discarded", _discarded),
    ("dropped stale (sink)", _number("episodes_dropped_stale")),
    ("cancelled stale (dispatcher)", _cancelled("stale")),
    ("cancelled overload", _cancelled("overload")),
    ("failed", _number("episodes_failed")),
    ("late arrivals", _number("episodes_late")),
    ("partial groups", _number("groups_partial")),
    ("mean trained age", _number("mean_trained_age", 2)),
    ("  of it in flight", _number("off_policy/in_flight/mean", 2)),
    ("  of it in queue", _number("off_policy/in_queue/mean", 2)),
    ("max trained age", _number("max_trained_age")),
    ("trained length ratio", _number("trained_length_ratio", 3)),
    ("trained difficulty ratio", _number("trained_difficulty_ratio", 3)),
    ("invariant violations", _violations),
)


def report_table(runs: Mapping[str, Mapping[str, Any]], title: str) -> Table:
    """A table with one column per run (policy), one row per metric."""
    table = Table(title=title, title_justify="left")
    table.add_column("metric")
    for name in runs:
        table.add_column(name, justify="right")
    for label, show in ROWS:
        table.add_row(label, *(show(run) for run in runs.values()))
    return table


def age_histogram_line(run: Mapping[str, Any]) -> str:
    """Trained episodes by rollout age, as `age:count` pairs."""
    histogram = run.get("trained_age_histogram", {})
    return "  ".join(f"{age}:{count:,}" for age, count in histogram.items()) or "none"


def print_report(runs: Mapping[str, Mapping[str, Any]], title: str, console: Console) -> None:
    """Print the table, then the trained-age histogram of every run."""
    console.print(report_table(runs, title))
    for name, run in runs.items():
        console.print(f"trained age histogram, {name}: {age_histogram_line(run)}")
        for violation in (run.get("invariant_violations") or [])[:5]:
            console.print(f"[red]invariant violation ({name}): {violation}[/red]")
