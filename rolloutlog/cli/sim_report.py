"""The readable report of `simulate` and `whatif`: one run, or policies side by side.

It renders the plain `simulate --json` object (the replay summary plus the simulator's
metrics), so it needs neither the deciders nor the replay package: a report is a view.
Durations are in the unit that fits each (`cli.output.duration`); the trained-episode rate
is per the unit of the shortest run's length (`cli.output.rate_unit`). Up to `TURN_AFTER`
runs, one column per run and every figure a row; more (the `field` set) would not fit a
terminal that way, so the table turns: one row per run, the figures of `COLUMNS`.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any

from rich import box
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


def _wasted_share(run: Mapping[str, Any]) -> str:
    total, wasted = run["rollout_seconds_total"], run["rollout_seconds_wasted"]
    return f"{100.0 * wasted / total:.1f}%" if total else "–"


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
WAITS_ROW = "ship waits"  # shown when a run's rule waits (tinker-822)
WITHHELD_ROW = "  of it withheld"  # shown when a run withholds (prime-rl-withhold)
EVICTED_ROW = "evicted (full queue)"  # shown when a bounded queue evicts (pipelinerl)
LEFTOVER_ROWS = ("aborted leftovers", "  finished, dropped")  # when a run aborts (slime)
REDUNDANT_ROW = "cancelled redundant"  # shown when a run has redundant members (roll-flash)
# shown when a run segments episodes (weight_update = interrupt, recycle): its per-token split
PARTIAL_ROWS = ("resumed episodes (partial)", "  largest version span", "mean trained token age")


def _segments(run: Mapping[str, Any]) -> bool:
    return "trained_token_age_histogram" in run


def mean_token_age(run: Mapping[str, Any]) -> str:
    """The mean age of the trained completion tokens (`trained_token_age_histogram`)."""
    histogram = run.get("trained_token_age_histogram") or {}
    tokens = sum(histogram.values())
    if not tokens:
        return "–"
    return f"{sum(int(age) * n for age, n in histogram.items()) / tokens:.2f}"


def token_age_line(run: Mapping[str, Any]) -> str:
    """Trained completion tokens by the age of their version, as `age:share` pairs."""
    histogram = run.get("trained_token_age_histogram") or {}
    tokens = sum(histogram.values())
    shares = (f"{age}:{100.0 * n / tokens:.1f}%" for age, n in histogram.items())
    return "  ".join(shares) if tokens else "none"


MASKED_ROWS = ("trained tokens, gradient", "trained tokens, masked")  # when a run masks


def _waits(run: Mapping[str, Any]) -> str:
    waits = run.get("ship_waits")
    if waits is None:
        return "–"
    return f"{waits:,} ({duration(run['ship_wait_seconds'])})"


# Rows shown only when some run has the figure (a rule that no other preset has).
OPTIONAL_ROWS: dict[str, Callable[[Mapping[str, Any]], bool]] = {
    REQUEUED_ROW: lambda run: bool(run.get("groups_requeued")),
    WAITS_ROW: lambda run: "ship_waits" in run,
    WITHHELD_ROW: lambda run: "episodes_withheld" in run,
    EVICTED_ROW: lambda run: bool(run.get("episodes_evicted")),
    **dict.fromkeys(LEFTOVER_ROWS, lambda run: "episodes_dropped_leftover" in run),
    REDUNDANT_ROW: lambda run: bool(run["episodes_cancelled"].get("redundant")),
    **dict.fromkeys(PARTIAL_ROWS, _segments),
    **dict.fromkeys(MASKED_ROWS, lambda run: "tokens_trained_masked" in run),
}
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
    (WITHHELD_ROW, _number("episodes_withheld")),
    ("cancelled stale (dispatcher)", _cancelled("stale")),
    ("cancelled overload", _cancelled("overload")),
    (REDUNDANT_ROW, _cancelled("redundant")),
    ("failed", _number("episodes_failed")),
    ("late arrivals", _number("episodes_late")),
    ("partial groups", _number("groups_partial")),
    (REQUEUED_ROW, _number("groups_requeued")),
    (WAITS_ROW, _waits),
    (EVICTED_ROW, _number("episodes_evicted")),
    (LEFTOVER_ROWS[0], _cancelled("leftover")),
    (LEFTOVER_ROWS[1], _number("episodes_dropped_leftover")),
    (MASKED_ROWS[0], _number("tokens_trained_gradient")),
    (MASKED_ROWS[1], _number("tokens_trained_masked")),
    ("mean trained age", _number("mean_trained_age", 2)),
    ("  of it in flight", _number("off_policy/in_flight/mean", 2)),
    ("  of it in queue", _number("off_policy/in_queue/mean", 2)),
    ("max trained age", _number("max_trained_age")),
    (PARTIAL_ROWS[0], _percent("partial_ratio")),
    (PARTIAL_ROWS[1], _number("largest_version_span")),
    (PARTIAL_ROWS[2], mean_token_age),
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
    for label, show in ROWS:
        shown = OPTIONAL_ROWS.get(label)
        if shown is not None and not any(shown(run) for run in runs.values()):
            continue
        if label == RATE_ROW:
            label, show = f"trained episodes / {unit[1]}", _rate(unit)
        table.add_row(time_label if label == TIME_ROW else label, *map(show, runs.values()))
    return table


TURN_AFTER = 4  # more runs than this: one row per run
# The turned table's figures, one column each; a new figure is one line here. The rate's
# header names its unit (`RATE_ROW`, as in the full table).
COLUMNS: tuple[Row, ...] = (
    (RATE_ROW, _rate(DURATION_UNITS[0])),
    ("discarded", _discarded),
    ("wasted", _wasted_share),
    ("idle", _percent("trainer_idle_fraction")),
    ("mean age", _number("mean_trained_age", 2)),
    ("max age", _number("max_trained_age")),
    ("length ratio", _number("trained_length_ratio", 3)),
    ("difficulty ratio", _number("trained_difficulty_ratio", 3)),
    ("partial", _percent("partial_ratio")),
    ("token age", mean_token_age),
)
# Columns shown only when some run has the figure, as `OPTIONAL_ROWS`.
OPTIONAL_COLUMNS: dict[str, Callable[[Mapping[str, Any]], bool]] = {
    "partial": _segments,
    "token age": _segments,
}


def turned_tables(
    runs: Mapping[str, Mapping[str, Any]], title: str, console: Console
) -> list[Table]:
    """One row per run (policy), one column per figure of `COLUMNS`: a field's worth of
    presets at 80 columns. A policy name wider than `NAME_FOLD` may fold; figures that
    would not fit the console beside the others go to a next table (the policy column
    repeated), so that no line is wider than the console and no figure is cut."""
    unit = rate_unit(run.get("virtual_seconds") for run in runs.values())
    columns = [
        (f"trained / {unit[0]}", _rate(unit)) if label == RATE_ROW else (label, show)
        for label, show in COLUMNS
        if label not in OPTIONAL_COLUMNS or any(map(OPTIONAL_COLUMNS[label], runs.values()))
    ]
    unbounded = console.options.update_width(10 * console.width)
    chunks: list[list[Row]] = [[]]
    for column in columns:
        wider = _turned(runs, None, [*chunks[-1], column], name_width=NAME_FOLD)
        if chunks[-1] and console.measure(wider, options=unbounded).maximum > console.width:
            chunks.append([column])
        else:
            chunks[-1].append(column)
    tables = []
    for n, chunk in enumerate(chunks):
        excess = console.measure(_turned(runs, None, chunk), options=unbounded).maximum
        room = max(1, max(len(name) for name in runs) - (excess - console.width))
        tables.append(_turned(runs, title if n == 0 else None, chunk, name_width=room))
    return tables


NAME_FOLD = 12  # `per-episode+` whole: a policy name folds before its `+RULE`s if it must


def _folded(name: str, width: int) -> str:
    """`name` in lines of at most `width`, broken before a `+` or after a `-` where it must
    break (`verl-fully-` over `async`; the table folds a part longer than that)."""
    lines = [""]
    for part in re.split(r"(?=\+)|(?<=-)", name):
        if lines[-1] and len(lines[-1]) + len(part) > width:
            lines.append(part)
        else:
            lines[-1] += part
    return "\n".join(lines)


def _turned(
    runs: Mapping[str, Mapping[str, Any]],
    title: str | None,
    columns: list[Row],
    *,
    name_width: int | None = None,
) -> Table:
    table = Table(
        title=title,
        title_justify="left",
        box=box.SIMPLE_HEAD,
        show_edge=False,
        padding=(0, 1, 0, 0),
    )
    table.add_column("policy", overflow="fold", max_width=name_width)
    for label, _ in columns:  # a header's first word over the rest
        table.add_column(label.replace(" ", "\n", 1), justify="right", no_wrap=True)
    for name, run in runs.items():
        shown = name if name_width is None else _folded(name, name_width)
        table.add_row(shown, *(show(run) for _, show in columns))
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
    """Print the table (turned for more than `TURN_AFTER` runs), then the trained-age
    histogram of every run (and the shares of its trained tokens by age, where it has
    segments)."""
    if len(runs) > TURN_AFTER:
        for table in turned_tables(runs, title, console):
            console.print(table)
    else:
        console.print(report_table(runs, title, time_label=time_label))
    for name, run in runs.items():
        console.print(f"trained age histogram, {name}: {age_histogram_line(run)}")
        if _segments(run):
            console.print(f"trained token ages, {name}: {token_age_line(run)}")
        for violation in (run.get("invariant_violations") or [])[:5]:
            console.print(f"[red]invariant violation ({name}): {violation}[/red]")
