"""`rolloutlog sweep`: scenarios × presets × seeds × `--set` ranges, in parallel, one table.

The grid (`studies.grid`) runs on Ray when it is installed (the `sweep` extra; local
`ray.init()` by default, `--address` for a cluster), else in local processes
(`studies.engines`). Every cell becomes one row of one Parquet table
(`studies.results`); cells the table already holds are skipped, so an interrupted or
extended sweep resumes. An overview prints the configurations per scenario, and with
`--best` the best one under a constraint (`studies.best`); `--plot` draws the trade-off
(`studies.sweep_plot`).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import click
from rich.console import Console
from rich.table import Table

from rolloutlog.cli.bad_input import BadInput, command, os_problem, sole_writer
from rolloutlog.cli.options import (
    OUTPUT,
    check_option,
    file_option,
    plot_option,
    set_option,
    steps_option,
)
from rolloutlog.cli.output import duration_unit, in_unit, per_unit, rate_unit
from rolloutlog.cli.policies import bound_error, field_help, parse_policies
from rolloutlog.cli.progress import progress
from rolloutlog.core.config import ConfigError
from rolloutlog.core.presets import NAMED
from rolloutlog.events.errors import LogError
from rolloutlog.runtime.sim.scenario import scenario_names
from rolloutlog.runtime.sim.simulation import SimulationBoundError
from rolloutlog.studies.best import (
    BestSyntaxError,
    Configuration,
    Objective,
    best_per_scenario,
    configurations,
    metric_columns,
    parse_best,
    require_bound_presets,
)
from rolloutlog.studies.engines import Engine, EngineUnavailable, ray_installed, run_cells
from rolloutlog.studies.grid import MAX_CELLS, Cell, expand, parse_seeds, parse_set_ranges
from rolloutlog.studies.results import (
    probe_row,
    read_rows,
    require_kinds,
    require_same_scenarios,
    require_writable,
    row_key,
    setting_columns,
    sorted_rows,
    write_rows,
)
from rolloutlog.studies.sweep_plot import label, plot_sweep

SAVE_EVERY_S = 10.0
PARQUET_MAGIC = b"PAR1"  # a Parquet file opens (and ends) with it


@command("sweep")
@click.option(
    "--scenario",
    "scenarios",
    multiple=True,
    default=("default",),
    show_default=True,
    help=f"A built-in ({', '.join(scenario_names())}) or a TOML file; repeatable.",
)
@click.option(
    "--compare",
    metavar="P1,P2,...",
    help=f"Policy presets ({', '.join(NAMED)}, or BASE+RULE+...; {field_help()}; default: "
    "the scenario's).",
)
@click.option("--seeds", metavar="0-4", help="Seeds: 0-4, 0,3,7 (default: the scenario's).")
@set_option(
    "ranges",
    "KEY=V1,V2,...",
    "Values of run.KEY / world.KEY (or an unambiguous KEY) to sweep; repeatable.",
)
@steps_option("Batches to ship per cell.")
@click.option(
    "--workers",
    type=click.IntRange(min=1),
    help="Cells at once on this machine (default: its CPU count).",
)
@click.option("--address", metavar="ADDR", help="Run on this Ray cluster.")
@click.option(
    "--engine",
    type=click.Choice(["auto", "ray", "processes"]),
    default="auto",
    show_default=True,
    help="auto: Ray when installed (the sweep extra), else local processes.",
)
@file_option(
    "-o",
    "--output",
    required=True,
    help="The results table (Parquet); cells it already holds are skipped.",
    kind=OUTPUT,
)
@plot_option("Draw trained/h against discarded rollouts per scenario to this figure.")
@click.option(
    "--best",
    metavar="EXPR",
    help="Name the best configuration per scenario, e.g. "
    "'max trained_per_hour where discarded <= 0.25*per-episode'.",
)
@click.option(
    "--max-cells",
    type=click.IntRange(min=1),
    default=MAX_CELLS,
    show_default=True,
    help="Refuse a larger grid before running any cell (a typo like --seeds 0-100000000).",
)
@check_option("Check the invariants on every event of every cell.")
def sweep_command(
    scenarios: tuple[str, ...],
    compare: str | None,
    seeds: str | None,
    ranges: tuple[str, ...],
    steps: int | None,
    workers: int | None,
    address: str | None,
    engine: str,
    output: Path,
    plot: Path | None,
    best: str | None,
    max_cells: int,
    check: bool,
) -> None:
    """Run a grid of simulations in parallel and collect every report in one Parquet table."""
    if workers is not None and address is not None:
        raise click.UsageError("--workers and --address exclude each other")
    if output.suffix.lower() != ".parquet":
        raise BadInput(f"-o {output}: the results table is Parquet: name it NAME.parquet")
    chosen = _engine(engine, address)
    presets = None if compare is None else parse_policies(compare, "--compare")
    try:
        cells = expand(
            scenarios,
            presets,
            parse_seeds(seeds, max_cells) if seeds else None,
            parse_set_ranges(ranges),
            steps,
            check=check,
            most_cells=max_cells,
        )
    except ConfigError as error:
        raise click.UsageError(str(error)) from error
    try:
        sample = probe_row(cells[0])
    except SimulationBoundError as error:
        raise bound_error(cells[0].scenario(), error) from error
    with sole_writer(output):  # read, run and saved by this sweep alone
        rows = _table(output, cells, sample)
        objective = None if best is None else _objective(best, cells, sample)
        keys = setting_columns([*rows, *(dict(c.settings) for c in cells)])
        finished = {row_key(row, keys) for row in rows}
        to_run = [cell for cell in cells if cell.key(keys) not in finished]
        errors = Console(stderr=True)
        errors.print(
            f"sweep: {len(cells)} cells, {len(cells) - len(to_run)} already in {output}, "
            f"running {len(to_run)} on {chosen}"
        )
        _run(to_run, rows, output, chosen, workers or os.cpu_count() or 1, address)
    grid_rows = _grid_rows(rows, cells, keys)
    found = configurations(grid_rows, keys)
    title = f"sweep of {len(cells)} cells: {', '.join(dict.fromkeys(c.name for c in cells))}"
    if plot is not None:
        try:
            plot_sweep(found, plot, title)
        except (OSError, RuntimeError, LogError) as error:
            raise BadInput(f"--plot {plot}: {os_problem(error, plot)}") from error
    console = Console()
    console.print(_overview(found, title))
    if objective is not None:
        _print_best(objective, found, console)


def _table(output: Path, cells: Sequence[Cell], sample: dict[str, Any]) -> list[dict[str, Any]]:
    """The rows already in the results table, checked before any cell runs: that its folder
    (`OUTPUT` checks that it exists) takes a new table (else every result would be lost at
    the first save), and that its rows hold the kinds of value and the scenarios this grid
    writes."""
    try:
        require_writable(output)
    except OSError as error:
        raise BadInput(
            f"-o {output}: cannot write the table in {output.parent} ({error.strerror})"
        ) from error
    if output.is_file() and not _opens_as_parquet(output):
        raise BadInput(f"-o {output}: not a sweep results table (not a Parquet file)")
    try:
        rows = read_rows(output)
        require_kinds(rows, sample)
        require_same_scenarios(rows, cells)
    except (OSError, ValueError) as error:
        raise BadInput(f"-o {output}: {os_problem(error, output)}") from error
    return rows


def _opens_as_parquet(path: Path) -> bool:
    with path.open("rb") as file:
        return file.read(len(PARQUET_MAGIC)) == PARQUET_MAGIC


def _objective(text: str, cells: Sequence[Cell], sample: dict[str, Any]) -> Objective:
    """`--best`, parsed and checked against the grid before any cell runs: its metrics are
    columns of a row (`sample`), its PRESET bounds presets the grid runs."""
    try:
        objective = parse_best(text, metric_columns(sample))
        require_bound_presets(objective, {(c.name, c.preset, c.steps, c.settings) for c in cells})
    except BestSyntaxError as error:
        raise BadInput(str(error)) from error
    return objective


def _engine(engine: str, address: str | None) -> Engine:
    if address is not None:
        if engine == "processes":
            raise click.UsageError("--address runs on a Ray cluster, not in local processes")
        engine = "ray"
    if engine == "auto":
        return "ray" if ray_installed() else "processes"
    return "ray" if engine == "ray" else "processes"


def _run(
    cells: Sequence[Cell],
    rows: list[dict[str, Any]],
    output: Path,
    engine: Engine,
    workers: int,
    address: str | None,
) -> None:
    """Run the cells, saving the table every few seconds and at the end (or on failure)."""
    if not cells:
        return
    known, saved = len(rows), time.monotonic()
    with progress("cell", len(cells), first=engine) as update:

        def on_row(row: dict[str, Any]) -> None:
            nonlocal saved
            rows.append(row)
            update(len(rows) - known, engine)
            if time.monotonic() - saved > SAVE_EVERY_S:
                write_rows(output, rows)
                saved = time.monotonic()

        try:
            run_cells(cells, on_row, engine=engine, workers=workers, address=address)
        except EngineUnavailable as error:
            raise BadInput(str(error)) from error
        except SimulationBoundError as error:  # from Ray, the task's error wraps it
            raise BadInput(f"a cell: {getattr(error, 'cause', error)}") from error
        finally:
            if len(rows) > known:
                try:
                    write_rows(output, rows)
                except OSError as error:
                    raise BadInput(f"-o {output}: {os_problem(error, output)}") from error


def _grid_rows(
    rows: Sequence[dict[str, Any]], cells: Sequence[Cell], keys: Sequence[str]
) -> list[dict[str, Any]]:
    """The rows of this command's grid (the table may hold other cells from earlier runs)."""
    wanted = {cell.key(keys) for cell in cells}
    return [row for row in sorted_rows(rows) if row_key(row, keys) in wanted]


