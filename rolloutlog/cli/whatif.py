"""`rolloutlog whatif`: what a recorded run would have cost under other staleness policies.

The world is fitted to the log (`studies.whatif`): by default the shared-inference world
(`studies.whatif.shared_fit`: servers, the decode curve, prefill, the KV capacity where the
log reaches it, the trainer), so that a policy that keeps more or fewer rollouts in flight
sees its rollouts slow down or speed up; with `--world replay`, the recorded durations
replayed. Each policy runs on it with `simulate`'s own `run_policies`, and the report puts
the recorded run's figures (measured the same way) beside them: the `simulate --compare`
table with a `recorded` column.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click
from rich.console import Console

from rolloutlog.cli.bad_input import BadInput, command, os_problem
from rolloutlog.cli.foreign import log_of
from rolloutlog.cli.options import (
    PLOT_HELP,
    SCENARIO_FILE,
    NamedPath,
    check_option,
    file_option,
    json_option,
    plot_option,
    seed_option,
    set_option,
    steps_option,
)
from rolloutlog.cli.output import emit_json, note_being_written, warn_torn_tail
from rolloutlog.cli.policies import field_help, parse_policies, run_shown
from rolloutlog.cli.progress import phase
from rolloutlog.cli.rank_by import (
    learning_model,
    print_ranking,
    rank_by_option,
    with_predictions,
)
from rolloutlog.cli.sim_report import print_report
from rolloutlog.core.config import ConfigError
from rolloutlog.core.errors import InconsistentLogError
from rolloutlog.events.errors import LogError
from rolloutlog.events.whole_file import written_whole
from rolloutlog.replay.fold import fold_events
from rolloutlog.replay.source import open_log
from rolloutlog.runs.simulate import policy_name
from rolloutlog.runtime.live.rollout_store import StoreError, read_store, store_path
from rolloutlog.runtime.sim.plot import plot_runs
from rolloutlog.runtime.sim.scenario import Scenario, parse_set_options
from rolloutlog.runtime.sim.scenario_toml import scenario_toml
from rolloutlog.runtime.sim.simulation import SimResult
from rolloutlog.studies.whatif import FittedRun, fit_log, recorded_report, with_overrides
from rolloutlog.studies.whatif.fit import FitError, collect
from rolloutlog.studies.whatif.fit_plot import decode_panel
from rolloutlog.studies.whatif.interval import RaceSample, discarded_interval, rate_interval
from rolloutlog.studies.whatif.shared_fit import (
    SharedFit,
    fit_shared,
    range_warnings,
    running_warnings,
    shared_scenario,
)

INTERVAL_KEY = "discarded_interval"  # added to each what-if's `simulate --json` object

Runs = dict[str, dict[str, Any]]
Series = dict[str, list[tuple[float, float]]]
WORLDS = ("shared", "replay")


def fit_recorded(
    log: Path, seed: int
) -> tuple[FittedRun, dict[str, Any], list[tuple[float, float]]]:
    """Fit LOG's world; the recorded run's `simulate --json` object and its waste series."""
    try:
        source = open_log(log)
        note_being_written(source, log)
        with phase(f"fitting a world to {log}"):
            fitted = fit_log(source.events(), seed=seed, name=log.stem)
            report, metrics = recorded_report(source.events(), fitted)
    except LogError as error:  # its message names the log
        raise BadInput(str(error)) from error
    except OSError as error:
        raise BadInput(f"{log}: {os_problem(error, log)}") from error
    except InconsistentLogError as error:  # the recorded run's fold: replay's words
        raise BadInput(f"{log}: {error}") from error
    except (FitError, ConfigError) as error:
        warn_torn_tail(source.torn_tail, log)  # a torn tail may hold what the fit lacks
        inconsistent = fold_events(source.events(), check_invariants=False).error
        if inconsistent is not None:  # the log contradicts itself: say where, as replay does
            raise BadInput(f"{log}: {inconsistent}") from error
        raise BadInput(f"{log}: cannot fit a world: {error}") from error
    warn_torn_tail(source.torn_tail, log)
    header = {
        "scenario": fitted.scenario.name,
        "policy": policy_name(fitted.scenario),
        "seed": fitted.scenario.seed,
        "log": str(log),
    }
    return fitted, {**header, **report}, list(metrics.wasted_series.points)


def recorded_servers(log: Path) -> int:
    """The inference servers of a `rolloutlog train` run (its rollout store's settings or
    URLs); 1 for a log without a store (one server, the CPU twin's default)."""
    try:
        meta = read_store(store_path(log)).meta
    except (StoreError, OSError, ValueError):
        return 1
    urls = meta.get("urls") or []
    settings = meta.get("settings") or {}
    return len(urls) if urls else int(settings.get("servers", 1))


def fit_shared_world(log: Path, fitted: FittedRun, servers: int) -> SharedFit:
    """The shared world fitted to LOG (already fitted as a trace: `fit_recorded`)."""
    try:
        return fit_shared(collect(open_log(log).events()), fitted, servers)
    except FitError as error:
        raise BadInput(
            f"{log}: cannot fit the shared world: {error} (--world replay replays the recorded "
            "durations)"
        ) from error


def fit_report(fit: SharedFit) -> dict[str, Any]:
    """The fit's parameters and the log's ranges, as JSON."""
    return {
        "parameters": [
            {"key": p.key, "value": p.value, "unit": p.unit, "basis": p.basis}
            for p in fit.parameters
        ],
        "ranges": [{"figure": r.figure, "low": r.low, "high": r.high} for r in fit.ranges],
        "r_squared": fit.decode.r_squared,
    }


def print_fit(fit: SharedFit, console: Console) -> None:
    """The fitted parameters, each with what of the log identifies it."""
    console.print(f"shared world fitted on {fit.decode.servers} server(s):")
    for parameter in fit.parameters:
        value = parameter.value
        shown = f"{value:.4g}" if isinstance(value, float) else str(value)
        console.print(f"  {parameter.key} = {shown} {parameter.unit}  ({parameter.basis})")
    console.print(f"  decode fit R² {fit.decode.r_squared:.2f}")


def run_whatif(
    base: Scenario,
    policies: list[str],
    *,
    quiet: bool = True,
    check: bool = False,
    races: RaceSample | None = None,
) -> tuple[Runs, Series]:
    """Run each policy on the fitted world `base`: `simulate --json` objects and waste series.

    Each object also has `discarded_interval`: the 95% interval of its finished rollouts
    discarded where that count rests on the late-arrival rate fitted from `races` (a
    policy that cuts stragglers), else None (`discarded_interval_for`).
    `check`: run the invariant checker on every event (as `simulate --check`); `quiet=False`
    shows each run's progress on stderr."""
    scenarios = {name: base.with_policy(name) for name in policies}
    runs = run_shown(scenarios, check=check, quiet=quiet)
    for name, report in runs.reports.items():
        report[INTERVAL_KEY] = discarded_interval_for(
            scenarios[name], report, runs.results[name], races
        )
    return runs.reports, runs.series


def discarded_interval_for(
    scenario: Scenario, report: dict[str, Any], result: SimResult, races: RaceSample | None
) -> list[int] | None:
    """The 95% interval of a what-if's discarded count, where it rests on the fitted rate.

    It does under straggler cuts: the policy cancels far more episodes in flight than the
    recorded log watched races, and nearly every discarded rollout is a lost race. Elsewhere
    the count is mostly stale drops, which the rate does not decide, and an interval from
    the rate alone would claim a precision the rest of the fit does not have: None. None
    too without `races` (the rate was not fitted, e.g. set by `--set`)."""
    if races is None or not scenario.run.straggler_cut:
        return None
    low, high = discarded_interval(
        report["finished_rollouts_discarded"], result.drawn_late, result.drawn_races, races
    )
    return [low, high]


@command("whatif")
@click.argument("log", type=NamedPath(path_type=Path))  # a log, or a run's folder
@click.option(
    "--compare",
    metavar="P1,P2",
    help=f"Policy presets to run on the fitted world ({field_help()}; default: the recorded "
    "policy).",
)
@click.option(
    "--world",
    type=click.Choice(WORLDS),
    default="shared",
    show_default=True,
    help="shared: rollouts share the fitted servers (durations follow the load); replay: "
    "the recorded durations.",
)
@click.option(
    "--servers",
    type=click.IntRange(min=1),
    default=None,
    help="Inference servers of the recorded run (default: its rollout store's, else 1).",
)
@set_option(
    "overrides", "KEY=VALUE", "Override run.KEY / world.KEY of the fitted world; repeatable."
)
@steps_option("Batches to ship.")
@seed_option("Seed of the draws for work the recorded run never finished.", 0)
@json_option("Print {recorded, policies} as JSON (and the fit, in the shared world).")
@plot_option(PLOT_HELP.replace("Draw", "Draw the fitted decode curve (shared world),"))
@check_option("Check the invariants on every simulated event.")
@file_option(
    "--save-world",
    help="Write the fitted world as a scenario file, NAME.toml (simulate --scenario FILE).",
    kind=SCENARIO_FILE,
)
@rank_by_option()
def whatif_command(
    log: Path,
    compare: str | None,
    world: str,
    servers: int | None,
    overrides: tuple[str, ...],
    steps: int | None,
    seed: int,
    as_json: bool,
    plot: Path | None,
    check: bool,
    save_world: Path | None,
    rank_by: str | None,
) -> None:
    """Fit a world to LOG and report what other staleness policies would have cost on it.

    LOG may be a prime-rl or AReaL run folder: it is imported first (docs/foreign-runs.md)."""
    try:
        settings = parse_set_options(overrides)
    except ConfigError as error:
        raise click.UsageError(str(error)) from error
    chosen = None if compare is None else parse_policies(compare, "--compare")
    log = log_of(log)
    fitted, recorded, recorded_series = fit_recorded(log, seed)
    shared = None
    scenario = fitted.scenario
    if world == "shared":
        shared = fit_shared_world(log, fitted, servers or recorded_servers(log))
        scenario = shared_scenario(fitted, shared)
    try:
        base = with_overrides(scenario, settings)
        if steps is not None:
            base = base.with_steps(steps)
    except ConfigError as error:
        raise click.UsageError(str(error)) from error
    policies = [recorded["policy"]] if chosen is None else chosen
    if save_world is not None:
        save_scenario(base, save_world)
    warnings = [] if shared is None else _warnings(shared, base, policies, recorded["policy"])
    fitted_rate = base.world.late_arrival_rate == fitted.scenario.world.late_arrival_rate
    races = fitted.races if fitted_rate else None
    runs, series = run_whatif(base, policies, quiet=False, check=check, races=races)
    if shared is not None:
        warnings += _echoed(running_warnings(shared, runs, base.world.inference_servers))
    title = f"whatif {log.name}: fitted world, seed {seed}, {base.steps} steps"
    if recorded["steps_shipped"] != base.steps:  # the recorded column stays as recorded
        title += f" (recorded: {recorded['steps_shipped']})"
    if plot is not None:
        _plot(plot, {"recorded": recorded, **runs}, {"recorded": recorded_series, **series},
              title, shared, base, policies)  # fmt: skip
    if as_json:
        fit = None if shared is None else {**fit_report(shared), "warnings": warnings}
        ranked = with_predictions(runs, rank_by, learning_model())
        emit_json({"recorded": recorded, "policies": ranked, "fit": fit})
        return
    console = Console()
    if shared is not None:
        print_fit(shared, console)
    # the recorded column is on the log's clock: wall time for a live run
    print_report({"recorded": recorded, **runs}, title, console, time_label="run time")
    if rank_by is not None:
        print_ranking(runs, rank_by, console, learning_model())
    if races is not None and any(run[INTERVAL_KEY] is not None for run in runs.values()):
        low, high = rate_interval(races)
        console.print(
            f"late-arrival rate {base.world.late_arrival_rate:.4f} from {races.late} late "
            f"arrivals in {races.seen:,.1f} races seen (95%: {low:.4f}-{high:.4f}); "
            "under straggler cuts the discarded count rests on it (docs/whatif.md)"
        )


def save_scenario(scenario: Scenario, path: Path) -> None:
    """`--save-world`: the scenario file, written whole or not at all."""
    try:
        with written_whole(path) as temporary:
            temporary.write_text(scenario_toml(scenario), encoding="utf-8")
    except (OSError, LogError) as error:
        raise BadInput(f"--save-world {path}: {os_problem(error, path)}") from error


def _warnings(fit: SharedFit, base: Scenario, policies: list[str], recorded: str) -> list[str]:
    """The range warnings of every policy, each also printed on stderr as it is found."""
    return _echoed(
        [
            line
            for name in policies
            for line in range_warnings(fit, base.with_policy(name), name, recorded=name == recorded)
        ]
    )


def _echoed(lines: list[str]) -> list[str]:
    """`lines`, each printed on stderr as a warning."""
    for line in lines:
        click.echo(f"rolloutlog: warning: {line}", err=True)
    return lines


def _plot(
    path: Path,
    runs: Runs,
    series: Series,
    title: str,
    shared: SharedFit | None,
    base: Scenario,
    policies: list[str],
) -> None:
    """`--plot`: the trade-off figure, after the fitted decode curve in the shared world."""
    lead = None
    if shared is not None:
        reach = max(base.with_policy(name).run.max_inflight for name in policies)
        lead = decode_panel(shared, reach / base.world.inference_servers)
    try:
        plot_runs(runs, series, path, title, lead=lead)
    except (OSError, RuntimeError, LogError) as error:
        raise BadInput(f"--plot {path}: {os_problem(error, path)}") from error