def _overview(found: Sequence[Configuration], title: str) -> Table:
    """One line per configuration. No column cuts its text short (a word longer than its
    column folds onto the next line), so that two configurations that differ in one
    setting read differently at any terminal width."""
    unit = rate_unit(config.means.get("virtual_seconds") for config in found)
    wasted = [config.means.get("rollout_seconds_wasted") or 0.0 for config in found]
    waste_unit = duration_unit(max(wasted, default=0.0))  # one unit for the column
    table = Table(title=title, title_justify="left")
    for name in ("scenario", "configuration"):
        table.add_column(name, overflow="fold")
    for name in ("seeds", f"trained / {unit[0]}", "discarded", f"wasted ({waste_unit[0]})"):
        table.add_column(name, justify="right", overflow="fold")
    for config in found:
        table.add_row(
            config.scenario,
            label(config),
            str(config.seeds),
            _figure(config, "trained_episodes_per_hour", lambda v: per_unit(v, unit)),
            _figure(config, "finished_rollouts_discarded", "{:,.1f}".format),
            _figure(config, "rollout_seconds_wasted", lambda v: in_unit(v, waste_unit)),
        )
    return table


def _figure(config: Configuration, key: str, show: Callable[[float], str]) -> str:
    value = config.means.get(key)
    return "–" if value is None else show(value)


def _print_best(objective: Objective, found: Sequence[Configuration], console: Console) -> None:
    console.print(f"best: {objective.describe()}")
    for choice in best_per_scenario(found, objective):
        if choice.best is None:
            console.print(
                f"  {choice.scenario}: none of {choice.candidates} configurations qualifies"
            )
            continue
        figures = ", ".join(
            f"{key} {choice.best.means[key]:,.4g}"
            for key in dict.fromkeys([objective.metric, *(c.metric for c in objective.conditions)])
            if choice.best.means.get(key) is not None
        )
        seeds = choice.best.seeds
        console.print(f"  {choice.scenario}: {label(choice.best)} ({figures}; {seeds} seeds)")
